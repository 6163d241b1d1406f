// floor_div and % (src/tensor_elementwise_division.cpp): Python's flooring on every
// number dtype, hand-computed, against the reference interpreter; division by zero;
// and, for floats, exactness against an fmod-based oracle over a sweep.
#include "check.hpp"

#include <cmath>
#include <limits>

using namespace loom;
using test::check_ref;
using test::check_values;
using test::make;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// q is floor(a/b) exactly: a whole number with a - q*b in [0, b) (or (b, 0] for b < 0). In
// __float128 (113-bit significand) q*b is exact for |q| < 2^53, and so is the difference,
// which cancels to below |b|: a check that does not round.
bool is_floor_quotient(double q, double a, double b) {
  if (q != std::trunc(q)) return false;
  const __float128 rem = static_cast<__float128>(a) - static_cast<__float128>(q) * b;
  return b > 0 ? rem >= 0 && rem < b : rem <= 0 && rem > b;
}
}  // namespace

TEST_CASE("floor_div and % on signed integers floor like Python, by zero give 0") {
  for (DType dt : {DType::Int32, DType::Int64}) {
    CAPTURE(to_string(dt));
    Tensor a = make(dt, {-7, 7, -7, 7, 6, -6, 0, 5, -5, 0}, {10});
    Tensor b = make(dt, {2, -2, -2, 2, 3, 3, 4, 0, 0, 0}, {10});
    check_values(a.floor_div(b), {-4, -4, 3, 3, 2, -2, 0, 0, 0, 0});
    check_values(a % b, {1, -1, -1, 1, 0, 0, 0, 0, 0, 0});
    CHECK(a.floor_div(b).dtype() == dt);
    CHECK((a % b).dtype() == dt);
  }
}

TEST_CASE("floor_div and % at the ends of Int32 and Int64") {
  const double int_min = -2147483648.0, int_max = 2147483647.0;
  Tensor a = make(DType::Int32, {int_min, int_min, int_max, int_min, int_max}, {5});
  Tensor b = make(DType::Int32, {-1, 1, -1, 2147483647, int_min}, {5});
  // INT_MIN // -1 overflows: it wraps to INT_MIN (PyTorch's C++ would trap), remainder 0.
  check_values(a.floor_div(b), {int_min, int_min, -int_max, -2, -1});
  check_values(a % b, {0, 0, 0, 2147483646, -1});
  const double i64_min = -0x1p63;
  Tensor c = make(DType::Int64, {i64_min, i64_min}, {2});
  Tensor d = make(DType::Int64, {-1, 3}, {2});
  const auto q = c.floor_div(d).to_vector<int64_t>();
  CHECK(q == std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -3074457345618258603});
  CHECK((c % d).to_vector<int64_t>() == std::vector<int64_t>{0, 1});  // -2^63 = 3 * -3074457345618258603 + 1
}

TEST_CASE("floor_div and % on UInt8 divide unsigned; by zero give 0") {
  Tensor a = make(DType::UInt8, {255, 7, 200, 9, 0}, {5});
  Tensor b = make(DType::UInt8, {2, 3, 0, 9, 5}, {5});
  check_values(a.floor_div(b), {127, 2, 0, 1, 0});
  check_values(a % b, {1, 1, 0, 0, 0});
  CHECK((a % b).dtype() == DType::UInt8);
}

TEST_CASE("Bool operands compute as Int32") {
  Tensor a = make(DType::Bool, {1, 1, 0}, {3}), b = make(DType::Bool, {1, 0, 1}, {3});
  CHECK(a.floor_div(b).dtype() == DType::Int32);
  check_values(a.floor_div(b), {1, 0, 0});
  check_values(a % b, {0, 0, 0});
}

TEST_CASE("floats floor like Python, where a/b rounds to an integer too") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    CAPTURE(to_string(dt));
    Tensor a = make(dt, {-7.5, 7.5, -7.5, 7.5, 6, -6, 0.75, -0.5}, {8});
    Tensor b = make(dt, {2, -2, -2, 2, 3, 3, 0.25, 0.25}, {8});
    check_values(a.floor_div(b), {-4, -4, 3, 3, 2, -2, 3, -2});
    check_values(a % b, {0.5, -0.5, -1.5, 1.5, 0, 0, 0, 0});
  }
  // 1.0 / 0.1 rounds up to 10.0, but 0.1 (as a double) goes into 1.0 only 9 times: Python
  // gives 1.0 // 0.1 == 9.0 and 1.0 % 0.1 == 0.09999999999999995; so must loom.
  Tensor one = make(DType::Float64, {1, -1}, {2}), tenth = make(DType::Float64, {0.1, 0.1}, {2});
  check_values(one.floor_div(tenth), {9, -10});
  const auto r = (one % tenth).to_vector<double>();
  CHECK(r[0] == 0.09999999999999995);
  CHECK(r[1] == 5.551115123125783e-17);  // Python: -1.0 % 0.1
  // The Float32 case of the same trap: 1 / 0.1f rounds to 10 in float arithmetic.
  Tensor onef = make(DType::Float32, {1}, {1}), tenthf = make(DType::Float32, {0.1}, {1});
  check_values(onef.floor_div(tenthf), {9});
  CHECK((onef % tenthf).item<float>() == 1.0f - 9 * static_cast<double>(0.1f));  // exact: 0.099999987
}

