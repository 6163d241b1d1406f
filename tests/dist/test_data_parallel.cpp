// DataParallel: N ranks each with batch B / N reach the parameters one process
// reaches with batch B, within float32's reordering bound (the mean over the
// batch is summed in another order). Each rank also trains the one-process
// reference itself, on the whole batch, without collectives.
#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

using namespace loom;

namespace {
constexpr int64_t kIn = 4, kOut = 3, kSteps = 5;
constexpr double kLr = 0.2;

std::vector<float> wave(int64_t n, double a, double b) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<float>(std::sin(a * static_cast<double>(i) + b)));
  return v;
}

struct Model {
  Tensor w, b;
  Model(double shift) {  // rank 0's start at shift 0
    w = Tensor::from_vector(wave(kIn * kOut, 0.7, shift), {kIn, kOut}).requires_grad_();
    b = Tensor::from_vector(wave(kOut, 1.9, shift + 0.3), {kOut}).requires_grad_();
  }
  Tensor loss(const Tensor& x, const Tensor& y) const {
    const Tensor d = (x.matmul(w) + b).tanh() - y;
    return (d * d).sum(1).mean();
  }
};

// rows [lo, hi) of the whole batch
Tensor rows(const std::vector<float>& all, int64_t width, int64_t lo, int64_t hi) {
  return Tensor::from_vector(std::vector<float>(all.begin() + lo * width, all.begin() + hi * width),
                             {hi - lo, width});
}
}  // namespace

TEST_CASE("DataParallel: N ranks on B / N rows each match one process on B rows after SGD steps") {
  const int n = dist::world_size(), me = dist::rank();
  const int64_t batch = 4 * n;
  const std::vector<float> xs = wave(batch * kIn, 0.37, 0.1), ys = wave(batch * kOut, 0.53, 0.9);

  // One process, the whole batch, from rank 0's start.
  Model ref(0);
  optim::SGD ref_opt({ref.w, ref.b}, kLr);
  const Tensor x_all = rows(xs, kIn, 0, batch), y_all = rows(ys, kOut, 0, batch);
  for (int64_t s = 0; s < kSteps; ++s) {
    ref_opt.zero_grad();
    ref.loss(x_all, y_all).backward();
    ref_opt.step();
  }

  // Every rank starts elsewhere; DataParallel gives them rank 0's start.
  Model model(0.5 * me);
  dist::DataParallel ddp({model.w, model.b});
  CHECK(model.w.to_vector<float>() == Model(0).w.to_vector<float>());
  optim::SGD opt({model.w, model.b}, kLr);
  const Tensor x = rows(xs, kIn, 4 * me, 4 * me + 4), y = rows(ys, kOut, 4 * me, 4 * me + 4);
  for (int64_t s = 0; s < kSteps; ++s) {
    opt.zero_grad();
    model.loss(x, y).backward();
    ddp.average_gradients();
    opt.step();
  }

  // Each step's gradient is a sum of `batch` terms in another order: a few float32
  // ulps of the largest term per step, carried through kSteps steps.
  const double bound = 8 * kSteps * batch * std::ldexp(1.0, -24);
  for (const auto& [got, want] : {std::pair{model.w, ref.w}, std::pair{model.b, ref.b}}) {
    const auto g = got.to_vector<float>(), r = want.to_vector<float>();
    REQUIRE(g.size() == r.size());
    for (size_t i = 0; i < g.size(); ++i)
      CHECK(std::abs(g[i] - r[i]) <= bound * std::max(1.0f, std::abs(r[i])));
  }
  // And the ranks agree with each other exactly: they applied the same averaged gradients.
  const Tensor w = model.w;
  CHECK(dist::all_reduce(w, dist::Op::Max).to_vector<float>() == w.to_vector<float>());
  // Training moved the parameters: the comparison is not of two starting points.
  CHECK(model.w.to_vector<float>() != Model(0).w.to_vector<float>());
}
