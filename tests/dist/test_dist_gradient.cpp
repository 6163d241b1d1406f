// Gradients through collectives, by central finite differences across ranks:
// the loss is the sum over ranks of each rank's sum(w_r * f(x_r)), whose
// gradient every rank gets for its own x from loom::gradient of its local part
// (the collective's rule carries the other ranks' contributions). Each
// difference perturbs one element on one rank; every rank evaluates the loss.
#include "src/data_parallel.hpp"

#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

using namespace loom;

namespace {
using Fn = std::function<Tensor(const Tensor&)>;

// This rank's weights and values, distinct across ranks (so max has no ties).
std::vector<double> weights(int64_t n) {
  std::vector<double> w;
  for (int64_t i = 0; i < n; ++i) w.push_back(1 + 0.25 * dist::rank() - 0.125 * static_cast<double>(i));
  return w;
}
std::vector<double> point(int64_t n) {
  std::vector<double> x;
  for (int64_t i = 0; i < n; ++i)
    x.push_back(0.5 + 0.3 * dist::rank() + 0.7 * std::sin(1.3 * static_cast<double>(i)));
  return x;
}

Tensor local_loss(const Fn& f, const Tensor& x, const Tensor& w) { return (f(x) * w).sum(); }

double total_loss(const Fn& f, const std::vector<double>& x, const Tensor& w, const Shape& shape) {
  return dist::all_reduce(local_loss(f, Tensor::from_vector(x, shape), w)).item<double>();
}

// f maps x of `shape` to a tensor of `out` (by default `shape`).
void check_gradient(const Fn& f, const Shape& shape, Shape out = {}) {
  if (out.empty()) out = shape;
  int64_t n = 1, m = 1;
  for (int64_t d : shape) n *= d;
  for (int64_t d : out) m *= d;
  const Tensor w = Tensor::from_vector(weights(m), out);
  const std::vector<double> x0 = point(n);
  const Tensor x = Tensor::from_vector(x0, shape);
  const std::vector<double> g = gradient(local_loss(f, x, w), {x})[0].to_vector<double>();
  REQUIRE(static_cast<int64_t>(g.size()) == n);
  const double h = 1e-6;
  for (int q = 0; q < dist::world_size(); ++q)
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> plus = x0, minus = x0;
      if (dist::rank() == q) plus[i] += h, minus[i] -= h;
      const double fd = (total_loss(f, plus, w, shape) - total_loss(f, minus, w, shape)) / (2 * h);
      if (dist::rank() != q) continue;
      CAPTURE(q);
      CAPTURE(i);
      CHECK(std::abs(g[i] - fd) <= 1e-6 * std::max(1.0, std::abs(fd)));
    }
}
}  // namespace

TEST_CASE("the gradient of all_reduce(sum) is all_reduce(sum) of the upstream gradient") {
  check_gradient([](const Tensor& x) { return dist::all_reduce(x * x, dist::Op::Sum).sin(); }, {2, 3});
}

TEST_CASE("the gradient of all_reduce(mean) and all_reduce(max)") {
  check_gradient([](const Tensor& x) { return dist::all_reduce(x * x, dist::Op::Mean) * x; }, {4});
  check_gradient([](const Tensor& x) { return dist::all_reduce(x.exp(), dist::Op::Max) * x; }, {3});
}

TEST_CASE("the gradient of a bucket: each part gets its slot of the mean's gradient") {
  // DataParallel's bucket (src/data_parallel.hpp): parts of 2 and 5 Float64 elements,
  // in slots of 8 (64 bytes); the gaps hold zeros, so their weights add nothing.
  check_gradient(
      [](const Tensor& x) {
        return detail::all_reduce_mean_bucket({x.slice(0, 0, 2).sin(), (x * x).reshape({5, 1})});
      },
      {5}, {16});
}

TEST_CASE("the gradient of broadcast is a sum at the root") {
  const int last = dist::world_size() - 1;
  check_gradient([last](const Tensor& x) { return dist::broadcast(x * x, last) * x; }, {5});
  check_gradient([](const Tensor& x) { return dist::broadcast(x.exp(), 0); }, {1});
}

TEST_CASE("the gradients of all_gather and reduce_scatter are each other") {
  const int n = dist::world_size();
  check_gradient([](const Tensor& x) { return dist::all_gather(x * x, 1).sin(); }, {2, 3}, {2, 3 * n});
  check_gradient([](const Tensor& x) { return dist::reduce_scatter(x.exp(), 0) * 1.5; }, {2 * n, 2}, {2, 2});
  check_gradient([](const Tensor& x) { return dist::reduce_scatter(dist::all_gather(x, 0) * 2.0, 0); }, {3});
}

TEST_CASE("gradients through collectives of sizes 1 and 0, and along a 3-d tensor's middle dim") {
  const int n = dist::world_size();
  check_gradient([](const Tensor& x) { return dist::all_reduce(x * x, dist::Op::Sum) * x; }, {});
  check_gradient([](const Tensor& x) { return dist::all_reduce(x.exp(), dist::Op::Mean); }, {1});
  check_gradient([](const Tensor& x) { return dist::all_gather(x.sin(), 1) * 2.0; }, {2, 2, 3},
                 {2, 2 * n, 3});
  check_gradient([](const Tensor& x) { return dist::reduce_scatter(x * x, 1); }, {2, n, 3}, {2, 1, 3});
  check_gradient([](const Tensor& x) { return dist::all_gather(x, 0).exp(); }, {1}, {n});
  // Size 0: the gradient has x's shape and nothing in it (every rank runs the collectives).
  for (int64_t dim : {0, 1}) {
    const Tensor x = Tensor::from_vector(std::vector<double>{}, {0, n});
    const Tensor y = dim == 0 ? dist::all_gather(x, 0) : dist::reduce_scatter(x, 1);
    const Tensor g = gradient((dist::all_reduce(y) * 3.0).sum(), {x})[0];
    CHECK(g.shape() == Shape{0, n});
    CHECK(g.to_vector<double>().empty());
  }
}

TEST_CASE("the gradient of all_reduce(max) at a tie goes to every tying rank") {
  // Every rank holds the same x: each gets the whole sum over ranks of the upstream
  // gradient w_r, (sum_r 1 + r / 4 - i / 8) = n (1 - i / 8) + n (n - 1) / 8.
  const int n = dist::world_size();
  const Tensor x = Tensor::from_vector(std::vector<double>{0.5, -1.0, 2.0}, {3});
  const Tensor w = Tensor::from_vector(weights(3), {3});
  const std::vector<double> g =
      gradient((dist::all_reduce(x, dist::Op::Max) * w).sum(), {x})[0].to_vector<double>();
  REQUIRE(g.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(g[static_cast<size_t>(i)] == n * (1 - i / 8.0) + n * (n - 1) / 8.0);
}
