// DataParallel: N ranks each with batch B / N reach the parameters one process
// reaches with batch B (each rank trains that one-process reference itself, on
// the whole batch, without collectives), within a bound on float32's reordering
// derived below; under LOOM_DIST_DETERMINISTIC, bitwise equal to one process
// accumulating the ranks' micro-batches' gradients in rank order; and a captured
// step replays without building a graph.
//
// The model is linear least squares, loss = mean_i sum_j (x_i W + b - y_i)_j^2,
// so its gradient G(theta) = H theta - c is affine, with the same Hessian
// H = (2 / B) sum_i z_i z_i^T, z_i = [x_i; 1], for every output column j.
//
// Rounding. Each gradient element is (2 / B) sum_i z_ik r_ij with the residual
// r_ij = sum_k x_ik W_kj + b_j - y_ij. Whichever order a kernel sums in (B rows
// on one rank; B / N rows then a sum over ranks), the computed element is within
// gamma_m * M_kj of the exact one (Higham, Accuracy and Stability, 3.1), where
// M_kj = (2 / B) sum_i |z_ik| (sum_k' |x_ik' W_k'j| + |b_j| + |y_ij|) and m bounds
// the roundings on one path: the residual's kIn + 2, the product's 2, the B - 1
// of the row sum, one of the sum over ranks, and the scaling (exact: B and N
// are powers of two here); m = kIn + B + 8 is generous. The two runs' gradients
// at the same theta then differ by at most 2 gamma_m M.
//
// SGD, theta <- theta - lr G: the runs' difference e obeys
//   e' = (I - lr H) e + lr dG + d_round,
// and with lr = 1 / trace(H) <= 1 / lambda_max(H), I - lr H has eigenvalues in
// [0, 1): it does not grow e in the 2-norm. The update's own rounding (a
// product and a subtraction, in each run) is at most 4u (|theta| + lr |G|). So
//   ||e_T||_2 <= sum_t || lr 2 gamma_m M_t + 4u (|theta_t| + lr |G_t|) ||_2,
// summed along the reference run (the runs differ by far less than the terms).
//
// Adam, theta <- theta - lr m^/(sqrt(v^) + eps): while every gradient element
// keeps its sign over the steps (the targets here sit far above the model's
// reach, so the residuals stay negative), a relative error rho in each g_s
// moves the weighted averages m^ by at most rho |m^| and v^ by (2 rho + rho^2) v^,
// so the update u^ = m^/(sqrt(v^) + eps) by at most 3 rho |u^| (rho <= 0.1). rho_t
// is the largest dG_s / |G_s| so far, dG_s = 2 gamma_m M_s + |H| e_s (the runs'
// parameters differ too). Adam's own rounding: m's errors shrink by beta1 a step
// (<= 3u / (1 - beta1) = 30u), v's add up over at most 50 steps (<= 150u), so each
// run's u^ is within 120u of the exact one: 240u between runs, and 4u |theta| for
// the update. Elementwise,
//   e_{t+1} <= e_t + lr 3 rho_t |u^_t| + 240u lr |u^_t| + 4u |theta_t|.
#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

using namespace loom;

namespace {
constexpr int64_t kIn = 4, kOut = 3, kSteps = 50, kRowsPerRank = 4;
constexpr double kU = 0x1p-24;  // float32's unit roundoff

std::vector<float> wave(int64_t n, double a, double b, double scale = 1, double offset = 0) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(static_cast<float>(offset + scale * std::sin(a * static_cast<double>(i) + b)));
  return v;
}

struct Model {
  Tensor w, b;
  explicit Model(double shift) {  // rank 0's start at shift 0
    w = Tensor::from_vector(wave(kIn * kOut, 0.7, shift, 0.1), {kIn, kOut}).requires_grad_();
    b = Tensor::from_vector(wave(kOut, 1.9, shift + 0.3, 0.1), {kOut}).requires_grad_();
  }
  std::vector<Tensor> parameters() const { return {w, b}; }
  Tensor loss(const Tensor& x, const Tensor& y) const {
    const Tensor d = x.matmul(w) + b - y;
    return (d * d).sum(1).mean();
  }
  // w's elements then b's
  std::vector<double> values() const {
    std::vector<double> out;
    for (const Tensor& p : {w, b})
      for (const float v : p.to_vector<float>()) out.push_back(v);
    return out;
  }
};

