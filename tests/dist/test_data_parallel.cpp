// DataParallel: N ranks each with batch B / N reach the parameters one process
// reaches with batch B, within float32's reordering bound (the mean over the
// batch is summed in another order). Each rank also trains the one-process
// reference itself, on the whole batch, without collectives.
#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <utility>
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
    model.loss(x, y).backward();  // averages the gradients across ranks
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

TEST_CASE("backward() gives a DataParallel's parameters the mean of the ranks' gradients") {
  const int n = dist::world_size(), me = dist::rank();
  Tensor w = Tensor::from_vector<float>({1, 2, 3}, {3}).requires_grad_();
  Tensor v = Tensor::from_vector<float>({4, 5}, {2}).requires_grad_();
  Tensor u = Tensor::from_vector<float>({6}, {1}).requires_grad_();  // not the DataParallel's
  const dist::DataParallel ddp({w, v}, 12);                          // buckets {v}, {w}
  CHECK(ddp.buckets() == std::vector<std::vector<size_t>>{{1}, {0}});
  // Rank r's loss: (r + 1) * sum(w) + c_r * sum(v) with c_0 = 5, else 0, + (r + 1) * sum(u).
  // (Every rank builds the same graph, as DataParallel asks; only the data differ.)
  const Tensor a = Tensor::from_vector<float>({static_cast<float>(me + 1)}, {1});
  const Tensor c = Tensor::from_vector<float>({me == 0 ? 5.0f : 0.0f}, {1});
  const Tensor loss = (w * a).sum() + (v * c).sum() + (u * a).sum();
  loss.backward();
  ddp.average_gradients();                           // a no-op now: no second averaging
  const float mean = static_cast<float>(n + 1) / 2;  // of 1 .. n
  CHECK(w.grad().to_vector<float>() == std::vector<float>{mean, mean, mean});
  CHECK(v.grad().to_vector<float>() == std::vector<float>{5.0f / n, 5.0f / n});
  CHECK(u.grad().to_vector<float>() == std::vector<float>{static_cast<float>(me + 1)});
  // A second backward accumulates the mean of the second gradients; v gets none on any
  // rank, so its bucket carries zeros and its gradient stays.
  (w * 2.0f).sum().backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{mean + 2, mean + 2, mean + 2});
  CHECK(v.grad().to_vector<float>() == std::vector<float>{5.0f / n, 5.0f / n});
}

TEST_CASE("DataParallel: buckets of any size train to the same parameters as one bucket") {
  const int me = dist::rank();
  const std::vector<float> xs = wave(4 * kIn, 0.29, me), ys = wave(4 * kOut, 0.41, 0.2 + me);
  const Tensor x = rows(xs, kIn, 0, 4), y = rows(ys, kOut, 0, 4);
  auto train = [&](int64_t bucket_bytes) {
    Model model(0);
    const dist::DataParallel ddp({model.w, model.b}, bucket_bytes);
    optim::SGD opt({model.w, model.b}, kLr);
    for (int64_t s = 0; s < kSteps; ++s) {
      opt.zero_grad();
      model.loss(x, y).backward();
      opt.step();
    }
    return std::pair{model.w.to_vector<float>(), model.b.to_vector<float>()};
  };
  const auto one = train(INT64_MAX);  // [b, w] in one all-reduce
  const auto each = train(1);         // b, then w
  // The same gradients summed in the same order, whichever buffer carries them: equal bits.
  CHECK(each.first == one.first);
  CHECK(each.second == one.second);
  CHECK(one.first != Model(0).w.to_vector<float>());
}

TEST_CASE("a captured DataParallel step replays with no graph built and the uncaptured step's values") {
  const int me = dist::rank();
  const std::vector<float> xs = wave(4 * kIn, 0.31, me), ys = wave(4 * kOut, 0.47, 1 + me);
  const Tensor x = rows(xs, kIn, 0, 4), y = rows(ys, kOut, 0, 4);
  Model plain(0), captured(0);
  const dist::DataParallel ddp_plain({plain.w, plain.b}, 1), ddp_captured({captured.w, captured.b}, 1);
  optim::SGD opt_plain({plain.w, plain.b}, kLr), opt_captured({captured.w, captured.b}, kLr);
  Capture step([&](const std::vector<Tensor>& a) {
    opt_captured.zero_grad();
    Tensor loss = captured.loss(a[0], a[1]);
    loss.backward();
    opt_captured.step();
    return std::vector<Tensor>{loss};
  });
  for (int64_t s = 0; s < kSteps; ++s) {
    opt_plain.zero_grad();
    Tensor loss = plain.loss(x, y);
    loss.backward();
    opt_plain.step();
    const uint64_t built = counters().schedules_built;
    const Tensor replayed = step({x, y})[0];
    if (s >= 2) {
      CHECK(step.captured({x, y}));
      CHECK(counters().schedules_built == built);
    }
    CHECK(replayed.to_vector<float>() == loss.to_vector<float>());
    CHECK(captured.w.to_vector<float>() == plain.w.to_vector<float>());
    CHECK(captured.b.to_vector<float>() == plain.b.to_vector<float>());
  }
}
