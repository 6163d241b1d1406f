// The JIT on hand-written LLVM IR (runtime/ does not know codegen/): compiles,
// runs, isolates kernels that share a name, and reports every failure as a
// loom::Error naming the kernel.
#include "runtime/jit.hpp"

#include "ir/target.hpp"

#include "support/memory_use.hpp"

#include <loom/error.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

using namespace loom;

namespace {

// out[i] = a[i] * factor + offset for i in [begin, end), with the kernel ABI;
// bufs = {out, a} (int64), vars = {offset}.
std::string scale_ir(const std::string& name, int factor) {
  return fmt::format(R"(
define void @{0}(ptr %bufs, ptr %vars, i64 %begin, i64 %end) nounwind {{
entry:
  %out = load ptr, ptr %bufs
  %a.slot = getelementptr ptr, ptr %bufs, i64 1
  %a = load ptr, ptr %a.slot
  %offset = load i64, ptr %vars
  br label %head
head:
  %i = phi i64 [ %begin, %entry ], [ %next, %body ]
  %more = icmp slt i64 %i, %end
  br i1 %more, label %body, label %exit
body:
  %pa = getelementptr i64, ptr %a, i64 %i
  %x = load i64, ptr %pa
  %y = mul i64 %x, {1}
  %z = add i64 %y, %offset
  %po = getelementptr i64, ptr %out, i64 %i
  store i64 %z, ptr %po
  %next = add nsw i64 %i, 1
  br label %head
exit:
  ret void
}}
)",
                     name, factor);
}

std::vector<int64_t> run_scale(KernelFn fn, int64_t begin, int64_t end, int64_t offset) {
  std::vector<int64_t> out(6, -1), a = {1, 2, 3, 4, 5, 6};
  void* bufs[] = {out.data(), a.data()};
  const int64_t vars[] = {offset};
  fn(bufs, vars, begin, end);
  return out;
}

}  // namespace

TEST_CASE("Jit: compiles IR text and runs the function with the kernel ABI") {
  const JitResult r = Jit::instance().compile(scale_ir("scale3", 3), "scale3");
  REQUIRE((r.fn != nullptr));
  CHECK(r.optimized_ir.empty());  // only printed when asked for
  CHECK(run_scale(r.fn, 0, 6, 100) == std::vector<int64_t>{103, 106, 109, 112, 115, 118});
  CHECK(run_scale(r.fn, 2, 4, 0) == std::vector<int64_t>{-1, -1, 9, 12, -1, -1});
}

TEST_CASE("Jit: two kernels with one name are two functions") {
  const KernelFn twice = Jit::instance().compile(scale_ir("same_name", 2), "same_name").fn;
  const KernelFn ten = Jit::instance().compile(scale_ir("same_name", 10), "same_name").fn;
  CHECK((twice != ten));
  CHECK(run_scale(twice, 0, 1, 0)[0] == 2);
  CHECK(run_scale(ten, 0, 1, 0)[0] == 10);
}

TEST_CASE("Jit: the optimised IR is kept on request") {
  const JitResult r =
      Jit::instance().compile(scale_ir("kept", 4), "kept", JitOptions{.keep_optimized_ir = true});
  CHECK(r.optimized_ir.find("define void @kept(") != std::string::npos);
  CHECK(run_scale(r.fn, 0, 6, 0)[5] == 24);
}

TEST_CASE("Jit: calls into the C math library resolve (llvm.sin, llvm.pow)") {
  const std::string ir = R"(
declare float @llvm.sin.f32(float)
declare double @llvm.pow.f64(double, double)
define void @mathlib(ptr %bufs, ptr %vars, i64 %begin, i64 %end) nounwind {
entry:
  %f = load ptr, ptr %bufs
  %d.slot = getelementptr ptr, ptr %bufs, i64 1
  %d = load ptr, ptr %d.slot
  %x = load float, ptr %f
  %s = call float @llvm.sin.f32(float %x)
  store float %s, ptr %f
  %y = load double, ptr %d
  %p = call double @llvm.pow.f64(double %y, double 0.5)
  store double %p, ptr %d
  ret void
}
)";
  const KernelFn fn = Jit::instance().compile(ir, "mathlib").fn;
  float f = 0.5f;
  double d = 2.0;
  void* bufs[] = {&f, &d};
  fn(bufs, nullptr, 0, 1);
  CHECK(f == doctest::Approx(std::sin(0.5)).epsilon(1e-6));
  CHECK(d == doctest::Approx(std::sqrt(2.0)).epsilon(1e-12));
}

TEST_CASE("Jit: IR that does not parse is an error naming the kernel, and the next compile works") {
  CHECK_THROWS_WITH_AS(Jit::instance().compile("define void @bad( {", "bad_kernel"),
                       doctest::Contains("kernel 'bad_kernel': the LLVM IR does not parse"), Error);
  CHECK(run_scale(Jit::instance().compile(scale_ir("after_bad", 5), "after_bad").fn, 0, 1, 0)[0] == 5);
}