// The whole batch: B = kRowsPerRank * N rows; x positive (1 +- 0.5), y far
// above what the model starts at (4 +- 0.3).
struct Batch {
  int64_t rows;
  std::vector<float> xs, ys;
  explicit Batch(int ranks)
      : rows(kRowsPerRank * ranks),
        xs(wave(rows * kIn, 0.37, 0.1, 0.5, 1)),
        ys(wave(rows * kOut, 0.53, 0.9, 0.3, 4)) {}
  static Tensor slice(const std::vector<float>& all, int64_t width, int64_t lo, int64_t hi) {
    return Tensor::from_vector(std::vector<float>(all.begin() + lo * width, all.begin() + hi * width),
                               {hi - lo, width});
  }
  Tensor x(int64_t lo, int64_t hi) const { return slice(xs, kIn, lo, hi); }
  Tensor y(int64_t lo, int64_t hi) const { return slice(ys, kOut, lo, hi); }
  double x_at(int64_t i, int64_t k) const { return k == kIn ? 1.0 : xs[static_cast<size_t>(i * kIn + k)]; }

  // H's 5 x 5 block (the same for every column), z = [x; 1].
  std::vector<double> hessian() const {
    std::vector<double> h((kIn + 1) * (kIn + 1), 0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t k = 0; k <= kIn; ++k)
        for (int64_t l = 0; l <= kIn; ++l)
          h[static_cast<size_t>(k * (kIn + 1) + l)] +=
              2.0 / static_cast<double>(rows) * x_at(i, k) * x_at(i, l);
    return h;
  }
  // The exact gradient G and the rounding scale M at parameters p (w's then b's),
  // both laid out as p.
  void gradient(const std::vector<double>& p, std::vector<double>& g, std::vector<double>& m) const {
    g.assign(p.size(), 0);
    m.assign(p.size(), 0);
    auto at = [&](int64_t k, int64_t j) {
      return static_cast<size_t>(k == kIn ? kIn * kOut + j : k * kOut + j);
    };
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < kOut; ++j) {
        const double y = ys[static_cast<size_t>(i * kOut + j)];
        double r = -y, mag = std::abs(y);
        for (int64_t k = 0; k <= kIn; ++k) {
          r += x_at(i, k) * p[at(k, j)];
          mag += std::abs(x_at(i, k) * p[at(k, j)]);
        }
        for (int64_t k = 0; k <= kIn; ++k) {
          g[at(k, j)] += 2.0 / static_cast<double>(rows) * x_at(i, k) * r;
          m[at(k, j)] += 2.0 / static_cast<double>(rows) * std::abs(x_at(i, k)) * mag;
        }
      }
  }
};

double gamma_m(const Batch& batch) {
  const double m = static_cast<double>(kIn + batch.rows + 8);
  return m * kU / (1 - m * kU);
}

// Trains `model` for `steps`: on the whole batch (ddp null) or on this rank's rows.
template <class Optim>
void train(Model& model, Optim& opt, const Batch& batch, dist::DataParallel* ddp, int64_t steps = kSteps) {
  const int64_t lo = ddp ? kRowsPerRank * dist::rank() : 0, hi = ddp ? lo + kRowsPerRank : batch.rows;
  const Tensor x = batch.x(lo, hi), y = batch.y(lo, hi);
  for (int64_t s = 0; s < steps; ++s) {
    opt.zero_grad();
    model.loss(x, y).backward();
    if (ddp) ddp->average_gradients();
    opt.step();
  }
}

double norm(const std::vector<double>& v) {
  double s = 0;
  for (const double x : v) s += x * x;
  return std::sqrt(s);
}

// The bucket tests' own data: a few rows, a fixed rate.
constexpr double kLr = 0.2;
Tensor rows(const std::vector<float>& all, int64_t width, int64_t lo, int64_t hi) {
  return Batch::slice(all, width, lo, hi);
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}
}  // namespace

