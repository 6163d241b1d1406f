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
