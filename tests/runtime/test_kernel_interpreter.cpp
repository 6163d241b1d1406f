// The kernel-IR interpreter (tests/support) on hand-built kernels whose results
// are worked out by hand from docs/kernel-ir.md.
#include "support/kernel_builders.hpp"
#include "support/kernel_interpreter.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using namespace loom;
using namespace loom::kb;

namespace {
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();

// out[i] = f(in[i]) for i < n: one input slot (0), one output slot (1).
UOpPtr map_kernel(DType in, DType out, int64_t n, UOpPtr (*f)(const UOpPtr&)) {
  auto r = make_range(n, 0);
  auto x = load(index(global(0, in), r));
  return sink({end(store(index(global(1, out), r), f(x)), {r})});
}

// out[i] = a[i] op b[i] for i < n: slots 0 and 1 in, 2 out.
UOpPtr zip_kernel(Op op, DType in, DType out, int64_t n) {
  auto r = make_range(n, 0);
  auto a = load(index(global(0, in), r)), b = load(index(global(1, in), r));
  return sink({end(store(index(global(2, out), r), alu(op, {a, b})), {r})});
}

template <class In, class Out>
std::vector<Out> run_map(UOpPtr (*f)(const UOpPtr&), DType in_dt, DType out_dt, std::vector<In> in) {
  std::vector<Out> out(in.size());
  void* bufs[] = {in.data(), out.data()};
  interpret_kernel(map_kernel(in_dt, out_dt, static_cast<int64_t>(in.size()), f), bufs, {});
  return out;
}

template <class In, class Out>
std::vector<Out> run_zip(Op op, DType in_dt, DType out_dt, std::vector<In> a, std::vector<In> b) {
  std::vector<Out> out(a.size());
  void* bufs[] = {a.data(), b.data(), out.data()};
  interpret_kernel(zip_kernel(op, in_dt, out_dt, static_cast<int64_t>(a.size())), bufs, {});
  return out;
}

// The scalar `out[0] = REDUCE(op, in[j] for j < n)`: a bare STORE, no loops.
float reduce_f32(Op op, std::vector<float> in) {
  auto j = make_range(static_cast<int64_t>(in.size()), 1, AxisKind::Reduce);
  auto value = reduce(op, load(index(global(0, DType::Float32), j)), {j});
  auto kernel = sink({store(index(global(1, DType::Float32), i64(0)), value)});
  float out = -1;
  void* bufs[] = {in.data(), &out};
  interpret_kernel(kernel, bufs, {});
  return out;
}
}  // namespace

TEST_CASE("elementwise: out[i] = a[i] * 2 + b[i]") {
  auto r = make_range(4, 0, AxisKind::Parallel);
  auto a = load(index(global(0, DType::Float32), r)), b = load(index(global(1, DType::Float32), r));
  auto kernel =
      sink({end(store(index(global(2, DType::Float32), r), a * const_float(DType::Float32, 2) + b), {r})});
  std::vector<float> av = {1, 2, 3, 4}, bv = {0.5f, -1, 10, 0}, out(4, -7);
  void* bufs[] = {av.data(), bv.data(), out.data()};

  SUBCASE("the whole parallel range") {
    interpret_kernel(kernel, bufs, {});
    CHECK(out == std::vector<float>{2.5f, 3, 16, 8});
  }
  SUBCASE("one slice [1, 3) of the parallel range, as the executor would call it") {
    interpret_kernel(kernel, bufs, {}, 1, 3);
    CHECK(out == std::vector<float>{-7, 3, 16, -7});
  }
}

TEST_CASE("masked load: a pad reads 0 where invalid and never touches memory there") {
  // out[i] = (1 <= i < 4) ? a[i - 1] : 0 for i < 6; a has 3 elements, so i - 1 = -1 and 3, 4
  // would be out of bounds.
  auto i = make_range(6, 0);
  auto valid = land(const_int(DType::Int64, 0) < i, i < 4);
  auto x = load(index(global(0, DType::Float32), i - 1, valid));
  auto kernel = sink({end(store(index(global(1, DType::Float32), i), x), {i})});
  std::vector<float> a = {7, 8, 9}, out(6, -1);
  void* bufs[] = {a.data(), out.data()};
  interpret_kernel(kernel, bufs, {});
  CHECK(out == std::vector<float>{0, 7, 8, 9, 0, 0});
}

