// Elementwise ops of the first slice on every dtype they support: compiled
// results against the reference interpreter and hand-computed values.
#include "check.hpp"

#include <limits>

using namespace loom;
using test::check_ref;
using test::check_values;
using test::make;

TEST_CASE("+ - * between tensors of every dtype, with broadcasting") {
  for (DType dt : test::number_dtypes()) {
    CAPTURE(to_string(dt));
    Tensor a = make(dt, {1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor b = make(dt, {1, 0, 2}, {3});
    check_values(a + b, {2, 2, 5, 5, 5, 8});
    check_values(a * b, {1, 0, 6, 4, 0, 12});
    check_values(a - b, {0, 2, 1, 3, 5, 4});
    Tensor col = make(dt, {10, 20}, {2, 1});
    check_values(col + b, {11, 10, 12, 21, 20, 22});  // [2,1] + [3] -> [2,3]
  }
}

TEST_CASE("arithmetic on Bool computes as Int32; comparisons give Bool") {
  Tensor a = make(DType::Bool, {1, 0, 1}, {3}), b = make(DType::Bool, {1, 1, 0}, {3});
  CHECK((a + b).dtype() == DType::Int32);
  check_values(a + b, {2, 1, 1});
  Tensor x = make(DType::Float32, {1, 2, 3}, {3}), y = make(DType::Float32, {3, 2, 1}, {3});
  check_values(x.lt(y), {1, 0, 0});
  check_values(x.le(y), {1, 1, 0});
  check_values(x.gt(y), {0, 0, 1});
  check_values(x.ge(y), {0, 1, 1});
  check_values(x.eq(y), {0, 1, 0});
  check_values(x.ne(y), {1, 0, 1});
  CHECK(x.lt(y).dtype() == DType::Bool);
}

TEST_CASE("comparisons with NaN: only ne is true") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = make(DType::Float32, {nan, 1}, {2}), y = make(DType::Float32, {1, nan}, {2});
  check_values(x.lt(y), {0, 0});
  check_values(x.le(y), {0, 0});
  check_values(x.ge(y), {0, 0});
  check_values(x.eq(y), {0, 0});
  check_values(x.ne(y), {1, 1});
}

TEST_CASE("scalars on either side keep the tensor's dtype within its category") {
  Tensor i = make(DType::Int32, {1, 2, 3}, {3});
  CHECK((i + 2).dtype() == DType::Int32);
  check_values(i + 2, {3, 4, 5});
  check_values(10 - i, {9, 8, 7});
  CHECK((i * 0.5).dtype() == DType::Float32);
  check_values(i * 0.5, {0.5, 1, 1.5});
  Tensor d = make(DType::Float64, {1, 2, 3}, {3});
  CHECK((d * 2.5f).dtype() == DType::Float64);
  check_values(2.5f * d, {2.5, 5, 7.5});
  Tensor u = make(DType::UInt8, {250, 3}, {2});
  check_values(u + 10, {4, 13});  // uint8 wraps
}

TEST_CASE("true division: integers give Float32") {
  Tensor a = make(DType::Int32, {7, -7, 1, 0}, {4}), b = make(DType::Int32, {2, 2, 0, 0}, {4});
  Tensor q = a / b;
  CHECK(q.dtype() == DType::Float32);
  const double inf = std::numeric_limits<double>::infinity();
  check_values(q, {3.5, -3.5, inf, std::numeric_limits<double>::quiet_NaN()});
  check_values(make(DType::Float64, {1, 3}, {2}) / 4, {0.25, 0.75});
}

TEST_CASE("int32 arithmetic wraps like the hardware") {
  Tensor a = make(DType::Int32, {2147483647, -2147483648.0}, {2});
  check_values(a + 1, {-2147483648.0, -2147483647});
  check_values(a * 2, {-2, 0});
}

TEST_CASE("exp, log, sqrt on floats and promoted integers") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, {0, 0.5, 1, 2, -3}, {5});
    check_values(x.exp(), {1, std::exp(0.5), std::exp(1.0), std::exp(2.0), std::exp(-3.0)}, 8);
    Tensor p = make(dt, {1, 2, 10, 0.25}, {4});
    check_values(p.log(), {0, std::log(2.0), std::log(10.0), std::log(0.25)}, 8);
    check_values(p.sqrt(), {1, std::sqrt(2.0), std::sqrt(10.0), 0.5}, 1);
  }
  Tensor i = make(DType::Int32, {1, 4}, {2});
  CHECK(i.sqrt().dtype() == DType::Float32);
  check_values(i.sqrt(), {1, 2});
  check_values(make(DType::Float32, {-1, 0}, {2}).log(),
               {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()});
}

