// sum and max over every axis subset, keepdim, odd sizes, every dtype.
#include "check.hpp"

#include <cmath>
#include <limits>

using namespace loom;
using test::check_ref;
using test::check_values;
using test::iota;
using test::make;

TEST_CASE("sum and max over every axis subset of a 4-D tensor, with and without keepdim") {
  Shape s{2, 3, 4, 5};
  Tensor a = make(DType::Float32, iota(120, 0.25, -7), s);
  for (int mask = 0; mask < 16; ++mask) {
    std::vector<int> axes;
    for (int i = 0; i < 4; ++i)
      if (mask & (1 << i)) axes.push_back(i);
    for (bool keep : {false, true}) {
      CAPTURE(mask);
      CAPTURE(keep);
      check_ref(a.sum(axes, keep));
      check_ref(a.max(axes, keep));
      Shape want;
      for (int i = 0; i < 4; ++i) {
        bool reduced = axes.empty() || (mask & (1 << i));
        if (!reduced)
          want.push_back(s[i]);
        else if (keep)
          want.push_back(1);
      }
      CHECK(a.sum(axes, keep).shape() == want);
    }
  }
}

TEST_CASE("hand-computed sums and maxes, negative axes") {
  Tensor a = make(DType::Float32, {1, 5, 3, 4, 2, 6}, {2, 3});
  check_values(a.sum(), {21});
  check_values(a.sum(0), {5, 7, 9});
  check_values(a.sum(-1), {9, 12});
  check_values(a.sum(1, true), {9, 12});
  CHECK(a.sum(1, true).shape() == Shape{2, 1});
  check_values(a.max(), {6});
  check_values(a.max(-2), {4, 5, 6});
  check_values(a.max(1), {5, 6});
  CHECK(a.sum().shape() == Shape{});
}

TEST_CASE("reduce dtypes: Bool and UInt8 sums give Int32, others keep theirs") {
  check_values(make(DType::Bool, {1, 1, 0, 1}, {4}).sum(), {3});
  CHECK(make(DType::Bool, {1}, {1}).sum().dtype() == DType::Int32);
  check_values(make(DType::UInt8, {200, 100, 50}, {3}).sum(), {350});
  CHECK(make(DType::UInt8, {1}, {1}).sum().dtype() == DType::Int32);
  check_values(make(DType::UInt8, {200, 100, 50}, {3}).max(), {200});
  for (DType dt : {DType::Int32, DType::Int64, DType::Float64}) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, {-4, 9, 2, -1}, {2, 2});
    CHECK(x.sum().dtype() == dt);
    check_values(x.sum(0), {-2, 8});
    check_values(x.max(1), {9, 2});
  }
  check_values(make(DType::Bool, {0, 1, 0, 0}, {2, 2}).max(1), {1, 0});
}

TEST_CASE("NaN propagates through max; an empty sum is 0; an empty max is an error") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  check_values(make(DType::Float32, {1, nan, 3, 4}, {2, 2}).max(1), {nan, 4});
  Tensor empty = Tensor::zeros({3, 0});
  check_values(empty.sum(1) + 1, {1, 1, 1});
  CHECK_THROWS_AS(empty.max(1), Error);
}

TEST_CASE("reductions over odd sizes 1, 7 and 1023 feeding elementwise ops") {
  for (int64_t n : {1, 7, 1023}) {
    CAPTURE(n);
    Tensor x = make(DType::Float32, iota(n * 3, 0.001, -0.5), {3, n});
    // The reference sums sequentially, loom in blocks of vector accumulators
    // (docs/semantics.md): the sums differ by a few ulps of sum|x| (about 23 |sum x|
    // here), which exp and the division turn into a relative error of their result.
    const double sum_ulps = 256;
    check_ref(x.sum(1).exp(), sum_ulps);
    check_ref(x / x.sum(1, true), sum_ulps);
    check_ref(x - x.max(1, true));
    check_ref(x.max(0) * x.sum(0));
  }
}

// ---- min, mean, prod ---------------------------------------------------------------------------

