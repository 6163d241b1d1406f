// Gradients at kinks and special points, against the values PyTorch 1.13 gives
// (by hand: torch.relu(x).sum().backward() and so on).
#include "check.hpp"

#include <loom/loom.hpp>

#include <cmath>
#include <limits>

using namespace loom;

namespace {
constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double qnan = std::numeric_limits<double>::quiet_NaN();

Tensor vec(std::vector<double> v) {
  const auto n = static_cast<int64_t>(v.size());
  return Tensor::from_vector<double>(v, {n});
}
// d sum(f(x)) / dx.
std::vector<double> grad_of(const std::function<Tensor(const Tensor&)>& f, std::vector<double> x) {
  const Tensor t = vec(std::move(x));
  return gradient(f(t).sum(), {t})[0].to_vector<double>();
}
// Equal, NaN equal to NaN, and the sign of a zero counted when `signed_zeros`.
void check_same(const std::vector<double>& got, const std::vector<double>& want, bool signed_zeros = false) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element ", i, ": got ", got[i], ", want ", want[i]);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(got[i]));
    } else {
      CHECK(got[i] == want[i]);
      if (signed_zeros) CHECK(std::signbit(got[i]) == std::signbit(want[i]));
    }
  }
}
}  // namespace

TEST_CASE("relu: derivative 0 at 0 and -0; relu(-0) is -0 as in PyTorch") {
  check_same(grad_of([](const Tensor& x) { return x.relu(); }, {-0.0, 0.0, -inf, 2, -3}), {0, 0, 0, 1, 0});
  const auto v = vec({-0.0, 0.0, qnan, -inf, 2}).relu().to_vector<double>();
  CHECK(std::signbit(v[0]));
  CHECK_FALSE(std::signbit(v[1]));
  CHECK(std::isnan(v[2]));
  CHECK(v[3] == 0);
  CHECK(v[4] == 2);
}

TEST_CASE("abs: derivative 0 at 0, the sign elsewhere") {
  check_same(grad_of([](const Tensor& x) { return x.abs(); }, {-0.0, 0.0, -inf, 2, -3}), {0, 0, -1, 1, -1});
}

TEST_CASE("clamp: derivative 1 on [lo, hi] with both bounds, 0 outside, 0 everywhere when lo > hi") {
  check_same(grad_of([](const Tensor& x) { return x.clamp(0, 2); }, {-0.0, 0.0, 2, -inf, 3, 1}),
             {1, 1, 1, 0, 0, 1});
  check_same(grad_of([](const Tensor& x) { return x.clamp(3, 1); }, {-0.0, 0.0, 2, -inf, 5}),
             {0, 0, 0, 0, 0});
  const auto v = vec({-0.0, 5}).clamp(0, 2).to_vector<double>();
  CHECK(std::signbit(v[0]));  // PyTorch keeps -0.0
  CHECK(v[1] == 2);
}

TEST_CASE("max and min reductions split the gradient equally among ties, as PyTorch's amax") {
  check_same(grad_of([](const Tensor& x) { return x.max(); }, {1, 3, 3, 2}), {0, 0.5, 0.5, 0});
  check_same(grad_of([](const Tensor& x) { return x.min(); }, {1, 3, 3, 2}), {1, 0, 0, 0});
  check_same(grad_of([](const Tensor& x) { return x.min(); }, {1, 1, 3, 1}), {1.0 / 3, 1.0 / 3, 0, 1.0 / 3});
  const Tensor m = Tensor::from_vector<double>({5, 5, 1, 2, 7, 7}, {2, 3});
  check_same(gradient(m.max(1).sum(), {m})[0].to_vector<double>(), {0.5, 0.5, 0, 0, 0.5, 0.5});
}

TEST_CASE("maximum and minimum split a tie in halves") {
  const Tensor a = vec({1, 3, 3, 2});
  check_same(gradient(a.maximum(3.0).sum(), {a})[0].to_vector<double>(), {0, 0.5, 0.5, 0});
  check_same(gradient(a.minimum(3.0).sum(), {a})[0].to_vector<double>(), {1, 0.5, 0.5, 1});
  const Tensor b = vec({3, 3, 0, 3});
  check_same(gradient(a.maximum(b).sum(), {b})[0].to_vector<double>(), {1, 0.5, 0, 1});
}

TEST_CASE("prod with zeros: the product of the others, 0 wherever two or more are zero") {
  check_same(grad_of([](const Tensor& x) { return x.prod(); }, {2, 0, 3, 4}), {0, 24, 0, 0});
  check_same(grad_of([](const Tensor& x) { return x.prod(); }, {2, 0, 3, 0}), {0, 0, 0, 0});
  check_same(grad_of([](const Tensor& x) { return x.prod(); }, {2, -1, 3, 4}), {-12, 24, -8, -6});
}