TEST_CASE("DataParallel SGD: N ranks on B / N rows each match one process on B rows over 50 steps") {
  const int n = dist::world_size(), me = dist::rank();
  const Batch batch(n);
  const std::vector<double> h = batch.hessian();
  double trace = 0;
  for (int64_t k = 0; k <= kIn; ++k) trace += h[static_cast<size_t>(k * (kIn + 1) + k)];
  const double lr = 1 / trace;

  // The reference, and the bound summed along it.
  Model ref(0);
  optim::SGD ref_opt(ref.parameters(), lr);
  const Tensor x_all = batch.x(0, batch.rows), y_all = batch.y(0, batch.rows);
  double bound = 0;
  std::vector<double> g, m;
  for (int64_t s = 0; s < kSteps; ++s) {
    const std::vector<double> theta = ref.values();
    batch.gradient(theta, g, m);
    std::vector<double> term(theta.size());
    for (size_t i = 0; i < theta.size(); ++i)
      term[i] = lr * 2 * gamma_m(batch) * m[i] + 4 * kU * (std::abs(theta[i]) + lr * std::abs(g[i]));
    bound += norm(term);
    ref_opt.zero_grad();
    ref.loss(x_all, y_all).backward();
    ref_opt.step();
  }

  // Every rank starts elsewhere; DataParallel gives them rank 0's start.
  Model model(0.5 * me);
  dist::DataParallel ddp(model.parameters());
  CHECK(model.w.to_vector<float>() == Model(0).w.to_vector<float>());
  optim::SGD opt(model.parameters(), lr);
  train(model, opt, batch, &ddp);

  const std::vector<double> got = model.values(), want = ref.values();
  std::vector<double> diff(got.size());
  for (size_t i = 0; i < got.size(); ++i) diff[i] = got[i] - want[i];
  INFO("difference " << norm(diff) << ", bound " << bound);
  CHECK(norm(diff) <= bound);
  // The ranks agree with each other exactly: they applied the same averaged gradients.
  const Tensor w = model.w;
  CHECK(dist::all_reduce(w, dist::Op::Max).to_vector<float>() == w.to_vector<float>());
  // Training moved the parameters well beyond the bound: the comparison is not of two starting points.
  std::vector<double> moved(got.size());
  const std::vector<double> start = Model(0).values();
  for (size_t i = 0; i < got.size(); ++i) moved[i] = got[i] - start[i];
  CHECK(norm(moved) > 1000 * bound);
}

TEST_CASE("DataParallel Adam: N ranks on B / N rows each match one process on B rows over 50 steps") {
  const int n = dist::world_size();
  const Batch batch(n);
  const std::vector<double> h = batch.hessian();
  constexpr double lr = 0.005, b1 = 0.9, b2 = 0.999, eps = 1e-8;

  Model ref(0);
  optim::Adam ref_opt(ref.parameters(), lr, b1, b2, eps);
  const Tensor x_all = batch.x(0, batch.rows), y_all = batch.y(0, batch.rows);
  const size_t np = static_cast<size_t>(kIn * kOut + kOut);
  std::vector<double> e(np, 0), rho(np, 0), mom(np, 0), vel(np, 0), first_g, g, m;
  for (int64_t s = 0; s < kSteps; ++s) {
    const std::vector<double> theta = ref.values();
    batch.gradient(theta, g, m);
    if (s == 0) first_g = g;
    for (size_t i = 0; i < np; ++i) {
      // |H| e for element i (row k, column j) of the parameters.
      const int64_t k = i < static_cast<size_t>(kIn * kOut) ? static_cast<int64_t>(i) / kOut : kIn;
      const int64_t j = i < static_cast<size_t>(kIn * kOut) ? static_cast<int64_t>(i) % kOut
                                                            : static_cast<int64_t>(i) - kIn * kOut;
      double he = 0;
      for (int64_t l = 0; l <= kIn; ++l)
        he += std::abs(h[static_cast<size_t>(k * (kIn + 1) + l)]) *
              e[static_cast<size_t>(l == kIn ? kIn * kOut + j : l * kOut + j)];
      REQUIRE(g[i] * first_g[i] > 0);  // the sign the bound relies on holds
      rho[i] = std::max(rho[i], (2 * gamma_m(batch) * m[i] + he) / std::abs(g[i]));
      REQUIRE(rho[i] <= 0.1);
    }
    const double t = static_cast<double>(s + 1);
    for (size_t i = 0; i < np; ++i) {
      mom[i] = b1 * mom[i] + (1 - b1) * g[i];
      vel[i] = b2 * vel[i] + (1 - b2) * g[i] * g[i];
      const double u_hat =
          std::abs(mom[i] / (1 - std::pow(b1, t)) / (std::sqrt(vel[i] / (1 - std::pow(b2, t))) + eps));
      e[i] += lr * 3 * rho[i] * u_hat + 240 * kU * lr * u_hat + 4 * kU * std::abs(theta[i]);
    }
    ref_opt.zero_grad();
    ref.loss(x_all, y_all).backward();
    ref_opt.step();
  }

  Model model(0.5 * dist::rank());
  dist::DataParallel ddp(model.parameters());
  optim::Adam opt(model.parameters(), lr, b1, b2, eps);
  train(model, opt, batch, &ddp);
  const std::vector<double> got = model.values(), want = ref.values(), start = Model(0).values();
  for (size_t i = 0; i < np; ++i) {
    INFO("parameter " << i << ": " << got[i] << " against " << want[i] << ", bound " << e[i]);
    CHECK(std::abs(got[i] - want[i]) <= e[i]);
    CHECK(std::abs(got[i] - start[i]) > 100 * e[i]);  // it trained, far beyond the bound
  }
}