namespace {
// Bool values are 0/1; every other dtype takes the numbers as they are.
std::vector<double> fit(DType dt, std::vector<double> v) {
  if (dt.is_bool())
    for (double& e : v) e = e != 0;
  return v;
}
const double nan_v = std::numeric_limits<double>::quiet_NaN();
const double inf_v = std::numeric_limits<double>::infinity();
}  // namespace

TEST_CASE("min over every axis subset of a 3-D tensor, with and without keepdim") {
  Tensor a = make(DType::Float32, iota(24, -0.75, 5), {2, 3, 4});
  for (int mask = 0; mask < 8; ++mask) {
    std::vector<int> axes;
    for (int i = 0; i < 3; ++i)
      if (mask & (1 << i)) axes.push_back(i);
    for (bool keep : {false, true}) {
      CAPTURE(mask);
      CAPTURE(keep);
      check_ref(a.min(axes, keep));
    }
  }
  check_values(a.min(), {5 - 0.75 * 23});
  check_values(a.min({0, 2}), {5 - 0.75 * 15, 5 - 0.75 * 19, 5 - 0.75 * 23});
}

TEST_CASE("min, prod and mean on every dtype against hand values") {
  for (DType dt : test::all_dtypes()) {
    CAPTURE(to_string(dt));
    const bool b = dt.is_bool();
    Tensor x = make(dt, fit(dt, {3, 1, 2, 2, 5, 4}), {2, 3});
    CHECK(x.min().dtype() == dt);
    check_values(x.min(1), b ? std::vector<double>{1, 1} : std::vector<double>{1, 2});
    check_values(x.min(0, true), fit(dt, {2, 1, 2}));
    const DType prod_dt = b || dt == DType::UInt8 ? DType::Int32 : dt;
    CHECK(x.prod().dtype() == prod_dt);
    check_values(x.prod(1), b ? std::vector<double>{1, 1} : std::vector<double>{6, 40});
    check_values(x.prod(), {b ? 1.0 : 240.0});
    const DType mean_dt = dt.is_float() ? dt : DType::Float32;
    CHECK(x.mean().dtype() == mean_dt);
    check_values(x.mean(1), b ? std::vector<double>{1, 1} : std::vector<double>{2, 11.0 / 3}, 1);
    check_values(x.mean(), {b ? 1.0 : 17.0 / 6}, 1);
  }
  check_values(make(DType::Bool, {1, 0, 1, 1}, {2, 2}).min(1), {0, 1});
  check_values(make(DType::Bool, {1, 0, 0, 1, 1, 1}, {3, 2}).prod(1), {0, 0, 1});
  check_values(make(DType::Bool, {1, 0, 0, 0}, {4}).mean(), {0.25});
}

TEST_CASE("min on integers is exact at the ends of the range (no negation overflow)") {
  const double i32_min = std::numeric_limits<int32_t>::min(), i32_max = std::numeric_limits<int32_t>::max();
  check_values(make(DType::Int32, {i32_max, i32_min, 0, -1}, {4}).min(), {i32_min});
  check_values(make(DType::Int32, {i32_max, i32_max - 1}, {2}).min(), {i32_max - 1});
  const int64_t i64_min = std::numeric_limits<int64_t>::min();
  Tensor big = Tensor::from_vector<int64_t>({7, i64_min, std::numeric_limits<int64_t>::max()}, {3});
  CHECK(big.min().item<int64_t>() == i64_min);
  check_values(make(DType::UInt8, {255, 254, 0, 255}, {2, 2}).min(1), {254, 0});
  check_values(make(DType::UInt8, {255, 255}, {2}).min(), {255});
}

TEST_CASE("NaN propagates through min; mean of an empty axis is NaN; prod of it is 1") {
  check_values(make(DType::Float32, {1, nan_v, -3, 4}, {2, 2}).min(1), {nan_v, -3});
  check_values(make(DType::Float64, {-inf_v, 2, nan_v, 0}, {2, 2}).min(0), {nan_v, 0});
  Tensor empty = Tensor::zeros({3, 0});
  check_values(empty.mean(1) + 0, {nan_v, nan_v, nan_v});
  check_values(empty.prod(1) + 0, {1, 1, 1});
  check_values(make(DType::Int32, {2, 3}, {2}).reshape({2, 1}).expand({2, 0}).prod(1) * 1, {1, 1});
}

