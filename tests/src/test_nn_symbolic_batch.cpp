// Convolutional layers over a symbolic batch (docs/symbolic.md): conv2d (plain, strided,
// transposed), pooling, batch norm and dropout take [B=n, C, H, W] and compile once for
// every n, with the values of the same layers over n rows in numbers.
#include "tests/src/check.hpp"

#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <functional>

using namespace loom;
using loom::test::check_ref;
using loom::test::values;

namespace {

// Small values of this shape that do not repeat along any axis.
Tensor pattern(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (const int64_t d : shape) count *= d;
  std::vector<float> v(static_cast<size_t>(count));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37 + 11) % 23) / 23.0f - 0.4f;
  return Tensor::from_vector(v, shape);
}

// The reference interpreter's values of `t` (independent of schedule and codegen), and t's,
// equal within float32 rounding of sums that partly cancel (doctest's Approx is relative
// to the larger of 1 and the values).
std::vector<double> check_reference(const Tensor& t) {
  const auto want = loom::test::reference(t);
  std::vector<double> got = values(t);
  REQUIRE(static_cast<int64_t>(got.size()) == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK(got[i] == doctest::Approx(want.at(static_cast<int64_t>(i))).epsilon(1e-5));
  return got;
}

// The layer's output and the gradients of its input and parameters, over the first n rows of
// x taken as `size` (a number or a bound variable): each a vector of values, the output's
// checked against the reference interpreter.
std::vector<std::vector<double>> run(const std::function<Tensor(const Tensor&)>& layer, const Tensor& x,
                                     std::vector<Tensor> params, const Dim& size) {
  // The leaf is all of x: a leaf is realized, and a realized result of symbolic shape would
  // come back in numbers (docs/symbolic.md); its gradient is zero past the batch.
  Tensor whole = x.detach().requires_grad_();
  for (Tensor& p : params) p.zero_grad();
  const Tensor y = layer(whole.slice(0, 0, size));
  // A weighted sum, so that every output element's gradient differs: weights for every row of
  // x, cut to the batch as x was.
  std::vector<int64_t> all{x.shape()[0]};
  for (size_t a = 1; a < y.shape().size(); ++a) all.push_back(y.shape()[a]);
  const Tensor weights = pattern(all).slice(0, 0, size) * 3 - 0.5;
  (y * weights).sum().backward();
  std::vector<std::vector<double>> out{check_reference(y), values(whole.grad())};
  for (const Tensor& p : params) out.push_back(values(p.grad()));
  return out;
}

void check_close(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    REQUIRE(got[i].size() == want[i].size());
    for (size_t j = 0; j < got[i].size(); ++j) CHECK(got[i][j] == doctest::Approx(want[i][j]).epsilon(1e-4));
  }
}

// The layer over B=n rows for each n, against the same layer over n rows in numbers; after
// the first n, the symbolic runs schedule and compile nothing.
void check_layer(const std::function<Tensor(const Tensor&)>& layer, const Tensor& x,
                 const std::vector<Tensor>& params) {
  const Variable b("B", 1, x.shape()[0]);
  bool first = true;
  for (const int64_t n : {5, 2, 8, 5}) {
    CAPTURE(n);
    const auto want = run(layer, x, params, n);
    const auto before = counters();
    check_close(run(layer, x, params, b.bind(n)), want);
    if (!first) {
      CHECK(counters().schedule_cache_misses == before.schedule_cache_misses);
      CHECK(counters().kernels_compiled + counters().kernels_loaded ==
            before.kernels_compiled + before.kernels_loaded);
    }
    first = false;
  }
}

}  // namespace
TEST_CASE("symbolic batch: conv2d, strided and transposed, with bias, over B rows") {
  manual_seed(3);
  const Tensor x = pattern({8, 3, 9, 9});
  nn::Conv2d plain(3, 4, 3, 1, 1), strided(3, 4, 3, 2, 1), grouped(3, 6, 3, 1, 0, 1, 3);
  nn::ConvTranspose2d transposed(3, 2, 3, 2, 1);
  check_layer([&](const Tensor& t) { return plain(t); }, x, plain.parameters());
  check_layer([&](const Tensor& t) { return strided(t); }, x, strided.parameters());
  check_layer([&](const Tensor& t) { return grouped(t); }, x, grouped.parameters());
  check_layer([&](const Tensor& t) { return transposed(t); }, x, transposed.parameters());
}

TEST_CASE("symbolic batch: max and average pools over B rows") {
  const Tensor x = pattern({8, 2, 8, 8});
  check_layer([](const Tensor& t) { return nn::functional::max_pool2d(t, {2, 2}); }, x, {});
  check_layer([](const Tensor& t) { return nn::functional::max_pool2d(t, {3, 3}, {2, 2}, {1, 1}); }, x, {});
  check_layer([](const Tensor& t) { return nn::functional::avg_pool2d(t, {2, 2}); }, x, {});
  check_layer([](const Tensor& t) { return nn::functional::adaptive_avg_pool2d(t, {3, 3}); }, x, {});
}

TEST_CASE("symbolic batch: batch norm in training divides by the batch's count, running stats included") {
  const Tensor x = pattern({8, 3, 5, 5});
  nn::BatchNorm2d norm(3);
  // Each run updates the running statistics: the numeric and the symbolic run of one n
  // start from the same ones and must leave the same ones.
  const Variable b("B", 1, 8);
  for (const int64_t n : {5, 2, 8}) {
    CAPTURE(n);
    const std::vector<Tensor> stats{(norm.running_mean * 1).realize(), (norm.running_var * 1).realize()};
    const auto want = run([&](const Tensor& t) { return norm(t); }, x, norm.parameters(), n);
    const std::vector<double> mean = values(norm.running_mean), var = values(norm.running_var);
    norm.running_mean.assign(stats[0]);
    norm.running_var.assign(stats[1]);
    check_close(run([&](const Tensor& t) { return norm(t); }, x, norm.parameters(), b.bind(n)), want);
    check_close({values(norm.running_mean), values(norm.running_var)}, {mean, var});
  }
  // The functional form, without running statistics.
  check_layer([](const Tensor& t) { return nn::functional::batch_norm(t, {}, {}, {}, {}, true); }, x, {});
}

TEST_CASE("symbolic batch: dropout draws the numbers a batch of n rows in numbers draws") {
  const Tensor x = pattern({8, 4, 3, 3});
  const Variable b("B", 1, 8);
  for (const int64_t n : {5, 8, 1}) {
    CAPTURE(n);
    manual_seed(11);
    const std::vector<double> want = values(nn::functional::dropout(x.slice(0, 0, n), 0.5, true));
    manual_seed(11);
    const std::vector<double> got = check_ref(nn::functional::dropout(x.slice(0, 0, b.bind(n)), 0.5, true));
    CHECK(got == want);
    // The generator moved past the same numbers: the next draw agrees too.
    const std::vector<double> after = values(Tensor::rand({4}));
    manual_seed(11);
    (void)values(nn::functional::dropout(x.slice(0, 0, n), 0.5, true));
    CHECK(values(Tensor::rand({4})) == after);
  }
}