TEST_CASE("relu, neg on every number dtype") {
  for (DType dt : {DType::Int32, DType::Int64, DType::Float32, DType::Float64}) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, {-2, 0, 3}, {3});
    check_values(x.relu(), {0, 0, 3});
    check_values(-x, {2, 0, -3});
  }
  check_values(make(DType::UInt8, {0, 7}, {2}).relu(), {0, 7});
  check_values(make(DType::Float32, {std::numeric_limits<double>::quiet_NaN()}, {1}).relu(),
               {std::numeric_limits<double>::quiet_NaN()});
}

TEST_CASE("where broadcasts condition and branches and promotes the branches") {
  Tensor c = make(DType::Bool, {1, 0, 1}, {3});
  Tensor a = make(DType::Int32, {1, 2, 3}, {3});
  Tensor b = make(DType::Float32, {-1}, {1});
  Tensor w = where(c, a, b);
  CHECK(w.dtype() == DType::Float32);
  check_values(w, {1, -1, 3});
  check_values(c.where(a, a * 10), {1, 20, 3});
  Tensor rows = make(DType::Bool, {1, 0}, {2, 1});
  check_values(where(rows, a, -a), {1, 2, 3, -1, -2, -3});
}

TEST_CASE("where takes a number for either branch, in the other branch's dtype as t + v does") {
  Tensor c = make(DType::Bool, {1, 0, 1}, {3});
  Tensor f = make(DType::Float64, {1.5, 2.5, 3.5}, {3});
  const Tensor f_or_0 = where(c, f, 0);
  CHECK(f_or_0.dtype() == DType::Float64);
  check_values(f_or_0, {1.5, 0, 3.5});
  const Tensor minus_or_f = c.where(-0.25f, f);  // a float number keeps the Float64 branch's dtype
  CHECK(minus_or_f.dtype() == DType::Float64);
  check_values(minus_or_f, {-0.25, 2.5, -0.25});
  Tensor u8 = make(DType::UInt8, {10, 20, 30}, {3});
  const Tensor u8_or_7 = where(c, u8, 7);  // an integral number keeps the integer dtype
  CHECK(u8_or_7.dtype() == DType::UInt8);
  check_values(u8_or_7, {10, 7, 30});
  const Tensor half_or_u8 = where(c, 0.5, u8);  // a floating number with an integer tensor: Float32
  CHECK(half_or_u8.dtype() == DType::Float32);
  check_values(half_or_u8, {0.5, 20, 0.5});
  // A non-Bool condition counts as != 0, and the number broadcasts.
  check_values(make(DType::Int32, {0, 3}, {2, 1}).where(f, 9), {9, 9, 9, 1.5, 2.5, 3.5});
}

TEST_CASE("cast between dtypes") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor f = make(DType::Float32, {-1.7, 2.9, 300, nan, -3e10}, {5});
  check_values(f.cast(DType::Int32), {-1, 2, 300, 0, -2147483648.0});
  check_values(f.cast(DType::Bool), {1, 1, 1, 1, 1});
  check_values(make(DType::Int32, {300, -1, 255}, {3}).cast(DType::UInt8), {44, 255, 255});
  check_values(make(DType::UInt8, {200, 0}, {2}).cast(DType::Float32), {200, 0});
  check_values(make(DType::Int64, {0, 5}, {2}).cast(DType::Bool), {0, 1});
  check_values(make(DType::Bool, {1, 0}, {2}).cast(DType::Float64), {1, 0});
}

TEST_CASE("a fused chain over odd sizes 1, 7 and 1023") {
  for (int64_t n : {1, 7, 1023}) {
    CAPTURE(n);
    Tensor a = make(DType::Float32, test::iota(n, 0.01, -3), {n});
    Tensor b = make(DType::Float32, test::iota(n, -0.02, 1), {n});
    check_ref(((a * b + a) / (b * b + 1)).relu().sqrt(), 2);
  }
}

TEST_CASE("abs on every number dtype: INT_MIN wraps, -0 gives +0, NaN stays") {
  for (DType dt : {DType::Int32, DType::Int64, DType::Float32, DType::Float64}) {
    CAPTURE(to_string(dt));
    check_values(make(dt, {-3, 0, 5, -1}, {4}).abs(), {3, 0, 5, 1});
  }
  check_values(make(DType::Int32, {-2147483648.0, 2147483647}, {2}).abs(), {-2147483648.0, 2147483647});
  const auto i64 = make(DType::Int64, {-0x1p63}, {1}).abs().to_vector<int64_t>();
  CHECK(i64[0] == std::numeric_limits<int64_t>::min());
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const auto f = make(DType::Float32, {-0.0, nan, -inf}, {3}).abs().to_vector<float>();
  CHECK(!std::signbit(f[0]));
  CHECK(std::isnan(f[1]));
  CHECK(f[2] == std::numeric_limits<float>::infinity());
  Tensor u = make(DType::UInt8, {200, 3}, {2});
  check_values((u + u).abs(), {144, 6});  // 400 wraps to 144; unsigned values are their own abs
  CHECK_THROWS_WITH_AS(make(DType::Bool, {1}, {1}).abs(), doctest::Contains("abs: not defined for a Bool"),
                       Error);
}