TEST_CASE("mean: axis subsets and keepdim, Float64 keeps its dtype, integers give Float32") {
  Tensor a = make(DType::Float64, iota(24, 0.5, -3), {2, 3, 4});
  check_ref(a.mean({0, 2}));
  check_ref(a.mean(1, true));
  CHECK(a.mean(1, true).shape() == Shape{2, 1, 4});
  check_values(make(DType::Float64, {1, 2, 3, 4, 5, 6}, {2, 3}).mean(0), {2.5, 3.5, 4.5});
  Tensor i = make(DType::Int64, {1, 2, 4, 8}, {2, 2});
  CHECK(i.mean().dtype() == DType::Float32);
  check_values(i.mean(-1), {1.5, 6});
}

TEST_CASE("an empty max, min or argmax is an error naming the op, the axis and the shape") {
  Tensor empty = Tensor::zeros({3, 0});
  CHECK_THROWS_WITH_AS(empty.min(1), doctest::Contains("min: cannot reduce axis 1 of size 0 in shape [3, 0]"),
                       Error);
  CHECK_THROWS_WITH_AS(empty.max(), doctest::Contains("max: cannot reduce axis 1 of size 0 in shape [3, 0]"),
                       Error);
  CHECK_THROWS_WITH_AS(empty.argmax(1), doctest::Contains("argmax: cannot reduce axis 1 of size 0"), Error);
  CHECK_THROWS_WITH_AS(empty.argmin(-1), doctest::Contains("argmin: cannot reduce axis 1 of size 0"), Error);
  CHECK_THROWS_WITH_AS(empty.min(2), doctest::Contains("min: axis 2 is out of range"), Error);
  CHECK_THROWS_WITH_AS(empty.mean(-3), doctest::Contains("mean: axis -3 is out of range"), Error);
  CHECK_THROWS_WITH_AS(empty.prod(5), doctest::Contains("prod: axis 5 is out of range"), Error);
}

// ---- argmax, argmin ---------------------------------------------------------------------------

TEST_CASE("argmax and argmin give Int32, the first index on ties, on every dtype") {
  for (DType dt : test::all_dtypes()) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, fit(dt, {1, 5, 5, 0, 2, 0, 4, 2, 1, 3, 4, 0}), {3, 4});
    CHECK(x.argmax(1).dtype() == DType::Int32);
    CHECK(x.argmax(1).shape() == Shape{3});
    if (dt.is_bool()) {
      check_values(x.argmax(1), {0, 0, 0});
      check_values(x.argmin(1), {3, 1, 3});
      check_values(x.argmax(0), {0, 0, 0, 1});
      check_values(x.argmin(0), {0, 1, 0, 0});
    } else {
      check_values(x.argmax(1), {1, 2, 2});
      check_values(x.argmin(1), {3, 1, 3});
      check_values(x.argmax(0), {1, 0, 0, 1});
      check_values(x.argmin(0), {0, 1, 1, 0});
      check_values(x.argmax(-2), {1, 0, 0, 1});
    }
  }
}

TEST_CASE("argmax and argmin: NaN counts as the maximum (and the minimum), the first NaN wins") {
  Tensor x = make(DType::Float32, {1, nan_v, 3, nan_v, -inf_v, 2, inf_v, 2}, {2, 4});
  check_values(x.argmax(1), {1, 2});
  check_values(x.argmin(1), {1, 0});
  Tensor y = make(DType::Float64, {-1, -1, -2, -2}, {4});
  check_values(y.argmax(0), {0});
  check_values(y.argmin(0), {2});
}

