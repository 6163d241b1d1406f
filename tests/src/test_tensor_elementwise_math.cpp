// Transcendentals and powers (src/tensor_elementwise_math.cpp): each function over a
// sweep of a few thousand inputs in one tensor (one kernel), compiled result against
// the reference interpreter, and against long-double libm within a stated ulp bound.
// The reference interpreter evaluates loom's own decomposition, so the long-double
// comparison is what checks the decomposition itself.
#include "check.hpp"
#include "gradcheck.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numbers>

using namespace loom;
using test::check_ref;
using test::check_values;
using test::make;
using test::values;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// `v` rounded to dt, as the tensor will hold it.
double rounded(double v, DType dt) {
  return dt == DType::Float32 ? static_cast<double>(static_cast<float>(v)) : v;
}

// n points spread over [lo, hi] by the golden-ratio sequence (deterministic, no clumps),
// rounded to dt; `log_scale` spreads them over exponents: the points are 2^u.
std::vector<double> sweep(int n, double lo, double hi, DType dt, bool log_scale = false) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    const double f = std::fmod(0.5 + i * 0.6180339887498949, 1.0);
    const double u = lo + (hi - lo) * f;
    v.push_back(rounded(log_scale ? std::exp2(u) : u, dt));
  }
  return v;
}

std::vector<double> negated(std::vector<double> v) {
  for (double& x : v) x = -x;
  return v;
}
std::vector<double> joined(std::vector<double> a, const std::vector<double>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The error of `got` in units in the last place of dt at the exact value `want` (long
// double: 11 bits beyond double, so it stands for the exact value). An ulp is
// 2^(e - p + 1) with 2^e <= |want| < 2^(e+1), e no lower than dt's smallest normal
// exponent (subnormals have the fixed spacing), p = 24 or 53. A NaN matching a NaN and an
// infinity matching the rounded-to-dt reference are 0; any other mismatch is infinite.
double ulp_error(double got, long double want, DType dt) {
  const bool f32 = dt == DType::Float32;
  const long double want_dt = f32 ? static_cast<long double>(static_cast<float>(want))
                                  : static_cast<long double>(static_cast<double>(want));
  if (std::isnan(want)) return std::isnan(got) ? 0 : kInf;
  if (std::isinf(want_dt) || std::isinf(got) || std::isnan(got)) return got == want_dt ? 0 : kInf;
  const int p = f32 ? 24 : 53, emin = f32 ? -126 : -1022;
  const int e = want == 0 ? emin : std::max(std::ilogb(want), emin);
  return static_cast<double>(std::fabs(static_cast<long double>(got) - want) / std::ldexp(1.0L, e - p + 1));
}

using Exact = std::function<long double(long double)>;

// Runs `result` (a function of `xs`), checks it against the reference interpreter and
// returns the largest ulp error against `exact`, reporting the worst input on failure.
// Float32 exp2 is loom's own polynomial (codegen/transcendental.cpp), the reference's is
// libm's: both within 1 ulp of the exact value, so within 2 of each other (`ref_ulps`).
// The bound that matters is the one its caller checks, against long double.
double max_ulp_error(const Tensor& result, const std::vector<double>& xs, DType dt, const Exact& exact,
                     double ref_ulps = 2) {
  const std::vector<double> got = check_ref(result, ref_ulps);
  REQUIRE(got.size() == xs.size());
  double worst = 0, worst_x = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double e = ulp_error(got[i], exact(xs[i]), dt);
    if (e > worst) worst = e, worst_x = xs[i];
  }
  INFO("worst input " << worst_x << " (" << to_string(dt) << ")");
  CHECK(std::isfinite(worst));
  return worst;
}

const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> d{DType::Float32, DType::Float64};
  return d;
}
}  // namespace

// Bounds below: the error each decomposition keeps (argued in the source's comments) plus
// libm's own (glibc: below 1 ulp for exp2, log2, sin, pow and their float versions). A correctly
// rounded result is within 1/2 ulp; the long-double reference is itself off by up to 2^-11 of a
// Float64 ulp, so that is checked as 0.501. Each further rounding adds up to 1/2 ulp of its own
// value, which is up to 1 ulp of a result in the binade below.

