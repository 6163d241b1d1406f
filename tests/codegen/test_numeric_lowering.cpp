// lower_numerics: the numeric rules of docs/kernel-ir.md as UOps. Each case runs
// one op over hand-chosen inputs at one lane and at 8 lanes (an upcast range, so
// the expander makes vector ops), compiled (run_kernel.hpp also checks it against
// the interpreter on the kernel before lowering) and, separately, interpreted
// before and after lower_numerics; the values are derived by hand.
#include "codegen/codegen.hpp"
#include "codegen/numeric_lowering.hpp"
#include "codegen/run_kernel.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>

using namespace loom;
using namespace loom::test;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min(),
                  kI32Max = std::numeric_limits<int32_t>::max();

template <class T>
DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::Float32;
  if constexpr (std::is_same_v<T, int32_t>) return DType::Int32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::Int64;
  if constexpr (std::is_same_v<T, uint8_t>) return DType::UInt8;
}

// The values repeated to 16 elements, so an 8-lane kernel sees each value in
// different lanes of two vectors.
template <class T>
std::vector<T> widen(const std::vector<T>& v) {
  std::vector<T> out;
  for (size_t k = 0; k < 16; ++k) out.push_back(v[k % v.size()]);
  return out;
}

// out[i] = f(loads) over 16 elements, `lanes` at a time (1: a plain loop).
template <class R, class F>
UOpPtr elementwise(int lanes, F f) {
  auto out = global(0, dtype_of<R>());
  if (lanes == 1) {
    auto i = make_range(16, 0);
    return sink({end(store(index(out, i), f(i)), {i})});
  }
  auto i = make_range(16 / lanes, 0), j = make_range(lanes, 1, AxisKind::Upcast);
  const UOpPtr at = i * lanes + j;
  return sink({end(store(index(out, at), f(at)), {i, j})});
}

// The kernel before and after lower_numerics agree in the interpreter, and the
// compiled kernel agrees with the interpreter (run_all); returns the compiled output.
template <class R>
std::vector<R> run(const UOpPtr& kernel, const std::string& name, std::vector<Slot> slots) {
  Aligned<R> out(16);
  slots.insert(slots.begin(), Slot(out));
  const UOpPtr lowered = lower_numerics(split_vectors(lower_reduce(expand_lanes(kernel))));
  check_same_results(kernel, lowered, slots);
  run_all(compile_kernel(kernel, name), kernel, slots);
  return out.values();
}

template <class T, class R = T>
std::vector<R> binary(Op op, const std::vector<T>& a, const std::vector<T>& b, int lanes) {
  Aligned<T> in_a(widen(a)), in_b(widen(b));
  const auto kernel = elementwise<R>(lanes, [&](const UOpPtr& at) {
    return alu(op, {load(index(global(1, dtype_of<T>()), at)), load(index(global(2, dtype_of<T>()), at))});
  });
  return run<R>(kernel, fmt::format("{}_{}_x{}", op_name(op), to_string(dtype_of<T>()), lanes), {in_a, in_b});
}

template <class R>
std::vector<R> cast_from_f32(const std::vector<float>& x, int lanes) {
  Aligned<float> in(widen(x));
  const auto kernel = elementwise<R>(lanes, [&](const UOpPtr& at) {
    return cast(load(index(global(1, DType::Float32), at)), dtype_of<R>());
  });
  return run<R>(kernel, fmt::format("cast_f32_{}_x{}", to_string(dtype_of<R>()), lanes), {in});
}

template <class T>
void check_values(const std::vector<T>& got, const std::vector<T>& want) {
  REQUIRE(got.size() == 16);
  for (size_t k = 0; k < got.size(); ++k) {
    const T w = want[k % want.size()];
    INFO("element " << k << ": got " << +got[k] << ", want " << +w);
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(w))
        CHECK(std::isnan(got[k]));
      else
        CHECK((got[k] == w && std::signbit(got[k]) == std::signbit(w)));
    } else {
      CHECK(got[k] == w);
    }
  }
}

}  // namespace

