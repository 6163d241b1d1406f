// Fits a cubic to noisy samples by gradient descent and compares the fit with
// the exact least-squares optimum (float64 normal equations on the host).
//   polyfit [steps] [points]     (defaults 600, 100)
//
// y = 15 - 2.1 x + 13.9 x^2 + 1.5 x^3 at x uniform on [-5, 5], plus noise of
// 20 % of the mean |y|. The raw powers of x span 1 to 125, which leaves plain
// gradient descent crawling along the intercept (an lr small enough for x^3 is
// far too small for 1); the model uses the powers of u = x / 5 instead and
// Adam, and reports the weights back in powers of x.
#include "host_random.hpp"

#include <loom/loom.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr std::array<double, 4> target{15, -2.1, 13.9, 1.5};
constexpr double x_scale = 5;

double cubic(const std::array<double, 4>& w, double x) { return w[0] + x * (w[1] + x * (w[2] + x * w[3])); }

struct Samples {
  std::vector<double> x, y;
};

Samples make_samples(int n, uint64_t seed) {
  examples::HostRandom rng(seed);
  Samples s;
  double mean_abs = 0;
  for (int i = 0; i < n; ++i) {
    s.x.push_back((rng.uniform() - 0.5) * 10);
    s.y.push_back(cubic(target, s.x.back()));
    mean_abs += std::abs(s.y.back()) / n;
  }
  for (double& y : s.y) y += rng.normal() * mean_abs * 0.2;
  return s;
}

double mse_of(const std::array<double, 4>& w, const Samples& s) {
  double sum = 0;
  for (size_t i = 0; i < s.x.size(); ++i) sum += std::pow(cubic(w, s.x[i]) - s.y[i], 2);
  return sum / static_cast<double>(s.x.size());
}

// The least-squares weights: the normal equations in the scaled powers, solved
// by Gaussian elimination with partial pivoting, in float64.
std::array<double, 4> least_squares(const Samples& s) {
  double a[4][5] = {};
  for (size_t i = 0; i < s.x.size(); ++i) {
    double p[4] = {1, s.x[i] / x_scale, 0, 0};
    for (int k = 2; k < 4; ++k) p[k] = p[k - 1] * p[1];
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 4; ++c) a[r][c] += p[r] * p[c];
      a[r][4] += p[r] * s.y[i];
    }
  }
  for (int c = 0; c < 4; ++c) {
    int pivot = c;
    for (int r = c + 1; r < 4; ++r)
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    std::swap(a[c], a[pivot]);
    for (int r = 0; r < 4; ++r)
      if (r != c) {
        const double f = a[r][c] / a[c][c];
        for (int k = c; k < 5; ++k) a[r][k] -= f * a[c][k];
      }
  }
  std::array<double, 4> w{};
  for (int k = 0; k < 4; ++k) w[k] = a[k][4] / a[k][k] / std::pow(x_scale, k);
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace loom;
  const int steps = argc > 1 ? std::stoi(argv[1]) : 600;
  const int n = argc > 2 ? std::stoi(argv[2]) : 100;
  const Samples s = make_samples(n, 7);
  const std::vector<float> xs(s.x.begin(), s.x.end()), ys(s.y.begin(), s.y.end());
  const Tensor x = Tensor::from_vector(xs, {n}), y = Tensor::from_vector(ys, {n});

  // Features [n, 4]: 1, u, u^2, u^3 with u = x / 5 (pow of a negative base, integer exponents).
  const Tensor u = x / static_cast<float>(x_scale);
  const Tensor features = stack({u.pow(0), u, u.pow(2), u.pow(3)}, 1).realize();
  Tensor coef = Tensor::zeros({4}).requires_grad_();
  optim::Adam opt({coef}, 5.0);
  fmt::print("polyfit: {} points, cubic in u = x/{}, Adam lr {}, {} steps\n", n, x_scale, opt.lr(), steps);
  for (int step = 1; step <= steps; ++step) {
    opt.zero_grad();
    Tensor loss = nn::mse(features.matmul(coef), y);
    loss.backward();
    opt.step();
    if (step % 100 == 0 || step == 1) fmt::print("step {:4d}  mse {:.3f}\n", step, loss.item<float>());
  }

  const auto c = coef.to_vector<float>();
  std::array<double, 4> fitted{};
  for (int k = 0; k < 4; ++k) fitted[k] = c[k] / std::pow(x_scale, k);
  const std::array<double, 4> best = least_squares(s);
  const double mse = mse_of(fitted, s), optimum = mse_of(best, s);
  fmt::print("fitted weights        {::.4f}\nleast-squares weights {::.4f}\ntarget weights        {}\n",
             fitted, best, target);
  fmt::print("mse {:.4f}, least-squares optimum {:.4f} (ratio {:.6f})\n", mse, optimum, mse / optimum);
  if (!(mse <= 1.01 * optimum)) {
    fmt::print(stderr, "polyfit: the fit's mse is more than 1% above the optimum\n");
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