TEST_CASE("exp over its whole range, subnormal results and overflow included") {
  // 2^r' * 2^n with r' small (Cody-Waite): libm exp2's < 1 ulp plus ~0.3 ulp from r' (0.81 seen).
  for (DType dt : float_dtypes()) {
    CAPTURE(to_string(dt));
    const bool f32 = dt == DType::Float32;
    const auto xs = joined(sweep(3000, f32 ? -104 : -746, f32 ? 89 : 710, dt), sweep(500, -1e-3, 1e-3, dt));
    const Tensor x = make(dt, xs, {static_cast<int64_t>(xs.size())});
    CHECK(max_ulp_error(x.exp(), xs, dt, [](long double v) { return std::exp(v); }) <= 1.5);
  }
}

TEST_CASE("logarithms, exp2, sqrt, rsqrt and reciprocal over many binades") {
  for (DType dt : float_dtypes()) {
    CAPTURE(to_string(dt));
    const bool f32 = dt == DType::Float32;
    const auto pos = joined(sweep(3000, f32 ? -149 : -1074, f32 ? 127.9 : 1023.9, dt, true),
                            sweep(500, 1 - 1e-3, 1 + 1e-3, dt));
    const Tensor x = make(dt, pos, {static_cast<int64_t>(pos.size())});
    // log2 * ln2: libm log2 (< 1 ulp) and two roundings, the constant's and the product's (1.38 seen).
    CHECK(max_ulp_error(x.log(), pos, dt, [](long double v) { return std::log(v); }) <= 2);
    CHECK(max_ulp_error(x.log2(), pos, dt, [](long double v) { return std::log2(v); }) <= 1);
    CHECK(max_ulp_error(x.sqrt(), pos, dt, [](long double v) { return std::sqrt(v); }) <= 0.501);
    // Two correctly rounded steps, sqrt then 1/y (1.44 seen).
    CHECK(max_ulp_error(x.rsqrt(), pos, dt, [](long double v) { return 1 / std::sqrt(v); }) <= 2);
    CHECK(max_ulp_error(x.reciprocal(), pos, dt, [](long double v) { return 1 / v; }) <= 0.501);
    const auto xs = sweep(3000, f32 ? -151 : -1076, f32 ? 129 : 1025, dt);
    const Tensor e = make(dt, xs, {static_cast<int64_t>(xs.size())});
    CHECK(max_ulp_error(e.exp2(), xs, dt, [](long double v) { return std::exp2(v); }) <= 1);
  }
}

TEST_CASE("sin and cos over every binade, near the zeros of cos too") {
  for (DType dt : float_dtypes()) {
    CAPTURE(to_string(dt));
    const bool f32 = dt == DType::Float32;
    const double top = f32 ? 127.99 : 1022.99;  // below the top binade (checked apart below)
    auto xs = joined(sweep(1500, -10, 10, dt), sweep(1000, -30, top, dt, true));
    xs = joined(xs, negated(sweep(500, -30, top, dt, true)));
    for (int k = -40; k <= 40; ++k) xs.push_back(rounded(k * std::numbers::pi / 2, dt));  // cos(x) ~ 1e-17
    for (int k = 1; k <= 20; ++k)
      xs.push_back(rounded(k * 5e6 * std::numbers::pi + std::numbers::pi / 2, dt));
    const Tensor x = make(dt, xs, {static_cast<int64_t>(xs.size())});
    // Float64: libm. Float32: an exact reduction and polynomials in Float64, rounded once.
    CHECK(max_ulp_error(x.sin(), xs, dt, [](long double v) { return std::sin(v); }) <= (f32 ? 0.501 : 1));
    // sin(2x) / (2 sin(x)): three roundings of up to 1/2 ulp each plus the binade effect (2.24
    // seen over wider sweeps); Float32 computes in Float64 and rounds once: 1/2 ulp plus 2^-27.
    CHECK(max_ulp_error(x.cos(), xs, dt, [](long double v) { return std::cos(v); }) <= (f32 ? 0.501 : 2.5));
  }
  // The top binade of Float64, where 2x overflows: 1 - 2 sin(x/2)^2, absolutely within 4 ulps of
  // 1 (2^-50): sin's error doubled by the square, two roundings of the product up to 2, and the
  // subtraction's (3.3e-16 seen).
  const auto huge = sweep(200, 1023, 1023.999, DType::Float64, true);
  const auto xs = joined(huge, negated(huge));
  const auto got = check_ref(make(DType::Float64, xs, {400}).cos());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst =
        std::max(worst, std::abs(got[i] - static_cast<double>(std::cos(static_cast<long double>(xs[i])))));
  CHECK(worst <= 0x1p-50);
}

