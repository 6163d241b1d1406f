// half_widening and the emitter's half conversions: every one of the 2^32 float32
// bit patterns narrowed to bfloat16 and to float16 by a JIT-compiled kernel (16
// lanes, so the vector code) matches a reference written from the IEEE 754
// definition (tests/support/half_reference.hpp: scale, round the significand to
// nearest even, encode), and so does include/loom/half.hpp's conversion; every
// 16-bit pattern widens exactly. Each at every preset the host runs, named
// explicitly: the Target's instructions (F16C, AVX512_BF16) where it has them, the
// integer formulas where not, give the same bits. Hand-derived cases and
// arithmetic in half dtypes run compiled and interpreted.
#include "codegen/codegen.hpp"
#include "codegen/run_kernel.hpp"
#include "support/half_reference.hpp"
#include "support/memory_use.hpp"

#include <loom/half.hpp>

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

using namespace loom;
using namespace loom::test;
using loom::half_ref::Format;
using loom::half_ref::ieee_round;
using loom::half_ref::ieee_widen;
using loom::half_ref::kBF16;
using loom::half_ref::kF16;

namespace {

// out[i] = CAST<to>(in[i]) over n elements, `lanes` at a time.
UOpPtr cast_kernel(DType from, DType to, int64_t n, int64_t lanes = 16) {
  auto out = global(0, to), in = global(1, from);
  auto i = make_range(n / lanes, 0);
  if (lanes == 1)
    return widen_halves(sink({end(store(index(out, i), UOp::make(Op::CAST, to, {load(in, i)})), {i})}));
  auto j = make_range(lanes, 1, AxisKind::Upcast);
  const UOpPtr at = i * lanes + j;
  const UOpPtr value = UOp::make(Op::CAST, to, {load(in, at)});
  return widen_halves(sink({end(store(index(out, at), value), {i, j})}));
}

uint16_t host_round(uint32_t w, Format f) {
  const float x = __builtin_bit_cast(float, w);
  return f.ebits == 8 ? bfloat16(x).bits : float16(x).bits;
}

// The presets the host can run: native (here with F16C and AVX512_BF16), x86-64-v3
// (F16C, no AVX512_BF16) and x86-64-v2 (neither: the integer formulas).
std::vector<std::string> presets() {
  std::vector<std::string> out;
  for (const char* name : {"native", "x86-64-v3", "x86-64-v2"}) try {
      target_named(name);
      out.emplace_back(name);
    } catch (const Error&) {
    }
  return out;
}

// Every float32 pattern through the narrowing compiled for each preset in `targets`,
// in chunks on 2 threads, the reference computed once a chunk (inlined: the calls were
// a third of the time). Under the sanitizers (several times
// slower) every 16th chunk, and always those of the float32 subnormals and of inf
// and NaN, so the pass stays seconds.
void check_every_float(DType to, Format f, const std::vector<std::string>& targets) {
  constexpr int64_t kChunk = int64_t{1} << 22;
  constexpr uint64_t kChunks = (uint64_t{1} << 32) / kChunk;
  std::vector<KernelFn> fns;
  for (const std::string& t : targets)
    fns.push_back(
        compile_kernel_for(cast_kernel(DType::Float32, to, kChunk), "narrow_" + to_string(to), t).fn);
  const bool every_chunk = !address_sanitizer();
  auto sampled = [every_chunk](uint64_t c) {
    const uint32_t top = static_cast<uint32_t>(c * kChunk) & 0x7fffffffu;
    return every_chunk || c % 16 == 0 || top == 0 || top >= (0x7f800000u & ~uint32_t(kChunk - 1));
  };
  std::vector<std::atomic<int64_t>> mismatches(targets.size());
  std::vector<std::atomic<uint32_t>> first_bad(targets.size());
  std::atomic<int64_t> host_mismatches{0}, checked{0};
  auto work = [&](uint64_t first_chunk, uint64_t step) __attribute__((flatten)) {
    Aligned<uint32_t> in(kChunk);
    Aligned<uint16_t> want(kChunk), out(kChunk);
    for (uint64_t c = first_chunk; c < kChunks; c += step) {
      if (!sampled(c)) continue;
      const uint32_t base = static_cast<uint32_t>(c * kChunk);
      uint32_t* const x = in.data();  // raw pointers: Aligned's accessors stay at -O0
      uint16_t* const w = want.data();
      const uint16_t* const y = out.data();
      int64_t host_bad = 0;
      for (int64_t k = 0; k < kChunk; ++k) {
        x[k] = base + static_cast<uint32_t>(k);
        w[k] = ieee_round(x[k], f);
        host_bad += host_round(x[k], f) != w[k];
      }
      host_mismatches += host_bad;
      for (size_t t = 0; t < fns.size(); ++t) {
        void* bufs[] = {out.data(), in.data()};
        fns[t](bufs, nullptr, 0, kChunk / 16);
        int64_t bad = 0;
        for (int64_t k = 0; k < kChunk; ++k) bad += y[k] != w[k];  // branch-free: vectorised
        for (int64_t k = 0; bad > 0 && k < kChunk; ++k)
          if (y[k] != w[k]) {
            first_bad[t] = x[k];
            break;
          }
        mismatches[t] += bad;
      }
      checked += kChunk;
    }
  };
  std::thread other(work, 1, 2);
  work(0, 2);
  other.join();
  CHECK(checked.load() >= (address_sanitizer() ? int64_t{1} << 28 : int64_t{1} << 32));
  CHECK(host_mismatches.load() == 0);
  for (size_t t = 0; t < targets.size(); ++t) {
    INFO("target " << targets[t] << ": first mismatch at float bits 0x" << std::hex << first_bad[t].load()
                   << ", want 0x" << ieee_round(first_bad[t], f));
    CHECK(mismatches[t].load() == 0);
  }
}

// `values` narrowed by a kernel of `lanes` lanes compiled for the preset `target`.
std::vector<uint16_t> narrow(DType to, const std::vector<float>& values, const std::string& target,
                             int64_t lanes) {
  std::vector<float> padded = values;
  padded.resize((values.size() + 15) / 16 * 16, 0.0f);
  const auto n = static_cast<int64_t>(padded.size());
  const UOpPtr kernel = cast_kernel(DType::Float32, to, n, lanes);
  Aligned<uint16_t> out(padded.size());
  Aligned<float> in(padded);
  run_all(compile_kernel_for(kernel, "narrow_cases_" + to_string(to), target).fn, kernel, {out, in});
  std::vector<uint16_t> got = out.values();
  got.resize(values.size());
  return got;
}

}  // namespace