TEST_CASE("sign follows PyTorch: -1, 0, 1, with sign(NaN) = 0 and Bool unchanged") {
  for (DType dt : {DType::Int32, DType::Int64, DType::Float32, DType::Float64}) {
    CAPTURE(to_string(dt));
    Tensor s = make(dt, {-7, 0, 3, -2147483648.0}, {4}).sign();
    CHECK(s.dtype() == dt);
    check_values(s, {-1, 0, 1, -1});
  }
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  check_values(make(DType::Float64, {nan, -inf, inf, -0.0, 1e-300}, {5}).sign(), {0, -1, 1, 0, 1});
  check_values(make(DType::UInt8, {0, 1, 255}, {3}).sign(), {0, 1, 1});
  Tensor b = make(DType::Bool, {1, 0}, {2});
  CHECK(b.sign().dtype() == DType::Bool);
  check_values(b.logical_not().sign(), {0, 1});
}

TEST_CASE("square keeps the dtype (Bool computes as Int32) and wraps on integers") {
  for (DType dt : test::number_dtypes()) {
    CAPTURE(to_string(dt));
    Tensor s = make(dt, {0, 3, 11}, {3}).square();
    CHECK(s.dtype() == dt);
    check_values(s, {0, 9, 121});
  }
  check_values(make(DType::UInt8, {16, 17}, {2}).square(), {0, 33});  // 256 and 289 wrap
  check_values(make(DType::Int32, {65536, -3}, {2}).square(), {0, 9});
  check_values(make(DType::Bool, {1, 0}, {2}).square(), {1, 0});
  CHECK(make(DType::Bool, {1}, {1}).square().dtype() == DType::Int32);
}

TEST_CASE("clamp like torch.clamp: NaN stays, lo > hi gives hi, integers keep their dtype") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::Float32, DType::Float64}) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, {-5, -1, 0.25, 2, 9, nan, -inf, inf}, {8});
    check_values(x.clamp(-1.5, 2.5), {-1.5, -1, 0.25, 2, 2.5, nan, -1.5, 2.5});
    check_values(x.clamp(3, 1), {1, 1, 1, 1, 1, nan, 1, 1});
    check_values(x.clamp(-inf, 0), {-5, -1, 0, 0, 0, nan, -inf, 0});
  }
  for (DType dt : {DType::Int32, DType::Int64, DType::UInt8}) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, {0, 1, 2, 3, 4, 200}, {6});
    Tensor c = x.clamp(1, 3);
    CHECK(c.dtype() == dt);
    check_values(c, {1, 1, 2, 3, 3, 3});
    check_values(x.clamp(0.5, 3.5), {1, 1, 2, 3, 3, 3});       // fractional bounds round inward
    check_values(x.clamp(-1000, 1000), {0, 1, 2, 3, 4, 200});  // bounds saturate to the dtype's range
  }
  check_values(make(DType::Int32, {-2147483648.0, 5}, {2}).clamp(-inf, 4), {-2147483648.0, 4});
  check_values(make(DType::Int32, {-7, 7}, {2}).clamp(5, -5), {-5, -5});
  CHECK_THROWS_WITH_AS(make(DType::Int32, {1}, {1}).clamp(nan, 1), doctest::Contains("clamp: a NaN bound"),
                       Error);
  CHECK_THROWS_WITH_AS(make(DType::Bool, {1}, {1}).clamp(0, 1),
                       doctest::Contains("clamp: not defined for a Bool"), Error);
}

TEST_CASE("logical_and, logical_or, logical_not on Bool; other dtypes are refused") {
  Tensor a = make(DType::Bool, {0, 0, 1, 1}, {4}), b = make(DType::Bool, {0, 1, 0, 1}, {4});
  check_values(a.logical_and(b), {0, 0, 0, 1});
  check_values(a.logical_or(b), {0, 1, 1, 1});
  check_values(a.logical_not(), {1, 1, 0, 0});
  check_values(a.logical_and(make(DType::Bool, {1}, {1})), {0, 0, 1, 1});  // broadcasts
  CHECK(a.logical_or(b).dtype() == DType::Bool);
  Tensor i = make(DType::Int32, {1, 0, 1, 0}, {4});
  CHECK_THROWS_WITH_AS(a.logical_and(i), doctest::Contains("logical_and: expected a Bool tensor, got Int32"),
                       Error);
  CHECK_THROWS_WITH_AS(i.logical_or(a), doctest::Contains("logical_or: expected a Bool tensor, got Int32"),
                       Error);
  CHECK_THROWS_WITH_AS(make(DType::Float64, {1}, {1}).logical_not(),
                       doctest::Contains("logical_not: expected a Bool tensor, got Float64"), Error);
}