// The floats nearest k pi/2 for k = 2^j and 3 2^j over all Float32 exponents, and their
// neighbours: where the reduction cancels most.
std::vector<double> near_quarter_turns() {
  std::vector<double> xs;
  for (int j = 0; j <= 126; ++j)
    for (long double k : {std::ldexp(1.0L, j), 3 * std::ldexp(1.0L, j)}) {
      const float x = static_cast<float>(k * std::numbers::pi_v<long double> / 2);
      if (!std::isfinite(x)) continue;
      float up = x, down = x;
      for (int step = 0; step < 3; ++step, up = std::nextafter(up, kInf), down = std::nextafter(down, 0))
        xs.insert(xs.end(), {up, down});
    }
  return xs;
}

// Float32 bit patterns spread over every finite float, both signs (a fixed linear congruential
// sequence).
std::vector<double> every_binade_f32(int n) {
  std::vector<double> xs;
  uint32_t s = 12345;
  while (static_cast<int>(xs.size()) < n) {
    s = s * 1664525u + 1013904223u;
    float x;
    std::memcpy(&x, &s, sizeof x);
    if (std::isfinite(x)) xs.push_back(x);
  }
  return xs;
}

TEST_CASE("Float32 sin and cos: huge arguments reduced exactly, within half an ulp") {
  const DType dt = DType::Float32;
  auto xs = joined(near_quarter_turns(), every_binade_f32(20000));
  const float flt_max = std::numeric_limits<float>::max();
  // 16367173 2^72 is the float nearest a multiple of pi/2 (Muller, Elementary Functions).
  for (float v : {1e6f, 1e10f, 1e30f, flt_max, std::ldexp(16367173.0f, 72), 0x1p-149f, 0x1p-126f}) {
    float up = v, down = v;
    for (int step = 0; step < 3; ++step, up = std::nextafter(up, kInf), down = std::nextafter(down, 0))
      xs.insert(xs.end(), {up, -up, down, -down});
  }
  const Tensor x = make(dt, xs, {static_cast<int64_t>(xs.size())});
  CHECK(max_ulp_error(x.sin(), xs, dt, [](long double v) { return std::sin(v); }) <= 0.501);
  CHECK(max_ulp_error(x.cos(), xs, dt, [](long double v) { return std::cos(v); }) <= 0.501);
  // NaN for inf and NaN; sin keeps the sign of zero, cos of ±0 is 1.
  const Tensor special = make(dt, {kInf, -kInf, kNaN, -0.0, 0.0}, {5});
  const auto s = special.sin().to_vector<float>(), c = special.cos().to_vector<float>();
  for (int i = 0; i < 3; ++i) CHECK((std::isnan(s[i]) && std::isnan(c[i])));
  CHECK((s[3] == 0 && std::signbit(s[3]) && s[4] == 0 && !std::signbit(s[4])));
  CHECK((c[3] == 1 && c[4] == 1));
}

TEST_CASE("tanh and sigmoid accurate near 0 and saturating without NaN") {
  for (DType dt : float_dtypes()) {
    CAPTURE(to_string(dt));
    const bool f32 = dt == DType::Float32;
    auto xs = joined(sweep(2000, -25, 25, dt), sweep(800, f32 ? -140 : -1070, 4, dt, true));
    xs = joined(xs, {rounded(0.544324934, dt)});  // the old Float32 series form's worst (4.2 ulps)
    xs = joined(xs, negated(sweep(800, f32 ? -140 : -1070, 4, dt, true)));
    xs = joined(xs, sweep(400, -800, 800, dt));
    const Tensor x = make(dt, xs, {static_cast<int64_t>(xs.size())});
    // Float64, near 0, -t/(t+2): expm1's series (~1 ulp, amplified up to 1.6 by the quotient)
    // and two roundings, about 2.6 ulps at worst with the binade effect; beyond 0.55,
    // 1 - 2u/(1+u) is within ~1 ulp (1.82 seen). Float32: -t/(t+2) with t from one range
    // reduction, 2.54 ulps seen over 4M points (the old series form reached 4.2 near 0.544).
    // Float32 tanh is one TANH node, lowered to that form; the reference interpreter's is
    // libm's tanhf (within 1 ulp), so the two may differ by up to 3 + 1.
    CHECK(max_ulp_error(
              x.tanh(), xs, dt, [](long double v) { return std::tanh(v); }, 4) <= 3);
    // exp (1.5 ulps) then one add and one division (1.95 seen). Float32's is one SIGMOID node
    // lowered to that form, the reference interpreter's rounded once from double.
    CHECK(max_ulp_error(
              x.sigmoid(), xs, dt, [](long double v) { return 1 / (1 + std::exp(-v)); }, 3) <= 2.5);
  }
}