TEST_CASE("argmin on integers at the ends of the range, argmax over a long row") {
  const double i32_min = std::numeric_limits<int32_t>::min(), i32_max = std::numeric_limits<int32_t>::max();
  check_values(make(DType::Int32, {0, i32_max, i32_min, i32_min}, {4}).argmin(0), {2});
  check_values(make(DType::Int32, {i32_min, i32_max, i32_max}, {3}).argmax(0), {1});
  check_values(make(DType::UInt8, {255, 0, 255, 0}, {4}).argmin(0), {1});
  Tensor row = make(DType::Float32, iota(1000, 0.5, 0), {1, 1000});
  check_values(row.argmax(1), {999});
  check_values(row.flip(1).argmax(-1), {0});
  check_ref((row * -1).argmax(1));
}

// ---- softmax, log_softmax, logsumexp -------------------------------------------------------------

namespace {
std::vector<double> softmax_of(const std::vector<double>& row) {
  double m = -inf_v, s = 0;
  for (double v : row) m = std::max(m, v);
  for (double v : row) s += std::exp(v - m);
  std::vector<double> out;
  for (double v : row) out.push_back(std::exp(v - m) / s);
  return out;
}
std::vector<double> log_softmax_of(const std::vector<double>& row) {
  double m = -inf_v, s = 0;
  for (double v : row) m = std::max(m, v);
  for (double v : row) s += std::exp(v - m);
  std::vector<double> out;
  for (double v : row) out.push_back(v - m - std::log(s));
  return out;
}
std::vector<double> concat(std::vector<double> a, const std::vector<double>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
}  // namespace

TEST_CASE("softmax and log_softmax against std::exp, in Float32 and Float64, over either axis") {
  const std::vector<double> r0{1, 2, 3, 0.5}, r1{-2, 0, 0.25, -1};
  for (DType dt : {DType::Float32, DType::Float64}) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, concat(r0, r1), {2, 4});
    CHECK(x.softmax().dtype() == dt);
    check_values(x.softmax(), concat(softmax_of(r0), softmax_of(r1)), 8);
    check_values(x.softmax(1), concat(softmax_of(r0), softmax_of(r1)), 8);
    check_values(x.log_softmax(-1), concat(log_softmax_of(r0), log_softmax_of(r1)), 8);
    const auto c0 = softmax_of({1, -2}), c3 = log_softmax_of({0.5, -1});
    check_values(x.softmax(0).shrink({{0, 2}, {0, 1}}), c0, 8);
    check_values(x.log_softmax(0).shrink({{0, 2}, {3, 4}}), c3, 8);
  }
}

TEST_CASE("softmax, log_softmax and logsumexp of +-1e4 give no inf or NaN") {
  Tensor x = make(DType::Float32, {1e4, -1e4, 0, 1e4, 1e4, 1e4 - 1, -1e4, -1e4 + 2}, {2, 4});
  const double e1 = std::exp(-1.0);
  check_values(x.softmax(1), {0.5, 0, 0, 0.5, 1 / (1 + e1), e1 / (1 + e1), 0, 0}, 8);
  check_values(x.log_softmax(1),
               {-std::log(2.0), -2e4 - std::log(2.0), -1e4 - std::log(2.0), -std::log(2.0), -std::log(1 + e1),
                -1 - std::log(1 + e1), -2e4 - std::log(1 + e1), -2e4 + 2 - std::log(1 + e1)},
               8);
  check_values(x.logsumexp(1), {1e4 + std::log(2.0), 1e4 + std::log(1 + e1)}, 2);
  Tensor neg = make(DType::Float64, {-1e4, -1e4 - 3, -1e4 + 1}, {3});
  check_values(neg.logsumexp(0), {-1e4 + 1 + std::log(1 + std::exp(-1.0) + std::exp(-4.0))}, 4);
}