namespace {
// LOOM_DIST_DETERMINISTIC's promise (docs/distributed.md): the job's averaged
// gradient is, bit for bit, ((g_0 + g_1) + ... + g_{N-1}) / N in float32, g_r
// being rank r's own gradient of its B / N rows. One process gets those bits by
// gradient accumulation over the same N micro-batches in rank order: each
// micro-batch's gradient is the same arithmetic on the same rows (its bits are
// loom's, whichever process runs it), the sum a left fold in rank order, and the
// division the same op. This reference trains that way, without collectives:
// with `loom_adds`, as a program would (N backward() calls, each adding to the
// gradients, then the gradients divided by N); else with the fold written out here.
std::vector<double> accumulated(Model& model, optim::Optimizer& opt, const Batch& batch, bool loom_adds) {
  const int n = dist::world_size();
  for (int64_t s = 0; s < kSteps; ++s) {
    std::vector<float> gw(kIn * kOut, 0.0f), gb(kOut, 0.0f);
    opt.zero_grad();
    for (int r = 0; r < n; ++r) {
      if (!loom_adds) opt.zero_grad();
      model
          .loss(batch.x(kRowsPerRank * r, kRowsPerRank * (r + 1)),
                batch.y(kRowsPerRank * r, kRowsPerRank * (r + 1)))
          .backward();
      if (loom_adds) continue;
      const std::vector<float> w = model.w.grad().to_vector<float>(), b = model.b.grad().to_vector<float>();
      for (size_t i = 0; i < gw.size(); ++i)
        gw[i] = r == 0 ? w[i] : gw[i] + w[i];  // float32 adds, in rank order
      for (size_t i = 0; i < gb.size(); ++i) gb[i] = r == 0 ? b[i] : gb[i] + b[i];
    }
    Tensor w_grad = model.w.grad(), b_grad = model.b.grad();
    const Tensor w_sum = loom_adds ? w_grad : Tensor::from_vector(gw, {kIn, kOut});
    const Tensor b_sum = loom_adds ? b_grad : Tensor::from_vector(gb, {kOut});
    w_grad.assign(w_sum / static_cast<double>(n));  // DataParallel's mean
    b_grad.assign(b_sum / static_cast<double>(n));
    opt.step();
  }
  return model.values();
}
}  // namespace

TEST_CASE("LOOM_DIST_DETERMINISTIC: the ranks' gradients summed in rank order, the same bits every run") {
  const Batch batch(dist::world_size());
  Context deterministic{{"DIST_DETERMINISTIC", true}};
  constexpr int64_t steps = 10;  // bits either agree or not; the sanitizer pass pays per step
  auto run = [&] {
    Model model(0);
    dist::DataParallel ddp(model.parameters());
    optim::SGD opt(model.parameters(), 0.05);
    train(model, opt, batch, &ddp, steps);
    return model.values();
  };
  const std::vector<double> first = run(), second = run();
  CHECK(same_bits(first, second));
  // Every rank holds the same bits.
  const Tensor bits = Tensor::from_vector(first, {static_cast<int64_t>(first.size())});
  CHECK(same_bits(dist::all_reduce(bits, dist::Op::Max).to_vector<double>(), first));
}

TEST_CASE(
    "LOOM_DIST_DETERMINISTIC: 50 steps of SGD and of Adam, bit for bit one process accumulating the N "
    "micro-batches") {
  const Batch batch(dist::world_size());
  Context deterministic{{"DIST_DETERMINISTIC", true}};
  const std::vector<double> start = Model(0).values();
  for (const bool adam : {false, true}) {
    CAPTURE(adam);
    auto optimizer = [adam](const Model& m) -> std::unique_ptr<optim::Optimizer> {
      if (adam) return std::make_unique<optim::Adam>(m.parameters(), 0.005);
      return std::make_unique<optim::SGD>(m.parameters(), 0.05);
    };
    Model model(0.5 * dist::rank()), folded(0), added(0);
    dist::DataParallel ddp(model.parameters());
    const auto opt = optimizer(model), folded_opt = optimizer(folded), added_opt = optimizer(added);
    train(model, *opt, batch, &ddp);
    const std::vector<double> got = model.values();
    CHECK(same_bits(got, accumulated(folded, *folded_opt, batch, false)));
    CHECK(same_bits(got, accumulated(added, *added_opt, batch, true)));
    CHECK(got != start);
  }
}