TEST_CASE("Jit: every failure names the kernel") {
  SUBCASE("IR that parses but does not verify") {
    const std::string ir = R"(
define void @unverified(ptr %bufs, ptr %vars, i64 %begin, i64 %end) {
entry:
  %a = add i64 %b, 1
  %b = add i64 %a, 1
  ret void
}
)";
    CHECK_THROWS_WITH_AS(Jit::instance().compile(ir, "unverified"),
                         doctest::Contains("kernel 'unverified': the LLVM IR does not verify"), Error);
  }
  SUBCASE("no function of the kernel's name") {
    CHECK_THROWS_WITH_AS(Jit::instance().compile(scale_ir("other", 1), "wanted"),
                         doctest::Contains("kernel 'wanted': the LLVM IR defines no function of that name"),
                         Error);
  }
  SUBCASE("a symbol that cannot be linked") {
    const std::string ir = R"(
declare void @loom_no_such_function()
define void @unlinked(ptr %bufs, ptr %vars, i64 %begin, i64 %end) {
entry:
  call void @loom_no_such_function()
  ret void
}
)";
    CHECK_THROWS_WITH_AS(Jit::instance().compile(ir, "unlinked"),
                         doctest::Contains("kernel 'unlinked': compiling or linking failed"), Error);
  }
  CHECK(run_scale(Jit::instance().compile(scale_ir("after_errors", 7), "after_errors").fn, 0, 1, 0)[0] == 7);
}

