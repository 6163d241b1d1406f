// floor, ceil, trunc and round (src/tensor_rounding.cpp): compiled results against the
// reference interpreter and against libm's floor, ceil, trunc and nearbyint (round half to
// even under the default rounding mode, PyTorch's rule) over ties, every binade, -0, the
// infinities and NaN.
#include "check.hpp"

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

using namespace loom;
using test::check_ref;
using test::make;
using test::values;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Ties and their neighbours, integers near 2^23 and 2^52 (where the float spacing reaches 1),
// fractions, signed zeros, the infinities, NaN, and float bit patterns over every binade.
std::vector<double> cases(DType dt) {
  const bool f32 = dt == DType::Float32;
  std::vector<double> xs = {0.0, -0.0, kInf, -kInf, kNaN, 0.3, -0.3, 0.7, -0.7, 1e-30, -1e-30};
  for (int k = -8; k <= 8; ++k) {
    const double tie = k + 0.5;
    xs.insert(xs.end(), {tie, std::nextafter(tie, kInf), std::nextafter(tie, -kInf), static_cast<double>(k)});
  }
  for (const double p : {0x1p22, 0x1p23, 0x1p24, 0x1p51, 0x1p52, 0x1p53})
    for (const double d : {-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5}) xs.insert(xs.end(), {p + d, -(p + d)});
  uint32_t s = 777;
  for (int i = 0; i < 3000; ++i) {
    s = s * 1664525u + 1013904223u;
    float x;
    std::memcpy(&x, &s, sizeof x);
    xs.push_back(x);
  }
  for (double& x : xs) x = f32 ? static_cast<double>(static_cast<float>(x)) : x;
  return xs;
}

// The same bits, NaN matching NaN (and -0 told from 0).
bool same(double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want && std::signbit(got) == std::signbit(want);
}

template <class Op, class Ref>
void check_rounding(Op op, Ref ref) {
  REQUIRE(std::fegetround() == FE_TONEAREST);
  for (const DType dt : {DType::Float32, DType::Float64}) {
    CAPTURE(to_string(dt));
    const std::vector<double> xs = cases(dt);
    const std::vector<double> got = check_ref(op(make(dt, xs, {static_cast<int64_t>(xs.size())})));
    for (size_t i = 0; i < xs.size(); ++i) {
      CAPTURE(xs[i]);
      CHECK(same(got[i], ref(xs[i])));
    }
  }
}
}  // namespace

TEST_CASE("floor, ceil and trunc equal libm's bit for bit, signed zeros included") {
  check_rounding([](const Tensor& x) { return x.floor(); }, [](double v) { return std::floor(v); });
  check_rounding([](const Tensor& x) { return x.ceil(); }, [](double v) { return std::ceil(v); });
  check_rounding([](const Tensor& x) { return x.trunc(); }, [](double v) { return std::trunc(v); });
}

TEST_CASE("round: half to even, as PyTorch's and nearbyint's") {
  check_rounding([](const Tensor& x) { return x.round(); }, [](double v) { return std::nearbyint(v); });
  // Hand values: ties go to the even neighbour; 0.49999997f is not a tie (x + 0.5 would round up).
  test::check_values(make(DType::Float32, {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, 3.5}, {8}).round(),
                     {-2, -2, -0.0, 0, 2, 2, 0, 4});
}

TEST_CASE("round with decimals: PyTorch's x * 10^d rounded, divided back, in the tensor's dtype") {
  const std::vector<double> xs = {1.25, -1.35, 0.049999, 123.456, 1234.5, -0.05, 2.675};
  for (const int d : {1, 2, -1, -2}) {
    CAPTURE(d);
    const std::vector<double> got = check_ref(make(DType::Float32, xs, {7}).round(d));
    for (size_t i = 0; i < xs.size(); ++i) {
      const float x = static_cast<float>(xs[i]), scale = std::pow(10.0f, static_cast<float>(std::abs(d)));
      const float want = d > 0 ? std::nearbyint(x * scale) / scale : std::nearbyint(x / scale) * scale;
      CHECK(got[i] == want);
    }
  }
}

TEST_CASE("rounding: integers unchanged in a tensor of their own, halves exact, Bool refused") {
  const Tensor i = Tensor::from_vector<int32_t>({-3, 0, 7}, {3});
  for (const Tensor& r : {i.floor(), i.ceil(), i.trunc(), i.round()}) {
    CHECK(r.dtype() == DType::Int32);
    CHECK(r.to_vector<int32_t>() == std::vector<int32_t>{-3, 0, 7});
    CHECK(r.node() != i.node());  // an assign into the result leaves i alone
  }
  for (const DType dt : {DType::BFloat16, DType::Float16}) {
    CAPTURE(to_string(dt));
    const Tensor h = make(dt, {-2.5, -1.25, 0.5, 1.5, 100.5, 1000}, {6});
    CHECK(h.round().dtype() == dt);
    CHECK(values(h.round()) == std::vector<double>{-2, -1, 0, 2, 100, 1000});
    CHECK(values(h.floor()) == std::vector<double>{-3, -2, 0, 1, 100, 1000});
  }
  const Tensor b = make(DType::Bool, {1}, {1});
  CHECK_THROWS_WITH_AS(b.floor(), doctest::Contains("floor: not defined for a Bool tensor"), Error);
  CHECK_THROWS_WITH_AS(i.round(1), doctest::Contains("round: decimals = 1 needs a float tensor"), Error);
}

TEST_CASE("rounding has gradient 0, as in PyTorch") {
  Tensor x = make(DType::Float64, {-1.5, 0.2, 2.5}, {3}).requires_grad_();
  (x.floor() + x.ceil() * 2 + x.trunc() * 3 + x.round() * 4 + x.round(1) * 5 + x).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{1, 1, 1});
}