// x86-64-v2 narrows to bfloat16 by the integer formula as x86-64-v3 does (neither has
// AVX512_BF16), only in narrower vectors: not worth a third pass.
TEST_CASE("half_widening: every float32 narrows to bfloat16 as the IEEE definition rounds") {
  std::vector<std::string> targets = presets();
  std::erase(targets, "x86-64-v2");
  check_every_float(DType::BFloat16, kBF16, targets);
}

TEST_CASE("half_widening: every float32 narrows to float16 as the IEEE definition rounds") {
  check_every_float(DType::Float16, kF16, presets());
}

TEST_CASE("half_widening: every bfloat16 and float16 pattern widens exactly") {
  for (const auto& [dt, f] : {std::pair{DType::BFloat16, kBF16}, std::pair{DType::Float16, kF16}})
    for (const std::string& target : presets()) {
      INFO(to_string(dt) << " at " << target);
      constexpr int64_t n = 65536;
      const UOpPtr kernel = cast_kernel(dt, DType::Float32, n);
      Aligned<uint32_t> out(n);
      Aligned<uint16_t> in(n);
      for (int64_t k = 0; k < n; ++k) in[k] = static_cast<uint16_t>(k);
      run_all(compile_kernel_for(kernel, "widen_" + to_string(dt), target).fn, kernel, {out, in});
      int64_t bad = 0;
      for (int64_t k = 0; k < n; ++k) {
        const uint32_t want = std::bit_cast<uint32_t>(ieee_widen(static_cast<uint16_t>(k), f));
        const float host = dt == DType::BFloat16 ? float(bfloat16::from_bits(static_cast<uint16_t>(k)))
                                                 : float(float16::from_bits(static_cast<uint16_t>(k)));
        bad += out[k] != want || std::bit_cast<uint32_t>(host) != want;
      }
      CHECK(bad == 0);
    }
}