TEST_CASE("pow: PyTorch's masks at a zero base or exponent, a negative base with an integer exponent") {
  const Tensor p = vec({0, -2, 0, -2, 0}), e = vec({2, 3, 0, 0.5, -1});
  const auto g = gradient(p.pow(e).sum(), {p, e});
  check_same(g[0].to_vector<double>(), {0, 12, 0, qnan, -inf});
  check_same(g[1].to_vector<double>(), {0, qnan, 0, qnan, -inf});
  check_same(grad_of([](const Tensor& x) { return x.pow(3.0); }, {-5, 0, 2}), {75, 0, 12});
  check_same(grad_of([](const Tensor& x) { return x.pow(5.0); }, {-2, 0}), {80, 0});
}

TEST_CASE("sigmoid'(0) = 1/4, tanh'(0) = 1, cos'(0) = 0 with PyTorch's signs, sqrt'(0) = inf") {
  check_same(grad_of([](const Tensor& x) { return x.sigmoid(); }, {0.0, -0.0, -inf, inf}),
             {0.25, 0.25, 0, 0});
  check_same(grad_of([](const Tensor& x) { return x.tanh(); }, {0.0, -0.0, inf}), {1, 1, 0});
  check_same(grad_of([](const Tensor& x) { return x.cos(); }, {-0.0, 0.0, -inf}), {0.0, -0.0, qnan}, true);
  check_same(grad_of([](const Tensor& x) { return x.sqrt(); }, {0.0, -0.0}), {inf, -inf});
  check_same(grad_of([](const Tensor& x) { return x.exp(); }, {0, -inf, 1000}), {1, 0, inf});
  check_same(grad_of([](const Tensor& x) { return x.log(); }, {0, 1}), {inf, 1});
  // Float32 too: the rules work in the tensor's own dtype.
  const Tensor f = Tensor::from_vector<float>({0, 0}, {2});
  CHECK(gradient(f.sigmoid().sum() + f.cos().sum(), {f})[0].to_vector<float>() ==
        std::vector<float>{0.25f, 0.25f});
}

TEST_CASE("where: a NaN or inf in the branch not selected gives no NaN in the gradient") {
  const Tensor x = vec({-1, 2, 0, 3});
  const Tensor bad = vec({qnan, inf, -inf, qnan});
  const Tensor c = x.gt(0);
  const auto g = gradient(where(c, x, bad).sum() + where(c, bad, x * 2).sum(), {x})[0].to_vector<double>();
  check_same(g, {2, 1, 2, 1});
  // The unselected branch may also be a function of x that is infinite there.
  check_same(grad_of([](const Tensor& t) { return where(t.gt(0), t, t.exp() * 1e308 * 1e308); }, {-1, 2}),
             {inf, 1});
  check_same(grad_of([](const Tensor& t) { return where(t.gt(0), t.log(), t); }, {-1, 2}), {1, 0.5});
}

TEST_CASE("softmax and log_softmax over a row with -inf (a masked logit): PyTorch's finite gradients") {
  const Tensor x = Tensor::from_vector<double>({0, -inf, 1, -inf, 2, 2}, {2, 3});
  const Tensor w = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const auto soft = gradient((x.softmax(1) * w).sum(), {x})[0].to_vector<double>();
  const auto log_soft = gradient((x.log_softmax(1) * w).sum(), {x})[0].to_vector<double>();
  const std::vector<double> torch_soft{-0.3932, 0, 0.3932, 0, -0.25, 0.25};
  const std::vector<double> torch_log_soft{-0.6136, 2, -1.3864, 4, -2.5, -1.5};
  for (size_t i = 0; i < 6; ++i) {
    CHECK(soft[i] == doctest::Approx(torch_soft[i]).epsilon(1e-4));
    CHECK(log_soft[i] == doctest::Approx(torch_log_soft[i]).epsilon(1e-4));
  }
}

TEST_CASE("integer and Bool values carry no gradient: a path through them contributes nothing") {
  const Tensor x = vec({1.5, -2.5});
  const Tensor y = x * 2 + x.cast(DType::Int32).cast(DType::Float64) + x.gt(0).cast(DType::Float64) +
                   x.argmax(0).cast(DType::Float64);
  check_same(gradient(y.sum(), {x})[0].to_vector<double>(), {2, 2});
}

TEST_CASE("a division by 0 that a slice then drops: 0 times the infinite derivative is NaN, as in PyTorch") {
  // torch: (x / b.double())[2:2].sum().backward() gives x.grad = [0, nan] for b = [True, False];
  // the loss is 0 and does not move, but the chain rule meets 0 / 0 (tests/fuzz/regressions).
  const Tensor x = vec({1.5, -2.5});
  const Tensor b = Tensor::from_vector<bool>({true, false}, {2});
  check_same(gradient((x / b.cast(DType::Float64)).slice(0, 2, 2).sum(), {x})[0].to_vector<double>(),
             {0, qnan});
}