TEST_CASE("masked store: skipped where invalid") {
  auto i = make_range(5, 0);
  auto even = eq(i % 2, i64(0));
  auto kernel = sink({end(store(index(global(0, DType::Int32), i, even), cast(i, DType::Int32) * 10), {i})});
  std::vector<int32_t> out(5, -1);
  void* bufs[] = {out.data()};
  interpret_kernel(kernel, bufs, {});
  CHECK(out == std::vector<int32_t>{0, -1, 20, -1, 40});
}

TEST_CASE("reductions: sum, product, max; NaN propagates through max; empty reductions give the identity") {
  CHECK(reduce_f32(Op::ADD, {1, 2, 3, 4.5f}) == 10.5f);
  CHECK(reduce_f32(Op::MUL, {2, -3, 0.5f}) == -3.0f);
  CHECK(reduce_f32(Op::MAX, {3, -1, 7, 2}) == 7.0f);
  CHECK(reduce_f32(Op::MAX, {-5, -2, -9}) == -2.0f);
  CHECK(std::isnan(reduce_f32(Op::MAX, {3, kNaN, 7})));
  CHECK(std::isnan(reduce_f32(Op::MAX, {kNaN, 1})));
  CHECK(reduce_f32(Op::ADD, {}) == 0.0f);
  CHECK(reduce_f32(Op::MAX, {}) == -std::numeric_limits<float>::infinity());
  // Float32 sums round after every step: 2^24 + 1 is not a float, so 1 is lost each time.
  CHECK(reduce_f32(Op::ADD, {16777216.0f, 1, 1, 1}) == 16777216.0f);
}

TEST_CASE("integer reductions wrap and start from the dtype's lowest value") {
  auto j = make_range(3, 1, AxisKind::Reduce);
  auto x = load(index(global(0, DType::Int32), j));
  auto kernel = sink({store(index(global(1, DType::Int32), i64(0)), reduce(Op::ADD, x, {j})),
                      store(index(global(1, DType::Int32), i64(1)), reduce(Op::MAX, x, {j}))});
  std::vector<int32_t> in = {kI32Max, 2, kI32Min}, out(2, 5);
  void* bufs[] = {in.data(), out.data()};
  interpret_kernel(kernel, bufs, {});
  CHECK(out[0] == 1);  // (2^31 - 1) + 2 wraps to -2^31 + 1; + (-2^31) wraps to 1
  CHECK(out[1] == kI32Max);
}

TEST_CASE("matrix-vector: a reduce nested in the output loop") {
  // y[i] = sum_j M[i * 3 + j] * x[j], M = [[1, 2, 3], [4, 5, 6]], x = [1, 2, 3] -> [14, 32]
  auto i = make_range(2, 0, AxisKind::Parallel);
  auto j = make_range(3, 1, AxisKind::Reduce);
  auto m = load(index(global(0, DType::Float32), i * 3 + j));
  auto x = load(index(global(1, DType::Float32), j));
  auto kernel = sink({end(store(index(global(2, DType::Float32), i), reduce(Op::ADD, m * x, {j})), {i})});
  std::vector<float> mv = {1, 2, 3, 4, 5, 6}, xv = {1, 2, 3}, y(2, 0);
  void* bufs[] = {mv.data(), xv.data(), y.data()};
  interpret_kernel(kernel, bufs, {});
  CHECK(y == std::vector<float>{14, 32});
}