TEST_CASE("numeric_lowering: integer division by 0 gives 0 and INT_MIN / -1 gives INT_MIN") {
  for (int lanes : {1, 8}) {
    INFO(lanes << " lanes");
    // 7 / 0, -7 / 0, INT_MIN / -1, 7 / 2, -7 / 2 (truncates), 0 / 0, INT_MIN / 1, 9 / -3
    const std::vector<int32_t> a = {7, -7, kI32Min, 7, -7, 0, kI32Min, 9};
    const std::vector<int32_t> b = {0, 0, -1, 2, 2, 0, 1, -3};
    check_values(binary<int32_t>(Op::IDIV, a, b, lanes), {0, 0, kI32Min, 3, -3, 0, kI32Min, -3});
    // x % 0 = 0; INT_MIN % -1 = 0; remainders take the dividend's sign: -7 % 2 = -1, 7 % -2 = 1
    const std::vector<int32_t> m = {0, 0, -1, 2, 2, 0, 1, -2};
    check_values(binary<int32_t>(Op::MOD, a, m, lanes), {0, 0, 0, 1, -1, 0, 0, 1});
    const int64_t min64 = std::numeric_limits<int64_t>::min();
    check_values(binary<int64_t>(Op::IDIV, {min64, 5, -9, 4}, {-1, 0, 4, 3}, lanes), {min64, 0, -2, 1});
    check_values(binary<uint8_t>(Op::MOD, {200, 255, 7, 9}, {3, 0, 2, 0}, lanes), {2, 0, 1, 0});
  }
}

TEST_CASE("numeric_lowering: shifts by a count outside [0, bits) shift every bit out") {
  for (int lanes : {1, 8}) {
    INFO(lanes << " lanes");
    // 1 << 31 = INT_MIN; by 32, 33 or -1 all bits leave: 0
    check_values(binary<int32_t>(Op::SHL, {1, 1, 3, 1}, {31, 32, 33, -1}, lanes), {kI32Min, 0, 0, 0});
    // arithmetic: -8 >> 1 = -4; past the width the sign fills: -1 for negatives, 0 otherwise
    check_values(binary<int32_t>(Op::SHR, {-8, -8, 8, -8}, {1, 32, 40, -1}, lanes), {-4, -1, 0, -1});
    check_values(binary<uint8_t>(Op::SHR, {200, 200, 200, 128}, {1, 8, 255, 7}, lanes), {100, 0, 0, 1});
  }
}

TEST_CASE("numeric_lowering: float to integer casts truncate, saturate, and send NaN to 0") {
  for (int lanes : {1, 8}) {
    INFO(lanes << " lanes");
    // 3e9f > INT_MAX saturates; 2^31 (2147483648f) is the first value out of range;
    // -2^31 is INT_MIN exactly; -3.9 truncates toward zero
    check_values(
        cast_from_f32<int32_t>({kNaN, kInf, -kInf, 3e9f, -3e9f, 2147483648.0f, -2147483648.0f, -3.9f}, lanes),
        {0, kI32Max, kI32Min, kI32Max, kI32Min, kI32Max, kI32Min, -3});
    // UInt8: [0, 256); -0.5 truncates to 0, 255.9 to 255
    check_values(cast_from_f32<uint8_t>({kNaN, kInf, -kInf, 300.0f, -5.0f, 255.9f, -0.5f, 2.9f}, lanes),
                 {0, 255, 0, 255, 0, 255, 0, 2});
    const int64_t max64 = std::numeric_limits<int64_t>::max(), min64 = std::numeric_limits<int64_t>::min();
    check_values(cast_from_f32<int64_t>({kNaN, kInf, -kInf, 1e19f}, lanes), {0, max64, min64, max64});
  }
}

TEST_CASE("numeric_lowering: float MAX propagates NaN from either side and orders -0 below +0") {
  for (int lanes : {1, 8}) {
    INFO(lanes << " lanes");
    check_values(binary<float>(Op::MAX, {kNaN, 1, kNaN, -0.0f, 0.0f, -0.0f, 2, -kInf},
                               {1, kNaN, kNaN, 0.0f, -0.0f, -0.0f, 3, -5}, lanes),
                 {kNaN, kNaN, kNaN, 0.0f, 0.0f, -0.0f, 3, -5});
  }
}