TEST_CASE("logsumexp: hand values, infinities as in PyTorch, an empty axis, integers compute in Float32") {
  Tensor x = make(DType::Float64, {0, std::log(3.0), -inf_v, -inf_v, 1, inf_v}, {3, 2});
  check_values(x.logsumexp(1), {std::log(4.0), -inf_v, inf_v}, 4);
  check_values(make(DType::Float32, {-inf_v, nan_v, 0, 0}, {2, 2}).logsumexp(1), {nan_v, std::log(2.0)}, 4);
  check_values(make(DType::Float64, {1, 2, 3, 4}, {2, 2}).logsumexp(0),
               {3 + std::log(1 + std::exp(-2.0)), 4 + std::log(1 + std::exp(-2.0))}, 4);
  Tensor empty = Tensor::zeros({2, 0});
  CHECK(empty.logsumexp(1).shape() == Shape{2});
  CHECK(empty.logsumexp(1).to_vector<float>() == std::vector<float>{-INFINITY, -INFINITY});
  CHECK(empty.softmax(1).shape() == Shape{2, 0});
  Tensor i = make(DType::Int32, {1, 2, 3, 0}, {4});
  CHECK(i.softmax(0).dtype() == DType::Float32);
  check_values(i.softmax(0), softmax_of({1, 2, 3, 0}), 8);
  check_values(i.logsumexp(0), {3 + std::log(1 + std::exp(-1.0) + std::exp(-2.0) + std::exp(-3.0))}, 4);
  CHECK_THROWS_WITH_AS(x.softmax(2), doctest::Contains("softmax: axis 2 is out of range"), Error);
  CHECK_THROWS_WITH_AS(x.logsumexp(-3), doctest::Contains("logsumexp: axis -3 is out of range"), Error);
}

// ---- keepdim must be a bool ---------------------------------------------------------------------

namespace {
// True when `t.op(1, 2)` compiles; the header deletes every overload whose second argument is not bool.
template <class T>
constexpr bool sum_int_keepdim = requires(const T& t) {
  t.sum(1, 2);
};
template <class T>
constexpr bool max_int_keepdim = requires(const T& t) {
  t.max(1, 2);
};
template <class T>
constexpr bool min_int_keepdim = requires(const T& t) {
  t.min(1, 2);
};
template <class T>
constexpr bool mean_int_keepdim = requires(const T& t) {
  t.mean(1, 2);
};
template <class T>
constexpr bool prod_int_keepdim = requires(const T& t) {
  t.prod(1, 2);
};
template <class T>
constexpr bool vector_int_keepdim = requires(const T& t) {
  t.sum(std::vector<int>{1}, 2);
};
// Controls: the bool forms compile, so the checks above fail for the deleted overload alone.
template <class T>
constexpr bool bool_keepdim = requires(const T& t) {
  t.sum(1, true);
  t.max(1, false);
  t.min(std::vector<int>{1}, true);
  t.mean(1);
  t.prod(0, true);
};
}  // namespace

TEST_CASE("t.sum(1, 2) and friends do not compile; t.sum(1, true) does") {
  static_assert(!sum_int_keepdim<Tensor>);
  static_assert(!max_int_keepdim<Tensor>);
  static_assert(!min_int_keepdim<Tensor>);
  static_assert(!mean_int_keepdim<Tensor>);
  static_assert(!prod_int_keepdim<Tensor>);
  static_assert(!vector_int_keepdim<Tensor>);
  static_assert(bool_keepdim<Tensor>);
  CHECK(bool_keepdim<Tensor>);
}

TEST_CASE("any and all: Bool over axes, NaN nonzero, false and true over no elements") {
  const Tensor x = make(DType::Float32, {0, 0, 1, 0, NAN, 2}, {2, 3});
  check_values(x.any(), {1});
  check_values(x.all(), {0});
  check_values(x.any(1), {1, 1});
  check_values(x.all(1), {0, 0});
  check_values(x.any(0), {0, 1, 1});
  check_values(x.all(0), {0, 0, 1});
  CHECK(x.all(0, true).shape() == Shape{1, 3});
  CHECK(x.any().dtype() == DType::Bool);
  const Tensor empty = Tensor::zeros({2, 0}, DType::Int32);
  check_values(empty.any(1), {0, 0});
  check_values(empty.all(1), {1, 1});
  check_values(make(DType::Bool, {1, 1, 0}, {3}).all(), {0});
}