TEST_CASE("pow of two tensors and of a tensor and a number") {
  for (DType dt : float_dtypes()) {
    CAPTURE(to_string(dt));
    const bool f32 = dt == DType::Float32;
    const auto bases = sweep(3000, -20, 20, dt, true);
    const auto exps = sweep(3000, f32 ? -6 : -50, f32 ? 6 : 50, dt);
    const int64_t n = static_cast<int64_t>(bases.size());
    const Tensor b = make(dt, bases, {n}), e = make(dt, exps, {n});
    const std::vector<double> got = check_ref(b.pow(e), 2);
    double worst = 0;
    for (int64_t i = 0; i < n; ++i)
      worst = std::max(worst, ulp_error(got[i], std::pow(static_cast<long double>(bases[i]), exps[i]), dt));
    // libm pow; Float32: 2^(y log2|x|) in Float64 (0.5 ulp seen), within 2 ulps of the
    // reference interpreter's libm pow.
    CHECK(worst <= 1);
    // Negative bases with whole exponents, results from subnormal to near overflow.
    const auto neg = negated(sweep(2000, -8, 8, dt, true));
    std::vector<double> whole;
    for (int i = 0; i < 2000; ++i) whole.push_back(std::round(std::fmod(i * 7.31, 31.0)) - 15);
    const std::vector<double> got_neg = check_ref(make(dt, neg, {2000}).pow(make(dt, whole, {2000})), 2);
    double worst_neg = 0;
    for (int i = 0; i < 2000; ++i)
      worst_neg = std::max(worst_neg,
                           ulp_error(got_neg[i], std::pow(static_cast<long double>(neg[i]), whole[i]), dt));
    CHECK(worst_neg <= 1);
    // PyTorch's shortcuts: x*x and sqrt(x) and 1/x round once; x*x*x, 1/sqrt(x) and 1/(x*x)
    // twice; any other exponent is libm's pow.
    for (auto [p, bound] : {std::pair{2.0, 0.501},
                            {3.0, 2.0},
                            {0.5, 0.501},
                            {-0.5, 2.0},
                            {-1.0, 0.501},
                            {-2.0, 2.0},
                            {1.7, 1.0},
                            {-3.0, 1.0}}) {
      CAPTURE(p);
      const long double held = rounded(p, dt);  // the exponent as the tensor's dtype holds it
      CHECK(max_ulp_error(b.pow(p), bases, dt, [held](long double v) { return std::pow(v, held); }) <= bound);
    }
  }
}