TEST_CASE("float division by zero and by infinity, and NaN") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    CAPTURE(to_string(dt));
    Tensor a = make(dt, {1, -1, 0, kInf, 1, -1, 1, -1, kNaN, 2}, {10});
    Tensor b = make(dt, {0, 0, 0, 2, kInf, kInf, -kInf, -kInf, 2, kNaN}, {10});
    // PyTorch: x // 0 is x / 0; x % 0 is NaN; inf // y and inf % y are NaN; with an
    // infinite divisor, Python's floor: -1 // inf = -1 and -1 % inf = inf.
    check_values(a.floor_div(b), {kInf, -kInf, kNaN, kNaN, 0, -1, -1, 0, kNaN, kNaN});
    check_values(a % b, {kNaN, kNaN, kNaN, kNaN, 1, kInf, -kInf, -1, kNaN, kNaN});
  }
}

TEST_CASE("float % and floor_div are exact over a sweep") {
  // The remainder's oracle is PyTorch's: fmod (exact), moved by b when its sign differs, one
  // rounding. The quotient is checked by what a floor is (is_floor_quotient).
  for (DType dt : {DType::Float32, DType::Float64}) {
    CAPTURE(to_string(dt));
    std::vector<double> as, bs;
    for (int i = 0; i < 3000; ++i) {
      const double f = std::fmod(0.5 + i * 0.6180339887498949, 1.0),
                   g = std::fmod(0.3 + i * 0.7548776662466927, 1.0);
      const double a = (i % 2 ? -1 : 1) * std::exp2(60 * f - 20),
                   b = (i % 3 ? 1 : -1) * std::exp2(40 * g - 20);
      as.push_back(dt == DType::Float32 ? static_cast<float>(a) : a);
      bs.push_back(dt == DType::Float32 ? static_cast<float>(b) : b);
    }
    const int64_t n = static_cast<int64_t>(as.size());
    Tensor a = make(dt, as, {n}), b = make(dt, bs, {n});
    const auto r = check_ref(a % b);
    const auto q = check_ref(a.floor_div(b));
    // Exact while |a/b| < 2^53 (the source's claim); a Float32 quotient is exact below 2^24.
    const double q_limit = dt == DType::Float32 ? 0x1p24 : 0x1p52;
    int remainders = 0, quotients = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (std::abs(as[i] / bs[i]) >= 0x1p52) continue;
      INFO("a = " << as[i] << ", b = " << bs[i]);
      double want = std::fmod(as[i], bs[i]);
      if (want != 0 && (want < 0) != (bs[i] < 0)) want += bs[i];
      if (dt == DType::Float32) want = static_cast<float>(want);  // fmod + b was exact in double
      ++remainders;
      CHECK(r[i] == want);
      if (std::abs(as[i] / bs[i]) >= q_limit) continue;
      ++quotients;
      CHECK(is_floor_quotient(q[i], as[i], bs[i]));
    }
    CHECK(remainders > 2500);
    CHECK(quotients > 2000);
  }
}

TEST_CASE("% and floor_div with C++ numbers on either side") {
  Tensor i = make(DType::Int32, {-7, 7, 8}, {3});
  CHECK((i % 3).dtype() == DType::Int32);
  check_values(i % 3, {2, 1, 2});
  check_values(i % -3, {-1, -2, -1});
  check_values(20 % i, {-1, 6, 4});
  check_values(i.floor_div(2), {-4, 3, 4});
  check_values(i.floor_div(0), {0, 0, 0});
  CHECK((i % 2.5).dtype() == DType::Float32);
  check_values(i % 2.5, {0.5, 2, 0.5});
  check_values(i.floor_div(-2.5), {2, -3, -4});
  Tensor f = make(DType::Float64, {5.5, -5.5}, {2});
  check_values(f % 2, {1.5, 0.5});
  check_values(-9.0 % f, {2, -3.5});
  check_values(f.floor_div(2.0f), {2, -3});
}