// Values derived by hand from the formats: bf16 keeps 8 significant bits and
// float32's exponents; f16 11 bits, exponents -14..15, subnormals down to 2^-24.
TEST_CASE("half_widening: hand-derived narrowings") {
  const float nan_payload = std::bit_cast<float>(0x7fa12345u);  // signalling, payload 0x212345
  const std::vector<float> in{0.1f,
                              1.0f,
                              65504.0f,
                              65520.0f,
                              65519.0f,
                              0x1p-24f,
                              0x1p-25f,
                              0x1.8p-25f,
                              0x1p-133f,
                              -0.0f,
                              1.0f + 0x1p-8f,
                              1.0f + 0x1.8p-8f,
                              1.0f + 0x1p-11f,
                              1.0f + 0x3p-11f,
                              nan_payload,
                              -INFINITY,
                              std::bit_cast<float>(0x007f8000u),
                              -0x1p-133f};
  // 0.1 = 0x3dcccccd: bf16 rounds up to 0x3dcd; f16 0x2e66 (0.0999755859375).
  // 1 + 2^-8 is half way between bf16 1 and 1 + 2^-7: ties to even gives 1 (0x3f80);
  // 1 + 1.5 2^-8 rounds up (0x3f81); both are f16 values (0x3c04, 0x3c06). For f16 1 + 2^-11 ties down to
  // 0x3c00, 1 + 3 2^-11 up to 0x3c02. 65520 is half way past 65504 (0x7bff, odd): f16 inf; 65519 rounds to
  // 65504. 2^-24 is f16's smallest subnormal (0x0001); 2^-25 ties to 0; 1.5 2^-25 rounds up to 0x0001. 2^-133
  // is a bf16 subnormal: 2^-133 = 2^-126 2^-7 -> mantissa 0x01. A signalling NaN narrows quiet with its top
  // payload bits: bf16 0x7fa1 | 0x40 = 0x7fe1; f16 0x7c00 | 0x200 | (0x212345 >> 13 = 0x109) = 0x7f09.
  // The float32 subnormal 0x007f8000 is half way between bf16 0x007f (odd) and 0x0080, the smallest
  // normal: ties to even gives 0x0080 (vcvtneps2bf16 alone would read it, and 2^-133, as 0). Every preset
  // the host runs, each at 1, 4, 8 and 16 lanes (the scalar, the 128- and 256-bit forms, the widest).
  const std::vector<uint16_t> bf16{0x3dcd, 0x3f80, 0x4780, 0x4780, 0x4780, 0x3380, 0x3300, 0x3340, 0x0001,
                                   0x8000, 0x3f80, 0x3f81, 0x3f80, 0x3f80, 0x7fe1, 0xff80, 0x0080, 0x8001};
  const std::vector<uint16_t> f16{0x2e66, 0x3c00, 0x7bff, 0x7c00, 0x7bff, 0x0001, 0x0000, 0x0001, 0x0000,
                                  0x8000, 0x3c04, 0x3c06, 0x3c00, 0x3c02, 0x7f09, 0xfc00, 0x0000, 0x8000};
  for (const std::string& target : presets())
    for (const int64_t lanes : {1, 4, 8, 16}) {
      INFO(target << ", " << lanes << " lanes");
      CHECK(narrow(DType::BFloat16, in, target, lanes) == bf16);
      CHECK(narrow(DType::Float16, in, target, lanes) == f16);
    }
}

// The narrowings use the Target's instructions where it has them, and only there:
// the assembly of a cast kernel compiled for each preset, named explicitly.
TEST_CASE("half_widening: the conversions use F16C and AVX512_BF16 where the Target has them") {
  auto assembly = [](DType from, DType to, const std::string& target) {
    return compile_kernel_for(cast_kernel(from, to, 64), "asm_" + to_string(to), target, true).assembly;
  };
  for (const std::string& target : presets()) {
    INFO(target);
    const TargetIsa& isa = target_named(target).isa;
    const std::string to_bf16 = assembly(DType::Float32, DType::BFloat16, target);
    const std::string to_f16 = assembly(DType::Float32, DType::Float16, target);
    const std::string from_f16 = assembly(DType::Float16, DType::Float32, target);
    CHECK((to_bf16.find("vcvtneps2bf16") != std::string::npos) == (isa.avx512bf16 && isa.avx512vl));
    CHECK((to_f16.find("vcvtps2ph") != std::string::npos) == isa.f16c);
    CHECK((from_f16.find("vcvtph2ps") != std::string::npos) == isa.f16c);
    for (const std::string* code : {&to_bf16, &to_f16, &from_f16})
      CHECK(code->find("call") == std::string::npos);  // no libm conversion routine
  }
}

// bf16 arithmetic computes in float32 and rounds once: 1 + 2^-8 is not a bf16, so
// 1 + 2^-8 in bf16 ties to 1, while float32 keeps it; the interpreter agrees.
TEST_CASE("half_widening: an add of halves computes in float32 and rounds once") {
  for (const DType dt : {DType::BFloat16, DType::Float16}) {
    INFO(to_string(dt));
    auto out = global(0, dt), a = global(1, dt), b = global(2, dt);
    auto i = make_range(1, 0), j = make_range(16, 1, AxisKind::Upcast);
    const UOpPtr at = i * 16 + j;
    const UOpPtr kernel = widen_halves(sink({end(store(index(out, at), load(a, at) + load(b, at)), {i, j})}));
    for (const auto& n : toposort(kernel))
      if (n->op == Op::ADD) CHECK(n->dtype.base() != dt);  // the add is float32 (or the index's int64)
    const float tiny = dt == DType::BFloat16 ? 0x1p-8f : 0x1p-11f;
    auto bits = [&](float x) { return dt == DType::BFloat16 ? bfloat16(x).bits : float16(x).bits; };
    Aligned<uint16_t> o(16), in_a(16, bits(1.0f)), in_b(16, bits(tiny)), in_c(16, bits(3 * tiny));
    run_all(compile_kernel(kernel, "add_" + to_string(dt)), kernel, {o, in_a, in_b});
    CHECK(o[0] == bits(1.0f));  // 1 + tiny ties to even: 1
    run_all(compile_kernel(kernel, "add3_" + to_string(dt)), kernel, {o, in_a, in_c});
    CHECK(o[5] == bits(1.0f + 4 * tiny));  // 1 + 3 tiny ties up to the even 1 + 4 tiny
  }
}