TEST_CASE("hand-computed values and special inputs of the float functions") {
  for (DType dt : float_dtypes()) {
    CAPTURE(to_string(dt));
    const double pi = std::numbers::pi;
    Tensor x = make(dt, {0, 1, -1, kInf, -kInf, kNaN}, {6});
    check_values(x.exp(), {1, std::numbers::e, 1 / std::numbers::e, kInf, 0, kNaN}, 1);
    check_values(x.tanh(), {0, std::tanh(1.0), -std::tanh(1.0), 1, -1, kNaN}, 2);
    check_values(x.sigmoid(), {0.5, 1 / (1 + std::exp(-1.0)), 1 / (1 + std::exp(1.0)), 1, 0, kNaN}, 2);
    check_values(x.sin(), {0, std::sin(1.0), -std::sin(1.0), kNaN, kNaN, kNaN}, 1);
    check_values(x.cos(), {1, std::cos(1.0), std::cos(1.0), kNaN, kNaN, kNaN}, 1);
    check_values(make(dt, {pi, pi / 3, 2 * pi, -pi / 2}, {4}).cos(),
                 {-1, 0.5, 1, std::cos(rounded(-pi / 2, dt))}, 2);
    // Saturation without NaN, and the subnormal tail of sigmoid for very negative x.
    Tensor big = make(dt, {30, -30, 800, -800, 90}, {5});
    check_values(big.tanh(), {1, -1, 1, -1, 1});
    check_values(big.sigmoid(), {1 / (1 + std::exp(-30.0)), std::exp(-30.0) / (1 + std::exp(-30.0)), 1, 0, 1},
                 2);
    Tensor p = make(dt, {4, 0.25, 0, -0.0, -1}, {5});
    check_values(p.rsqrt(), {0.5, 2, kInf, -kInf, kNaN});
    check_values(p.reciprocal(), {0.25, 4, kInf, -kInf, -1});
    check_values(p.log(), {std::log(4.0), std::log(0.25), -kInf, -kInf, kNaN}, 2);
    check_values(p.log2(), {2, -2, -kInf, -kInf, kNaN});
    check_values(p.exp2(), {16, std::exp2(0.25), 1, 1, 0.5}, 1);
  }
  // Signed zeros: tanh(-0) = -0, sin(-0) = -0; exp of a Float64 subnormal result.
  for (DType dt : float_dtypes()) {
    CAPTURE(to_string(dt));
    const auto z = make(dt, {-0.0, 0.0}, {2}).tanh().cast(DType::Float64).to_vector<double>();
    CHECK(std::signbit(z[0]));
    CHECK_FALSE(std::signbit(z[1]));
  }
  // The NaN of an invalid argument has libm's sign bit, so code reading a NaN's sign
  // (tanh copies its argument's) sees the same bits as through libm.
  for (DType dt : float_dtypes()) {
    CAPTURE(to_string(dt));
    const auto nans = make(dt, {-1, -2}, {2}).log2().cast(DType::Float64).to_vector<double>();
    const auto ln = make(dt, {-3}, {1}).log().cast(DType::Float64).item<double>();
    const auto root = make(dt, {-2}, {1}).pow(0.5).cast(DType::Float64).item<double>();
    const auto frac = make(dt, {-2}, {1}).pow(make(dt, {1.5}, {1})).cast(DType::Float64).item<double>();
    for (double v : {nans[0], nans[1], ln, frac}) {
      REQUIRE(std::isnan(v));
      CHECK(std::signbit(v) == std::signbit(std::log2(-1.0)));
    }
    CHECK(std::isnan(root));
  }
  CHECK(make(DType::Float64, {-740}, {1}).exp().item<double>() == std::exp(-740.0));
  CHECK(make(DType::Float32, {-100}, {1}).exp().item<float>() == std::exp(-100.0f));
  CHECK(make(DType::Float64, {709.78}, {1}).exp().item<double>() == std::exp(709.78));
}

TEST_CASE("transcendentals of Bool and integer tensors compute in Float32") {
  for (DType dt : {DType::Bool, DType::UInt8, DType::Int32, DType::Int64}) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, {0, 1}, {2});
    for (const Tensor& r : {x.exp(), x.log(), x.exp2(), x.log2(), x.sqrt(), x.rsqrt(), x.sin(), x.cos(),
                            x.tanh(), x.sigmoid(), x.reciprocal(), x.pow(0.5)})
      CHECK(r.dtype() == DType::Float32);
    check_values(x.exp(), {1, std::numbers::e}, 1);
    check_values(x.cos(), {1, std::cos(1.0)}, 1);
    check_values(x.sigmoid(), {0.5, 1 / (1 + std::exp(-1.0))}, 2);
    check_values(x.reciprocal(), {kInf, 1});
  }
}