namespace {
// Rank r's element e: 1 where e % 3 == r % 3, else t = 2^-24, whose sums depend on
// the order of the adds from three ranks on: 1 + t is a tie that rounds to 1, while
// t + t is exact, so ((1 + t) + t) = 1 but 1 + (t + t) = 1 + 2^-23. At 3 ranks the
// three elements of a period tell the three pairings apart (the left fold gives
// 1, 1, 1 + 2^-23). The long tensor has Open MPI reduce in pieces, by other
// algorithms (a ring's pieces start at different ranks).
std::vector<float> order_sensitive(int rank, int64_t count) {
  std::vector<float> v;
  for (int64_t e = 0; e < count; ++e) v.push_back(e % 3 == rank % 3 ? 1.0f : 0x1p-24f);
  return v;
}
}  // namespace

TEST_CASE("LOOM_DIST_DETERMINISTIC: sums are a left fold in rank order, on every rank") {
  const int n = dist::world_size(), me = dist::rank();
  Context deterministic{{"DIST_DETERMINISTIC", true}};
  for (const int64_t count : {int64_t{3}, int64_t{3 * 40000}}) {
    CAPTURE(count);
    // ((v_0 + v_1) + v_2) + ... in float32, as every rank must get it.
    std::vector<float> want = order_sensitive(0, count);
    for (int r = 1; r < n; ++r) {
      const std::vector<float> v = order_sensitive(r, count);
      for (size_t i = 0; i < want.size(); ++i) want[i] += v[i];
    }
    const Tensor x = Tensor::from_vector(order_sensitive(me, count), {count});
    CHECK(dist::all_reduce(x, dist::Op::Sum).to_vector<float>() == want);
    std::vector<float> mean = want;
    for (float& v : mean) v /= static_cast<float>(n);
    CHECK(dist::all_reduce(x, dist::Op::Mean).to_vector<float>() == mean);
    // reduce_scatter: rank r gets column r of the fold of [count, n] tensors whose
    // columns each hold this rank's values; broadcast's gradient (a reduce to the
    // root) folds the same way.
    const Tensor columns = x.reshape({count, 1}).expand({count, n}).contiguous();
    CHECK(dist::reduce_scatter(columns, 1).to_vector<float>() == want);
    const Tensor leaf = Tensor::zeros({count}).requires_grad_();
    (dist::broadcast(leaf, 0) * x).sum().backward();
    CHECK(leaf.grad().to_vector<float>() ==
          (me == 0 ? want : std::vector<float>(static_cast<size_t>(count), 0)));
  }
}

TEST_CASE("A captured DataParallel step replays with no graph built and equals the uncaptured step") {
  const Batch batch(dist::world_size());
  const int64_t lo = kRowsPerRank * dist::rank();
  const Tensor x = batch.x(lo, lo + kRowsPerRank), y = batch.y(lo, lo + kRowsPerRank);

  Model plain(0), captured(0);
  dist::DataParallel plain_ddp(plain.parameters()), captured_ddp(captured.parameters());
  optim::Adam plain_opt(plain.parameters(), 0.01), captured_opt(captured.parameters(), 0.01);
  Capture step([&](const std::vector<Tensor>& a) {
    captured_opt.zero_grad();
    Tensor loss = captured.loss(a[0], a[1]);
    loss.backward();
    captured_ddp.average_gradients();
    captured_opt.step();
    return std::vector<Tensor>{loss};
  });
  for (int call = 0; call < 5; ++call) {
    plain_opt.zero_grad();
    Tensor plain_loss = plain.loss(x, y);
    plain_loss.backward();
    plain_ddp.average_gradients();
    plain_opt.step();

    const uint64_t built = counters().schedules_built;
    const float loss = step({x, y})[0].item<float>();
    if (call >= 2) {
      CHECK(step.captured({x, y}));
      CHECK(counters().schedules_built == built);  // a replay: no graph scheduled
    }
    CHECK(loss == plain_loss.item<float>());
    CHECK(same_bits(captured.values(), plain.values()));
  }
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