TEST_CASE("Jit: threads compile at the same time") {
  constexpr int kThreads = 4, kEach = 6;
  std::vector<std::vector<KernelFn>> fns(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &fns] {
      for (int k = 0; k < kEach; ++k) {
        const int factor = t * 100 + k;
        fns[static_cast<size_t>(t)].push_back(
            Jit::instance()
                .compile(scale_ir(fmt::format("par_{}", factor), factor), fmt::format("par_{}", factor))
                .fn);
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    for (int k = 0; k < kEach; ++k)
      CHECK(run_scale(fns[static_cast<size_t>(t)][static_cast<size_t>(k)], 0, 1, 0)[0] == t * 100 + k);
}

TEST_CASE("Jit: describes the host it compiles for") {
  CHECK_FALSE(Jit::instance().host_cpu().empty());
#if defined(__x86_64__)
  CHECK(Jit::instance().host_features().find("+sse2") != std::string::npos);
#endif
}

TEST_CASE("Jit: an object loads twice as two copies; each copy's code is freed with its last handle") {
  const size_t before = Jit::instance().live_code_bytes();
  const JitObject object = Jit::instance().compile_object(scale_ir("owned", 6), "owned");
  CHECK(object.bytes.size() > 0);
  CHECK(object.timings.codegen > 0);
  auto first = Jit::instance().load(object.bytes, "owned");
  auto second = Jit::instance().load(object.bytes, "owned");
  CHECK((first->fn() != second->fn()));
  CHECK(first->code_bytes() >= 4096);  // whole pages
  CHECK(Jit::instance().live_code_bytes() == before + first->code_bytes() + second->code_bytes());
  CHECK(run_scale(first->fn(), 0, 1, 1)[0] == 7);
  const size_t second_bytes = second->code_bytes();
  first.reset();
  CHECK(Jit::instance().live_code_bytes() == before + second_bytes);
  CHECK(run_scale(second->fn(), 0, 1, 2)[0] == 8);
  second.reset();
  CHECK(Jit::instance().live_code_bytes() == before);
}

TEST_CASE("Jit: the light level gives the same results") {
  const JitObject object =
      Jit::instance().compile_object(scale_ir("light", 5), "light", JitOptions{.level = JitLevel::Light});
  auto code = Jit::instance().load(object.bytes, "light");
  CHECK(run_scale(code->fn(), 0, 6, 1) == std::vector<int64_t>{6, 11, 16, 21, 26, 31});
}

TEST_CASE("Jit: the bulk level (O0 code generation) gives the same results") {
  const JitObject object =
      Jit::instance().compile_object(scale_ir("bulk", 5), "bulk", JitOptions{.level = JitLevel::Bulk});
  auto code = Jit::instance().load(object.bytes, "bulk");
  CHECK(run_scale(code->fn(), 0, 6, 1) == std::vector<int64_t>{6, 11, 16, 21, 26, 31});
}

TEST_CASE("Jit: an object that is not a whole object file is an error naming the kernel, never a crash") {
  const size_t before = Jit::instance().live_code_bytes();
  const std::string whole = Jit::instance().compile_object(scale_ir("cut", 2), "cut").bytes;
  for (const std::string& broken :
       {whole.substr(0, whole.size() / 2), whole.substr(0, 16), std::string("junk")})
    CHECK_THROWS_WITH_AS(Jit::instance().load(broken, "cut"), doctest::Contains("kernel 'cut'"), Error);
  CHECK(Jit::instance().live_code_bytes() == before);
  CHECK(run_scale(Jit::instance().load(whole, "cut")->fn(), 0, 1, 0)[0] == 2);
}

TEST_CASE("Jit: a kernel's footprint covers what the JIT really holds for it, code pages and bookkeeping") {
  if (test::address_sanitizer()) return;  // mallinfo2 does not see ASan's allocator
  // As loom emits kernels: without nounwind, so each registers its unwind frames.
  std::string ir = scale_ir("held", 3);
  ir.erase(ir.find(" nounwind"), 9);
  const JitObject object = Jit::instance().compile_object(ir, "held");
  const auto first = Jit::instance().load(object.bytes, "held");  // what all later loads share is set up
  constexpr size_t kLoads = 300;
  const size_t heap = test::heap_bytes(), code = Jit::instance().live_code_bytes();
  std::vector<std::shared_ptr<const JitCode>> held;
  for (size_t i = 0; i < kLoads; ++i) held.push_back(Jit::instance().load(object.bytes, "held"));
  const size_t per_kernel = (test::heap_bytes() - heap + Jit::instance().live_code_bytes() - code) / kLoads;
  MESSAGE("held per loaded kernel: ", per_kernel, " bytes; footprint_bytes: ", first->footprint_bytes(),
          "; object ", object.bytes.size());
  CHECK(first->footprint_bytes() >= per_kernel);
  CHECK(first->footprint_bytes() <= 2 * per_kernel);  // a measure, not a guess far above it
  CHECK(run_scale(held.back()->fn(), 0, 1, 1)[0] == 4);
  held.clear();
  Jit::release_unused();
  CHECK(Jit::instance().live_code_bytes() == code);
  CHECK(test::heap_bytes() <= heap + 64 * 1024);  // the bookkeeping went with the code
}

namespace {
// out[i] = fma(a[i], 2, 1) over 16 floats, as one <16 x float> vector.
std::string fma16_ir(const std::string& name) {
  return fmt::format(R"(
define void @{0}(ptr %bufs, ptr %vars, i64 %begin, i64 %end) nounwind {{
entry:
  %out = load ptr, ptr %bufs
  %a.slot = getelementptr ptr, ptr %bufs, i64 1
  %a = load ptr, ptr %a.slot
  %x = load <16 x float>, ptr %a, align 64
  %y = call <16 x float> @llvm.fma.v16f32(<16 x float> %x, <16 x float> splat (float 2.0), <16 x float> splat (float 1.0))
  store <16 x float> %y, ptr %out, align 64
  ret void
}}
declare <16 x float> @llvm.fma.v16f32(<16 x float>, <16 x float>, <16 x float>)
)",
                     name);
}
}  // namespace

TEST_CASE("Jit: a preset target's code has only its level's instructions: x86-64-v3 has no zmm") {
  if (!host_target().isa.avx2 || !host_target().isa.fma) return;  // the host has no v3
  auto run = [](KernelFn fn) {
    alignas(64) float a[16], out[16];
    for (int i = 0; i < 16; ++i) a[i] = static_cast<float>(i) - 3.5f;
    void* bufs[] = {out, a};
    fn(bufs, nullptr, 0, 1);
    for (int i = 0; i < 16; ++i) CHECK(out[i] == a[i] * 2 + 1);
  };
  const JitResult v3 = Jit::instance().compile(fma16_ir("fma16_v3"), "fma16_v3",
                                               JitOptions{.keep_assembly = true, .target = "x86-64-v3"});
  CHECK(v3.assembly.find("zmm") == std::string::npos);
  CHECK(v3.assembly.find("vfmadd") != std::string::npos);  // FMA is part of v3
  CHECK(v3.assembly.find("ymm") != std::string::npos);
  run(v3.fn);
  const JitResult native =
      Jit::instance().compile(fma16_ir("fma16_native"), "fma16_native", JitOptions{.keep_assembly = true});
  CHECK((native.assembly.find("zmm") != std::string::npos) == host_target().isa.avx512f);
  run(native.fn);
  const std::string features = Jit::instance().target_features("x86-64-v3");
  CHECK(features.find("+avx2") != std::string::npos);
  CHECK(features.find("+avx512f") == std::string::npos);
  CHECK(features.find("+avxvnni") == std::string::npos);  // beyond the level, though the host may have it
  CHECK_THROWS_AS(
      Jit::instance().compile_object(fma16_ir("fma16_bad"), "fma16_bad", JitOptions{.target = "nope"}),
      Error);
}
