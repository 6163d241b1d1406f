#pragma once
// Gradient checks: loom's symbolic gradient against central finite differences
// in Float64, on random inputs. The function's output is weighted by random
// numbers and summed, so every output element's gradient is checked.
#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace loom::test {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Input {
  Shape shape;
  double lo = -2, hi = 2;  // uniform on [lo, hi]
  double avoid = -1;       // if >= 0: redraw values within `avoid` of an integer multiple of `period`
  double period = 1;
  std::vector<double> values;  // given values instead of random ones
};

inline int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline std::vector<double> draw(const Input& in, std::mt19937_64& rng) {
  if (!in.values.empty()) return in.values;
  std::uniform_real_distribution<double> u(in.lo, in.hi);
  std::vector<double> v;
  for (int64_t i = 0; i < numel_of(in.shape); ++i) {
    double x = u(rng);
    while (in.avoid >= 0 && std::abs(x / in.period - std::round(x / in.period)) * in.period < in.avoid)
      x = u(rng);
    v.push_back(x);
  }
  return v;
}

inline std::vector<Tensor> tensors_of(const std::vector<std::vector<double>>& xs,
                                      const std::vector<Input>& inputs) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < xs.size(); ++i) out.push_back(Tensor::from_vector<double>(xs[i], inputs[i].shape));
  return out;
}

// sum(f(xs) * w) for fixed weights w.
inline double weighted(const Fn& f, const std::vector<Tensor>& xs, const Tensor& w) {
  return (f(xs).cast(DType::Float64) * w).sum().item<double>();
}

// Checks loom::gradient of sum(f(xs) * w) with respect to each input against central
// differences: |g - fd| <= 1e-6 * max(1, |fd|).
inline void gradcheck(const Fn& f, const std::vector<Input>& inputs, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<double>> xs;
  for (const Input& in : inputs) xs.push_back(draw(in, rng));
  std::vector<Tensor> leaves = tensors_of(xs, inputs);
  for (Tensor& x : leaves) x.requires_grad_();  // so a tensor realized inside f keeps its graph
  const Tensor out = f(leaves);
  std::normal_distribution<double> normal;
  std::vector<double> wv;
  for (int64_t i = 0; i < out.numel(); ++i) wv.push_back(normal(rng));
  const Tensor w = Tensor::from_vector<double>(wv, out.shape());
  const std::vector<Tensor> grads = gradient((out.cast(DType::Float64) * w).sum(), leaves);
  REQUIRE(grads.size() == inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    REQUIRE(grads[i].shape() == inputs[i].shape);
    const std::vector<double> g = grads[i].to_vector<double>();
    for (size_t j = 0; j < xs[i].size(); ++j) {
      const double h = 1e-5 * std::max(1.0, std::abs(xs[i][j]));
      const double up = xs[i][j] + h, down = xs[i][j] - h;
      auto at = [&](double x) {
        auto moved = xs;
        moved[i][j] = x;
        return weighted(f, tensors_of(moved, inputs), w);
      };
      const double fd = (at(up) - at(down)) / (up - down);
      INFO("input ", i, " element ", j, " at ", xs[i][j], ": gradient ", g[j], ", finite difference ", fd);
      CHECK(std::abs(g[j] - fd) <= 1e-6 * std::max(1.0, std::abs(fd)));
    }
  }
}

// One input.
inline void gradcheck1(const std::function<Tensor(const Tensor&)>& f, Input in, uint64_t seed = 1) {
  gradcheck([&](const std::vector<Tensor>& x) { return f(x[0]); }, {std::move(in)}, seed);
}

}  // namespace loom::test