TEST_CASE("integer pow: integer results that wrap, and PyTorch's negative exponents") {
  for (DType dt : {DType::Int32, DType::Int64}) {
    CAPTURE(to_string(dt));
    Tensor a = make(dt, {2, -2, 3, 0, 0, 1, -1, -1, 2, 5, -3}, {11});
    Tensor e = make(dt, {10, 3, 0, 0, 5, -7, -3, -2, -1, 1, 4}, {11});
    Tensor p = a.pow(e);
    CHECK(p.dtype() == dt);
    // Negative exponents: 1 for a = 1, ±1 for a = -1 (odd/even), else 0.
    check_values(p, {1024, -8, 1, 1, 0, 1, -1, 1, 0, 5, 81});
  }
  // Wrapping: 3^21 = 10460353203 is 1870418611 mod 2^32; 2^31 is INT_MIN; 3^39 fits Int64,
  // 3^40 = 12157665459056928801 wraps (and 3^41 is three times that, mod 2^64).
  check_values(make(DType::Int32, {3, 2, -2}, {3}).pow(make(DType::Int32, {21, 31, 31}, {3})),
               {1870418611, -2147483648.0, -2147483648.0});
  const auto big =
      make(DType::Int64, {3, 3, 3}, {3}).pow(make(DType::Int64, {39, 40, 41}, {3})).to_vector<int64_t>();
  CHECK(big[0] == 4052555153018976267LL);
  CHECK(static_cast<uint64_t>(big[1]) == 12157665459056928801ULL);
  CHECK(static_cast<uint64_t>(big[2]) == 12157665459056928801ULL * 3ULL);  // unsigned wrap is defined
  // UInt8: 3^5 = 243, 2^8 = 256 -> 0, 3^6 = 729 -> 217.
  Tensor u = make(DType::UInt8, {3, 2, 3, 7}, {4});
  check_values(u.pow(make(DType::UInt8, {5, 8, 6, 0}, {4})), {243, 0, 217, 1});
  // Bool computes as Int32; an integer base and a float exponent give a float.
  Tensor b = make(DType::Bool, {1, 0}, {2});
  CHECK(b.pow(b).dtype() == DType::Int32);
  check_values(b.pow(b), {1, 1});
  Tensor mixed = make(DType::Int32, {4, 9}, {2}).pow(make(DType::Float32, {0.5, -0.5}, {2}));
  CHECK(mixed.dtype() == DType::Float32);
  check_values(mixed, {2, 1.0 / 3}, 1);
}

TEST_CASE("pow with a number: whole powers keep integer dtypes, fractional give Float32") {
  for (DType dt : {DType::UInt8, DType::Int32, DType::Int64}) {
    CAPTURE(to_string(dt));
    Tensor a = make(dt, {0, 1, 2, 3, 5}, {5});
    CHECK(a.pow(3).dtype() == dt);
    check_values(a.pow(3), {0, 1, 8, 27, 125});
    // a itself and a constant, so no kernel runs; 0^0 = 1, as in PyTorch.
    CHECK(values(a.pow(1)) == std::vector<double>{0, 1, 2, 3, 5});
    CHECK(values(a.pow(0)) == std::vector<double>{1, 1, 1, 1, 1});
    CHECK(a.pow(0.5).dtype() == DType::Float32);
    check_values(a.pow(0.5), {0, 1, std::sqrt(2.0), std::sqrt(3.0), std::sqrt(5.0)});
    CHECK_THROWS_WITH_AS(a.pow(-1), doctest::Contains("to the negative integer power -1 is not allowed"),
                         Error);
  }
  check_values(make(DType::Int32, {-3, 46341}, {2}).pow(2), {9, -2147479015});  // 46341^2 wraps
  check_values(make(DType::UInt8, {3}, {1}).pow(6), {217});
  check_values(make(DType::Bool, {1, 0}, {2}).pow(2), {1, 0});
  CHECK(make(DType::Bool, {1}, {1}).pow(2).dtype() == DType::Int32);
  CHECK_THROWS_WITH_AS(make(DType::Int64, {2}, {1}).pow(1e30), doctest::Contains("out of range"), Error);
}

TEST_CASE("float pow: libm's special values, and PyTorch's shortcuts for 2, 3, 0.5, -0.5, -1, -2") {
  for (DType dt : float_dtypes()) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, {-8, 0, -0.0, kNaN, 1, -kInf, 4}, {7});
    Tensor y = make(dt, {1.0 / 3, -1, -1, 0, kNaN, 0.5, -0.5}, {7});
    check_values(x.pow(y), {kNaN, kInf, -kInf, 1, 1, kInf, 0.5});
    // C's other special cases: |x| = 1 with an infinite y, odd and even integer y of -0 and
    // -inf, infinite y on either side of 1.
    Tensor xs = make(dt, {-1, 1, -0.0, -0.0, -kInf, -kInf, 0.5, 0.5, 2, 2, -2, kNaN}, {12});
    Tensor ys = make(dt, {kInf, -kInf, 3, 2, 3, -3, kInf, -kInf, kInf, -kInf, 3, 1}, {12});
    check_values(xs.pow(ys), {1, 1, -0.0, 0, -kInf, -0.0, 0, kInf, kInf, 0, -8, kNaN});
    Tensor v = make(dt, {-2, 0.5, 4, kInf}, {4});
    check_values(v.pow(2), {4, 0.25, 16, kInf});
    check_values(v.pow(3), {-8, 0.125, 64, kInf});
    check_values(v.pow(0.5), {kNaN, std::sqrt(0.5), 2, kInf}, 1);
    check_values(v.pow(-0.5), {kNaN, std::sqrt(2.0), 0.5, 0}, 1);
    check_values(v.pow(-1), {-0.5, 2, 0.25, 0});
    check_values(v.pow(-2), {0.25, 4, 0.0625, 0});
    check_values(v.pow(0), {1, 1, 1, 1});
    check_values(v.pow(1.5), {kNaN, std::pow(0.5, 1.5), 8, kInf}, 1);
    // pow(-inf, 0.5) is +inf in libm but sqrt(-inf) = NaN: the shortcut follows PyTorch.
    check_values(make(dt, {-kInf}, {1}).pow(0.5), {kNaN});
  }
}

