// Range analysis (ir/bounds.cpp): [vmin, vmax] of each op on hand-computed
// cases, including negative ranges, division by ranges, and results that could
// overflow their dtype falling back to the dtype's full range.
#include "ir/uop.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <utility>

using namespace loom;

namespace {
using B = std::pair<int64_t, int64_t>;
B bounds(const UOpPtr& u) { return {u->vmin(), u->vmax()}; }
UOpPtr v(int64_t lo, int64_t hi) {  // a fresh variable per range
  return make_var("v" + std::to_string(lo) + "_" + std::to_string(hi), lo, hi);
}
UOpPtr v32(int64_t lo, int64_t hi) { return cast(v(lo, hi), DType::Int32); }
UOpPtr c64(int64_t x) { return const_int(DType::Int64, x); }
UOpPtr c32(int64_t x) { return const_int(DType::Int32, x); }
UOpPtr bin(Op op, const UOpPtr& a, const UOpPtr& b) { return alu(op, {a, b}); }
const B i32_range{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
const B i64_range{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
}  // namespace

TEST_CASE("bounds: leaves") {
  CHECK(bounds(c64(-7)) == B{-7, -7});
  CHECK(bounds(const_int(DType::Bool, 1)) == B{1, 1});
  CHECK(bounds(v(-3, 5)) == B{-3, 5});
  CHECK(bounds(make_range(10, 0)) == B{0, 9});
  CHECK(bounds(make_range(0, 0)) == B{0, 0});  // an empty loop: no value, claim nothing wider
  CHECK(bounds(UOp::make(Op::RANGE, DType::Int64, {v(1, 8)}, AxisArg{1, AxisKind::Loop})) == B{0, 7});
  CHECK(bounds(const_float(DType::Float32, 2.5)) == i64_range);  // floats: unknown
}

TEST_CASE("bounds: ADD SUB MUL NEG MULACC take the corners") {
  const auto x = v(-3, 5), y = v(2, 4);
  CHECK(bounds(x + y) == B{-1, 9});
  CHECK(bounds(x - y) == B{-7, 3});
  CHECK(bounds(x * y) == B{-12, 20});
  CHECK(bounds(x * -2) == B{-10, 6});
  CHECK(bounds(x * v(-4, -1)) == B{-20, 12});
  CHECK(bounds(-x) == B{-5, 3});
  CHECK(bounds(alu(Op::MULACC, {v(1, 2), v(3, 4), v(0, 1)})) == B{3, 9});
  CHECK(bounds(alu(Op::MULACC, {x, v(-2, 1), c64(10)})) == B{0, 16});  // x*[-2, 1] in [-10, 6], +10
}

TEST_CASE("bounds: IDIV truncates, and divisor ranges split at zero") {
  const auto x = v(-7, 9);
  CHECK(bounds(x / 2) == B{-3, 4});
  CHECK(bounds(x / -2) == B{-4, 3});
  CHECK(bounds(x / v(2, 4)) == B{-3, 4});  // -7/2, -7/4 .. 9/2, 9/4
  CHECK(bounds(v(-3, 3) / 4) == B{0, 0});  // truncation: -3/4 = 0
  CHECK(bounds(v(-11, -8) / 4) == B{-2, -2});
  // divisor in [-2, 3]: [-2, -1] gives [-9, 7], [1, 3] gives [-7, 9], 0 gives 0
  CHECK(bounds(x / v(-2, 3)) == B{-9, 9});
  CHECK(bounds(v(0, 0) / v(-2, 3)) == B{0, 0});
  CHECK(bounds(v(4, 9) / v(0, 2)) == B{0, 9});  // x/0 = 0 joins x/[1, 2] = [2, 9]
  CHECK(bounds(x / v(0, 0)) == i64_range);      // certainly by zero: no claim
  CHECK(bounds(v(std::numeric_limits<int64_t>::min(), 0) / -1) == i64_range);  // INT_MIN / -1 does not fit
  CHECK(bounds(v32(std::numeric_limits<int32_t>::min(), 0) / c32(-1)) == i32_range);
}

TEST_CASE("bounds: MOD has the dividend's sign and |r| < |divisor|") {
  const auto x = v(-7, 9);
  CHECK(bounds(x % 4) == B{-3, 3});
  CHECK(bounds(x % -4) == B{-3, 3});
  CHECK(bounds(v(0, 9) % 4) == B{0, 3});
  CHECK(bounds(v(0, 2) % 4) == B{0, 2});
  CHECK(bounds(v(5, 7) % 4) == B{1, 3});  // one period: monotone
  CHECK(bounds(v(-7, -5) % 4) == B{-3, -1});
  CHECK(bounds(v(-4, -1) % 4) == B{-3, 0});  // crosses a period: -4 % 4 = 0
  CHECK(bounds(v(3, 5) % 4) == B{0, 3});
  CHECK(bounds(x % v(-2, 3)) == B{-2, 2});  // |r| <= 2 (and 0 when the divisor is 0)
  CHECK(bounds(v(1, 9) % v(2, 5)) == B{0, 4});
  CHECK(bounds(v(-9, -1) % v(2, 5)) == B{-4, 0});
  CHECK(bounds(x % v(-1, 0)) == B{0, 0});   // x % -1 and x % 0 are both 0
  CHECK(bounds(x % v(0, 0)) == i64_range);  // certainly by zero: no claim
}

TEST_CASE("bounds: MAX, comparisons, WHERE") {
  CHECK(bounds(umax(v(-3, 5), v(2, 4))) == B{2, 5});
  CHECK(bounds(umax(v(-9, -5), v(-7, -6))) == B{-7, -5});
  CHECK(bounds(v(0, 3) < v(4, 5)) == B{1, 1});
  CHECK(bounds(v(4, 5) < v(0, 4)) == B{0, 0});
  CHECK(bounds(v(0, 4) < v(4, 5)) == B{0, 1});
  CHECK(bounds(eq(v(0, 3), v(4, 5))) == B{0, 0});
  CHECK(bounds(ne(v(0, 3), v(4, 5))) == B{1, 1});
  CHECK(bounds(eq(c64(3), c64(3))) == B{1, 1});
  CHECK(bounds(eq(v(0, 3), v(3, 5))) == B{0, 1});
  CHECK(bounds(const_float(DType::Float32, 1.0) < const_float(DType::Float32, 2.0)) == B{0, 1});
  const auto p = v(0, 1) < 1;
  CHECK(bounds(where(p, v(0, 3), v(10, 12))) == B{0, 12});
  CHECK(bounds(where(v(0, 3) < 4, v(0, 3), v(10, 12))) == B{0, 3});
  CHECK(bounds(where(v(5, 9) < 4, v(0, 3), v(10, 12))) == B{10, 12});
}

TEST_CASE("bounds: bitwise ops and shifts") {
  const auto p = v(0, 1) < 1, t = v(0, 3) < 4, f = v(5, 9) < 4;
  CHECK(bounds(land(p, t)) == B{0, 1});
  CHECK(bounds(land(p, f)) == B{0, 0});
  CHECK(bounds(bin(Op::OR, p, t)) == B{1, 1});
  CHECK(bounds(land(v(0, 12), v(-5, 5))) == B{0, 12});  // x & m with m >= 0 is in [0, m]
  CHECK(bounds(land(v(0, 12), v(3, 5))) == B{0, 5});
  CHECK(bounds(land(v(-4, -1), v(-5, 5))) == i64_range);
  CHECK(bounds(bin(Op::OR, v(1, 5), v(2, 9))) == B{2, 15});
  CHECK(bounds(bin(Op::XOR, v(0, 5), v(0, 9))) == B{0, 15});
  CHECK(bounds(bin(Op::XOR, v(-1, 5), v(0, 9))) == i64_range);
  CHECK(bounds(bin(Op::SHL, v(1, 3), v(0, 2))) == B{1, 12});
  CHECK(bounds(bin(Op::SHR, v(-8, 8), c64(1))) == B{-4, 4});
  CHECK(bounds(bin(Op::SHR, v(-8, 8), v(1, 3))) == B{-4, 4});        // -8>>1 .. 8>>1
  CHECK(bounds(bin(Op::SHR, v32(1, 3), v32(0, 40))) == B{0, 3});     // counts >= 32 give 0
  CHECK(bounds(bin(Op::SHL, v32(1, 3), v32(32, 40))) == i32_range);  // certainly out of range: no claim
  CHECK(bounds(bin(Op::SHL, v32(1, 3), c32(30))) == i32_range);      // 3 << 30 wraps
}

TEST_CASE("bounds: CAST") {
  CHECK(bounds(cast(v(0, 300), DType::UInt8)) == B{0, 255});  // would wrap
  CHECK(bounds(cast(v(0, 200), DType::UInt8)) == B{0, 200});
  CHECK(bounds(cast(v(-5, 200), DType::UInt8)) == B{0, 255});
  CHECK(bounds(cast(v(-5, 5), DType::Int32)) == B{-5, 5});
  CHECK(bounds(cast(v(1, 5), DType::Bool)) == B{1, 1});
  CHECK(bounds(cast(v(-5, -1), DType::Bool)) == B{1, 1});
  CHECK(bounds(cast(v(0, 0), DType::Bool)) == B{0, 0});
  CHECK(bounds(cast(v(-1, 1), DType::Bool)) == B{0, 1});
  CHECK(bounds(cast(v(0, 1) < 1, DType::Int32)) == B{0, 1});
  CHECK(bounds(cast(const_float(DType::Float32, 2.5), DType::Int32)) == i32_range);
}

TEST_CASE("bounds: overflow falls back to the dtype's range") {
  const int64_t imax = std::numeric_limits<int32_t>::max();
  CHECK(bounds(v32(0, imax) * c32(2)) == i32_range);
  CHECK(bounds(v32(imax - 10, imax) + v32(0, 10)) == i32_range);
  CHECK(bounds(v32(imax - 10, imax) + v32(0, 0)) == B{imax - 10, imax});
  CHECK(bounds(v32(std::numeric_limits<int32_t>::min(), 0) - c32(1)) == i32_range);
  CHECK(bounds(-v32(std::numeric_limits<int32_t>::min(), 0)) == i32_range);  // -INT_MIN wraps
  CHECK(bounds(-v32(-imax, 0)) == B{0, imax});
  CHECK(bounds(v(0, int64_t{1} << 62) * 4) == i64_range);
  CHECK(bounds(v(0, int64_t{1} << 60) * 4) == B{0, int64_t{1} << 62});
  CHECK(bounds(v(std::numeric_limits<int64_t>::max() - 1, std::numeric_limits<int64_t>::max()) + 2) ==
        i64_range);
  // UInt8 wraps at 8 bits
  const auto u = cast(v(0, 5), DType::UInt8);
  CHECK(bounds(u - cast(v(1, 1), DType::UInt8)) == B{0, 255});
  CHECK(bounds(u + cast(v(10, 251), DType::UInt8)) == B{0, 255});  // [10, 256] wraps
  CHECK(bounds(u * cast(v(2, 2), DType::UInt8)) == B{0, 10});
}