TEST_CASE("numeric_lowering: an op range analysis shows safe is left as it is") {
  auto out = global(0, DType::Int64), in = global(1, DType::Int64);
  auto i = make_range(64, 0);
  // i / 16, i % 16 and i << 2: constants neither 0 nor -1, a count in [0, 64)
  const UOpPtr safe = sink({end(store(index(out, i), (i / 16) + (i % 16) + alu(Op::SHL, {i, i64(2)})), {i})});
  CHECK(lower_numerics(safe) == safe);
  // A loaded divisor may be 0: the division is guarded
  const UOpPtr x = load(index(in, i));
  const UOpPtr unsafe = sink({end(store(index(out, i), i / x), {i})});
  CHECK(lower_numerics(unsafe) != unsafe);
  CHECK(unlowered_numerics(*(i / x)) == "the divisor may be 0");
  CHECK(unlowered_numerics(*(i / 16)).empty());
  // Every op left after the pass is one the emitter takes.
  for (const auto& n : toposort(lower_numerics(unsafe))) CHECK(unlowered_numerics(*n).empty());
}

TEST_CASE("numeric_lowering: the emitter refuses what lower_numerics did not lower") {
  auto out = global(0, DType::Int32), in = global(1, DType::Float32);
  auto i = make_range(4, 0);
  const UOpPtr kernel = sink({end(store(index(out, i), cast(load(index(in, i)), DType::Int32)), {i})});
  CHECK_THROWS_WITH_AS(emit_llvm_ir(kernel, "unlowered_cast"),
                       doctest::Contains("CAST i32: a NaN or out-of-range float has no plain conversion"),
                       Error);
  CHECK_NOTHROW(emit_llvm_ir(lower_numerics(kernel), "lowered_cast"));
}

TEST_CASE("numeric_lowering: an 8-lane cast stays one vector conversion in the emitted IR") {
  auto out = global(0, DType::Int32), in = global(1, DType::Float32);
  auto i = make_range(4, 0), j = make_range(8, 1, AxisKind::Upcast);
  const UOpPtr at = i * 8 + j;
  const UOpPtr kernel = sink({end(store(index(out, at), cast(load(index(in, at)), DType::Int32)), {i, j})});
  const std::string ir = emit_llvm_ir(lower_numerics(lower_reduce(expand_lanes(kernel))), "vector_cast");
  CHECK(ir.find("fptosi <8 x float>") != std::string::npos);
  CHECK(ir.find("fptosi.sat") == std::string::npos);  // a call per lane on x86
}

TEST_CASE("numeric_lowering: the interpreter finds no op left whose plain instruction is undefined") {
  // out[i] = a[i] / b[i] and out2[i] = int(x[i]), over a 0 divisor, INT_MIN / -1 and a NaN
  auto out = global(0, DType::Int32), a = global(1, DType::Int32), b = global(2, DType::Int32);
  auto out2 = global(3, DType::Int32), x = global(4, DType::Float32);
  auto i = make_range(4, 0);
  const UOpPtr kernel = sink({end(store(index(out, i), load(index(a, i)) / load(index(b, i))), {i}),
                              end(store(index(out2, i), cast(load(index(x, i)), DType::Int32)), {i})});
  const auto facts = [&](const UOpPtr& k, std::vector<int32_t> divisors, std::vector<float> floats) {
    Aligned<int32_t> o(4), o2(4), da({7, kI32Min, 1, 2}), db(divisors);
    Aligned<float> dx(floats);
    void* bufs[] = {o.data(), da.data(), db.data(), o2.data(), dx.data()};
    return interpret_kernel_checked(k, bufs, {4, 4, 4, 4, 4}, {}).plain_undefined;
  };
  const UOpPtr lowered = lower_numerics(kernel);
  CHECK(facts(kernel, {0, 1, 1, 1}, {1, 2, 3, 4}) == "IDIV i32 divides by 0");
  CHECK(facts(kernel, {1, -1, 1, 1}, {1, 2, 3, 4}) == "IDIV i32 divides INT_MIN by -1");
  CHECK(facts(kernel, {1, 1, 1, 1}, {1, 2, kNaN, 4}).rfind("CAST i32 converts nan", 0) == 0);
  CHECK(facts(kernel, {1, 1, 1, 1}, {1, 2, 3, 4}) == "");
  CHECK(facts(lowered, {0, -1, 1, 1}, {kNaN, 3e9f, -kInf, 4}) == "");
}