TEST_CASE("log1p and expm1: accurate near 0 and over their whole range") {
  for (DType dt : float_dtypes()) {
    CAPTURE(to_string(dt));
    const bool f32 = dt == DType::Float32;
    // Tiny magnitudes of both signs, where log(1 + x) and exp(x) - 1 lose every digit, then
    // wide ranges: log1p over (-1, 2^127], expm1 across the switch at |x| = 1.1 to overflow.
    const auto tiny = sweep(600, f32 ? -140 : -1000, -1, dt, true);
    const auto log_args =
        joined(joined(tiny, negated(tiny)),
               joined(sweep(1500, -0.999999, 3, dt), sweep(800, 1, f32 ? 127 : 1023, dt, true)));
    const Tensor lx = make(dt, log_args, {static_cast<int64_t>(log_args.size())});
    // Kahan's form: log's 2 ulps (log2 times ln2) and the quotient's rounding (2.1 seen).
    CHECK(max_ulp_error(lx.log1p(), log_args, dt, [](long double v) { return std::log1p(v); }) <= 3);
    const auto exp_args =
        joined(joined(tiny, negated(tiny)), sweep(2000, f32 ? -104 : -745, f32 ? 88 : 709, dt));
    const Tensor ex = make(dt, exp_args, {static_cast<int64_t>(exp_args.size())});
    // The series (Horner, about 1 ulp) inside |x| <= 1.1; exp's 1.5 ulps plus the subtraction beyond.
    CHECK(max_ulp_error(ex.expm1(), exp_args, dt, [](long double v) { return std::expm1(v); }) <= 2);
  }
  // Special values, as PyTorch's: log1p(-1) = -inf, below -1 NaN, inf stays inf; expm1(-inf) = -1.
  check_values(make(DType::Float32, {-1, -2, kInf, kNaN, 0, -0.0}, {6}).log1p(),
               {-kInf, kNaN, kInf, kNaN, 0, -0.0});
  check_values(make(DType::Float32, {-kInf, kInf, kNaN, 0, 1000}, {5}).expm1(), {-1, kInf, kNaN, 0, kInf});
  // Integers compute in Float32, half dtypes in Float32 rounded once.
  CHECK(Tensor::from_vector<int32_t>({0, 1}, {2}).log1p().dtype() == DType::Float32);
  CHECK(make(DType::BFloat16, {0.5}, {1}).expm1().dtype() == DType::BFloat16);
}

TEST_CASE("log1p and expm1: gradients 1 / (1 + x) and e^x, finite at the branch switches") {
  test::gradcheck1([](const Tensor& x) { return x.log1p(); }, test::Input{{24}, -0.9, 3});
  test::gradcheck1([](const Tensor& x) { return x.expm1(); }, test::Input{{24}, -3, 3});
  // At and around the switches: u == 1 for log1p, |x| = 1.1 for expm1.
  const std::vector<double> xs = {0, 1e-17, -1e-17, 1e-9, -1e-9, 1.1, -1.1, 2, 700};
  Tensor x = make(DType::Float64, xs, {9}).requires_grad_();
  x.expm1().sum().backward();
  const std::vector<double> domain(xs.begin(), xs.begin() + 6);  // log1p's: above -1
  Tensor y = make(DType::Float64, domain, {6}).requires_grad_();
  y.log1p().sum().backward();
  const std::vector<double> dx = values(x.grad()), dy = values(y.grad());
  for (size_t i = 0; i < xs.size(); ++i) {
    CAPTURE(xs[i]);
    CHECK(dx[i] == doctest::Approx(std::exp(xs[i])).epsilon(1e-12));
    if (i < dy.size()) CHECK(dy[i] == doctest::Approx(1 / (1 + xs[i])).epsilon(1e-12));
  }
}