TEST_CASE("& | ~: logical on Bool, bitwise on integers, refused on floats") {
  Tensor a = make(DType::Bool, {0, 0, 1, 1}, {4}), b = make(DType::Bool, {0, 1, 0, 1}, {4});
  check_values(a & b, {0, 0, 0, 1});
  check_values(a | b, {0, 1, 1, 1});
  check_values(~a, {1, 1, 0, 0});
  CHECK((a & b).dtype() == DType::Bool);
  for (DType dt : {DType::Int32, DType::Int64}) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, {12, -1, 5, -8}, {4}), y = make(dt, {10, 7, 0, 3}, {4});
    check_values(x & y, {8, 7, 0, 0});
    check_values(x | y, {14, -1, 5, -5});
    check_values(~x, {-13, 0, -6, 7});
  }
  Tensor u = make(DType::UInt8, {12, 255, 0}, {3}), v = make(DType::UInt8, {10, 15, 1}, {3});
  check_values(u & v, {8, 15, 0});
  check_values(u | v, {14, 255, 1});
  check_values(~u, {243, 0, 255});
  Tensor i = make(DType::Int32, {6, 3}, {2});
  CHECK((i & a.shrink({{0, 2}})).dtype() == DType::Int32);  // Bool promotes to the integer
  check_values(i | make(DType::Bool, {1, 0}, {2}), {7, 3});
  Tensor f = make(DType::Float32, {1}, {1});
  CHECK_THROWS_WITH_AS(
      f & i, doctest::Contains("bitwise_and (&): expected Bool or integer tensors, got Float32 and Int32"),
      Error);
  CHECK_THROWS_WITH_AS(i | f, doctest::Contains("bitwise_or (|)"), Error);
  CHECK_THROWS_WITH_AS(
      ~f, doctest::Contains("bitwise_not (~): expected a Bool or integer tensor, got Float32"), Error);
}

TEST_CASE("< <= > >= give Bool, with tensors or C++ numbers on either side") {
  for (DType dt : test::number_dtypes()) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, {1, 2, 3}, {3}), y = make(dt, {3, 2, 1}, {3});
    check_values(x < y, {1, 0, 0});
    check_values(x <= y, {1, 1, 0});
    check_values(x > y, {0, 0, 1});
    check_values(x >= y, {0, 1, 1});
    check_values(x < 2, {1, 0, 0});
    check_values(2 < x, {0, 0, 1});
    check_values(x <= 2, {1, 1, 0});
    check_values(2 >= x, {1, 1, 0});
    check_values(x > 1.5, {0, 1, 1});
    check_values(2.5f > x, {1, 1, 0});
    CHECK((x >= 2).dtype() == DType::Bool);
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor n = make(DType::Float32, {nan, 1}, {2});
  check_values(n >= 0, {0, 1});
  check_values(0 > n, {0, 0});
}

TEST_CASE("maximum and minimum on every number dtype, NaN propagating on floats") {
  for (DType dt : test::number_dtypes()) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, {1, 5, 3}, {3}), y = make(dt, {4, 2, 3}, {3});
    check_values(x.maximum(y), {4, 5, 3});
    check_values(x.minimum(y), {1, 2, 3});
    check_values(x.maximum(2), {2, 5, 3});
    check_values(x.minimum(2), {1, 2, 2});
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = make(DType::Float64, {nan, 1}, {2}), b = make(DType::Float64, {0, nan}, {2});
  check_values(a.maximum(b), {nan, nan});
  check_values(a.minimum(b), {nan, nan});
  check_values(make(DType::Int32, {-2147483648.0}, {1}).minimum(make(DType::Int32, {5}, {1})),
               {-2147483648.0});
}

TEST_CASE("an out-of-range integer scalar wraps into the tensor's dtype; a huge float saturates") {
  Tensor u = make(DType::UInt8, {200, 100, 44}, {3});
  check_values(u + 300, {244, 144, 88});  // 300 is 44 in UInt8
  check_values(u.lt(300), {0, 0, 0});     // compared with 44
  check_values(u.eq(300), {0, 0, 1});
  check_values(u.lt(Tensor::full({3}, -1, DType::UInt8)), {1, 1, 1});  // -1 is 255
  check_values(Tensor::full({2}, 1e300, DType::Int32) + 0, {2147483647, 2147483647});
  check_values(Tensor::full({2}, -1e300, DType::Int64) + 0, {-9223372036854775808.0, -9223372036854775808.0});
}