TEST_CASE("a 2-d output with two loops: a transpose") {
  // out[c * 2 + r] = in[r * 3 + c], in = [[1, 2, 3], [4, 5, 6]]
  auto r = make_range(2, 0), c = make_range(3, 1);
  auto v = load(index(global(0, DType::Int64), r * 3 + c));
  auto kernel = sink({end(store(index(global(1, DType::Int64), c * 2 + r), v), {r, c})});
  std::vector<int64_t> in = {1, 2, 3, 4, 5, 6}, out(6, 0);
  void* bufs[] = {in.data(), out.data()};
  interpret_kernel(kernel, bufs, {});
  CHECK(out == std::vector<int64_t>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("variables: vars[i] is the i-th DEFINE_VAR sorted by name") {
  // out[i] = i * b + a, with vars = {a, b} = {100, 3} whatever order they appear in
  auto i = make_range(3, 0);
  auto a = make_var("a", 0, 1000), b = make_var("b", 0, 1000);
  auto kernel = sink({end(store(index(global(0, DType::Int64), i), i * b + a), {i})});
  std::vector<int64_t> out(3, 0);
  void* bufs[] = {out.data()};
  interpret_kernel(kernel, bufs, {100, 3});
  CHECK(out == std::vector<int64_t>{100, 103, 106});
  CHECK_THROWS_AS(interpret_kernel(kernel, bufs, {100}), Error);
}

TEST_CASE("int32 arithmetic wraps at 32 bits") {
  using V = std::vector<int32_t>;
  CHECK(run_zip<int32_t, int32_t>(Op::ADD, DType::Int32, DType::Int32, V{kI32Max, -1, kI32Min},
                                  V{1, 1, -1}) == V{kI32Min, 0, kI32Max});
  CHECK(run_zip<int32_t, int32_t>(Op::MUL, DType::Int32, DType::Int32, V{65536, 65537}, V{65536, 65537}) ==
        V{0, 131073});  // 65537^2 = 2^32 + 2^17 + 1
  CHECK(run_map<int32_t, int32_t>([](const UOpPtr& x) { return -x; }, DType::Int32, DType::Int32,
                                  V{5, kI32Min}) == V{-5, kI32Min});
  using U = std::vector<uint8_t>;
  CHECK(run_zip<uint8_t, uint8_t>(Op::ADD, DType::UInt8, DType::UInt8, U{250, 3}, U{10, 4}) == U{4, 7});
}

TEST_CASE("IDIV and MOD truncate toward zero; by zero gives 0; INT_MIN / -1 gives INT_MIN") {
  using V = std::vector<int32_t>;
  const V a = {7, -7, 7, -7, 5, -5, kI32Min, kI32Min}, b = {2, 2, -2, -2, 0, 0, -1, 3};
  CHECK(run_zip<int32_t, int32_t>(Op::IDIV, DType::Int32, DType::Int32, a, b) ==
        V{3, -3, -3, 3, 0, 0, kI32Min, -715827882});
  CHECK(run_zip<int32_t, int32_t>(Op::MOD, DType::Int32, DType::Int32, a, b) == V{1, -1, 1, -1, 0, 0, 0, -2});
  using W = std::vector<int64_t>;
  const int64_t i64_min = std::numeric_limits<int64_t>::min();
  CHECK(run_zip<int64_t, int64_t>(Op::IDIV, DType::Int64, DType::Int64, W{i64_min, 9}, W{-1, 0}) ==
        W{i64_min, 0});
  CHECK(run_zip<int64_t, int64_t>(Op::MOD, DType::Int64, DType::Int64, W{i64_min, 9}, W{-1, 0}) == W{0, 0});
  using U = std::vector<uint8_t>;  // unsigned: 200 / 3 = 66 r 2 (as signed bytes it would be -56 / 3)
  CHECK(run_zip<uint8_t, uint8_t>(Op::IDIV, DType::UInt8, DType::UInt8, U{200, 9}, U{3, 0}) == U{66, 0});
  CHECK(run_zip<uint8_t, uint8_t>(Op::MOD, DType::UInt8, DType::UInt8, U{200, 9}, U{3, 0}) == U{2, 0});
}

TEST_CASE("shifts: counts outside [0, bits) give 0, or -1 for SHR of a negative signed value") {
  using V = std::vector<int32_t>;
  CHECK(run_zip<int32_t, int32_t>(Op::SHL, DType::Int32, DType::Int32, V{1, 1, 3, 1, 1},
                                  V{4, 31, 30, 32, -1}) ==
        V{16, kI32Min, -1073741824, 0, 0});  // 3 << 30 = 0xC0000000
  CHECK(run_zip<int32_t, int32_t>(Op::SHR, DType::Int32, DType::Int32, V{-16, 16, -16, 16, -1},
                                  V{2, 2, 40, 40, 31}) == V{-4, 4, -1, 0, -1});
  using U = std::vector<uint8_t>;  // logical on UInt8
  CHECK(run_zip<uint8_t, uint8_t>(Op::SHR, DType::UInt8, DType::UInt8, U{200, 200}, U{3, 8}) == U{25, 0});
  CHECK(run_zip<uint8_t, uint8_t>(Op::SHL, DType::UInt8, DType::UInt8, U{200, 1}, U{1, 7}) == U{144, 128});
}

TEST_CASE("float comparisons: CMPLT and CMPEQ are ordered, CMPNE is unordered; MAX propagates NaN") {
  using F = std::vector<float>;
  using B = std::vector<uint8_t>;  // Bool buffers hold one byte 0 or 1 per element
  const F a = {1, 2, kNaN, kNaN}, b = {2, 2, 1, kNaN};
  CHECK(run_zip<float, uint8_t>(Op::CMPLT, DType::Float32, DType::Bool, a, b) == B{1, 0, 0, 0});
  CHECK(run_zip<float, uint8_t>(Op::CMPEQ, DType::Float32, DType::Bool, a, b) == B{0, 1, 0, 0});
  CHECK(run_zip<float, uint8_t>(Op::CMPNE, DType::Float32, DType::Bool, a, b) == B{1, 0, 1, 1});
  const F m =
      run_zip<float, float>(Op::MAX, DType::Float32, DType::Float32, F{1, -3, kNaN, 4}, F{2, -4, 0, kNaN});
  CHECK(m[0] == 2.0f);
  CHECK(m[1] == -3.0f);
  CHECK(std::isnan(m[2]));
  CHECK(std::isnan(m[3]));
  using V = std::vector<int32_t>;  // signed on Int32, unsigned on UInt8
  CHECK(run_zip<int32_t, uint8_t>(Op::CMPLT, DType::Int32, DType::Bool, V{-1, 3}, V{0, 3}) == B{1, 0});
  CHECK(run_zip<uint8_t, uint8_t>(Op::CMPLT, DType::UInt8, DType::Bool, B{255, 3}, B{0, 4}) == B{0, 1});
  CHECK(run_zip<uint8_t, uint8_t>(Op::MAX, DType::UInt8, DType::UInt8, B{255, 3}, B{0, 4}) == B{255, 4});
}

TEST_CASE("float unary ops round to float for Float32") {
  using F = std::vector<float>;
  CHECK(run_map<float, float>([](const UOpPtr& x) { return alu(Op::SQRT, {x}); }, DType::Float32,
                              DType::Float32, F{4, 2}) == F{2, std::sqrt(2.0f)});
  CHECK(run_map<float, float>([](const UOpPtr& x) { return alu(Op::RECIP, {x}); }, DType::Float32,
                              DType::Float32, F{4, 3}) == F{0.25f, 1.0f / 3.0f});
  CHECK(run_map<float, float>([](const UOpPtr& x) { return alu(Op::EXP2, {x}); }, DType::Float32,
                              DType::Float32, F{3, -1}) == F{8, 0.5f});
  CHECK(run_map<float, float>([](const UOpPtr& x) { return alu(Op::LOG2, {x}); }, DType::Float32,
                              DType::Float32, F{8, 0.25f}) == F{3, -2});
  CHECK(run_map<float, float>([](const UOpPtr& x) { return alu(Op::TRUNC, {x}); }, DType::Float32,
                              DType::Float32, F{2.7f, -2.7f}) == F{2, -2});
  CHECK(run_map<float, float>([](const UOpPtr& x) { return alu(Op::SIN, {x}); }, DType::Float32,
                              DType::Float32, F{0}) == F{0});
  CHECK(run_map<float, float>([](const UOpPtr& x) { return alu(Op::COS, {x}); }, DType::Float32,
                              DType::Float32, F{0, 1}) == F{1, std::cos(1.0f)});
  // 0.1f + 0.2f in float is 0.3f's neighbour 0.30000001192...; in double it would differ.
  CHECK(run_zip<float, float>(Op::ADD, DType::Float32, DType::Float32, F{0.1f}, F{0.2f}) == F{0.1f + 0.2f});
  CHECK(run_zip<float, float>(Op::POW, DType::Float32, DType::Float32, F{2, 9}, F{10, 0.5f}) == F{1024, 3});
}

TEST_CASE("WHERE picks by a Bool condition; MULACC is a * b + c") {
  auto i = make_range(4, 0);
  auto a = load(index(global(0, DType::Float32), i)), b = load(index(global(1, DType::Float32), i));
  auto picked = where(a < b, a, b);
  auto fma_like = UOp::make(Op::MULACC, DType::Float32, {a, b, picked});
  auto kernel = sink({end(store(index(global(2, DType::Float32), i), fma_like), {i})});
  std::vector<float> av = {1, 5, -2, 3}, bv = {2, 4, -3, 3}, out(4, 0);
  void* bufs[] = {av.data(), bv.data(), out.data()};
  interpret_kernel(kernel, bufs, {});
  CHECK(out == std::vector<float>{1 * 2 + 1, 5 * 4 + 4, -2 * -3 + -3, 3 * 3 + 3});
}

TEST_CASE("CAST: float to int truncates and saturates, NaN gives 0") {
  using F = std::vector<float>;
  CHECK(run_map<float, int32_t>([](const UOpPtr& x) { return cast(x, DType::Int32); }, DType::Float32,
                                DType::Int32, F{kNaN, 3.7f, -3.7f, 1e10f, -1e10f, 2147483520.0f}) ==
        std::vector<int32_t>{0, 3, -3, kI32Max, kI32Min, 2147483520});
  CHECK(run_map<float, uint8_t>([](const UOpPtr& x) { return cast(x, DType::UInt8); }, DType::Float32,
                                DType::UInt8,
                                F{-5, 300, 2.9f, kNaN, 255.9f}) == std::vector<uint8_t>{0, 255, 2, 0, 255});
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(run_map<float, int64_t>([](const UOpPtr& x) { return cast(x, DType::Int64); }, DType::Float32,
                                DType::Int64, F{inf, -inf, -1.5f}) ==
        std::vector<int64_t>{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), -1});
}

TEST_CASE("CAST: integers wrap when narrowed, extend when widened; to Bool is != 0") {
  using V = std::vector<int32_t>;
  CHECK(run_map<int32_t, uint8_t>([](const UOpPtr& x) { return cast(x, DType::UInt8); }, DType::Int32,
                                  DType::UInt8, V{263, -1, 255}) == std::vector<uint8_t>{7, 255, 255});
  CHECK(run_map<int64_t, int32_t>(
            [](const UOpPtr& x) { return cast(x, DType::Int32); }, DType::Int64, DType::Int32,
            std::vector<int64_t>{(int64_t{1} << 32) + 5, -(int64_t{1} << 31) - 1}) == V{5, kI32Max});
  CHECK(run_map<uint8_t, int32_t>([](const UOpPtr& x) { return cast(x, DType::Int32); }, DType::UInt8,
                                  DType::Int32, std::vector<uint8_t>{255, 0}) == V{255, 0});  // zero-extends
  CHECK(run_map<int32_t, int64_t>([](const UOpPtr& x) { return cast(x, DType::Int64); }, DType::Int32,
                                  DType::Int64, V{-1, kI32Min}) == std::vector<int64_t>{-1, kI32Min});
  CHECK(run_map<int32_t, uint8_t>([](const UOpPtr& x) { return cast(x, DType::Bool); }, DType::Int32,
                                  DType::Bool, V{0, 5, -1, 256}) == std::vector<uint8_t>{0, 1, 1, 1});
  CHECK(run_map<float, uint8_t>([](const UOpPtr& x) { return cast(x, DType::Bool); }, DType::Float32,
                                DType::Bool, std::vector<float>{0, -0.0f, kNaN, 0.5f}) ==
        std::vector<uint8_t>{0, 0, 1, 1});
  CHECK(run_map<uint8_t, float>([](const UOpPtr& x) { return cast(x, DType::Float32); }, DType::Bool,
                                DType::Float32, std::vector<uint8_t>{1, 0}) == std::vector<float>{1, 0});
}

TEST_CASE("CAST: int64 to float rounds once, f64 to f32 rounds to nearest") {
  // 2^60 + 2^36 + 1 is just above halfway between the floats 2^60 and 2^60 + 2^37, so
  // it rounds up; rounding through double first would lose the +1 and tie to even (2^60).
  const int64_t v = (int64_t{1} << 60) + (int64_t{1} << 36) + 1;
  CHECK(run_map<int64_t, float>([](const UOpPtr& x) { return cast(x, DType::Float32); }, DType::Int64,
                                DType::Float32,
                                std::vector<int64_t>{v}) == std::vector<float>{1152921642045800448.0f});
  CHECK(run_map<double, float>([](const UOpPtr& x) { return cast(x, DType::Float32); }, DType::Float64,
                               DType::Float32, std::vector<double>{0.1, 1e300}) ==
        std::vector<float>{0.1f, std::numeric_limits<float>::infinity()});
}

TEST_CASE("BITCAST reinterprets bits between types of one size") {
  CHECK(run_map<float, int32_t>([](const UOpPtr& x) { return UOp::make(Op::BITCAST, DType::Int32, {x}); },
                                DType::Float32, DType::Int32, std::vector<float>{1.0f, -2.0f}) ==
        std::vector<int32_t>{0x3f800000, static_cast<int32_t>(0xc0000000u)});
}

TEST_CASE("a store is seen by later effects of the same kernel") {
  // SINK(s, s) runs the same effect twice: a[0] = a[0] + 1, twice.
  auto a = index(global(0, DType::Int32), i64(0));
  auto s = store(a, load(a) + 1);
  std::vector<int32_t> buf = {40};
  void* bufs[] = {buf.data()};
  interpret_kernel(sink({s, s}), bufs, {});
  CHECK(buf[0] == 42);
}

TEST_CASE("IR outside the contract is a loom::Error naming the node") {
  std::vector<float> buf(4, 0);
  void* bufs[] = {buf.data()};
  auto i = make_range(4, 0), j = make_range(4, 1);
  auto out = global(0, DType::Float32);
  SUBCASE("a RANGE used outside its loop") {
    auto kernel = sink({end(store(index(out, i), cast(j, DType::Float32)), {i})});
    CHECK_THROWS_WITH_AS(interpret_kernel(kernel, bufs, {}),
                         doctest::Contains("RANGE i64: used outside its loop"), Error);
  }
  SUBCASE("operands of two dtypes cannot even be built: UOp::make refuses them") {
    CHECK_THROWS_WITH_AS(
        UOp::make(Op::ADD, DType::Float32, {const_float(DType::Float32, 1), const_float(DType::Float64, 1)}),
        "UOp::make: ADD f32: source 1 is f64, expected Float32", Error);
  }
  SUBCASE("a stored value whose dtype is not the buffer's") {
    auto kernel = sink({end(store(index(out, i), i), {i})});
    CHECK_THROWS_WITH_AS(interpret_kernel(kernel, bufs, {}), doctest::Contains("into a f32 buffer"), Error);
  }
  SUBCASE("a float-only op on integers") {
    auto kernel = sink({end(store(index(out, i), cast(alu(Op::SQRT, {i}), DType::Float32)), {i})});
    CHECK_THROWS_WITH_AS(interpret_kernel(kernel, bufs, {}), doctest::Contains("SQRT on i64"), Error);
  }
  SUBCASE("a tensor-level op") {
    CHECK_THROWS_AS(interpret_kernel(sink({UOp::make(Op::CONTIGUOUS, DType::Float32, {})}), bufs, {}), Error);
  }
}
