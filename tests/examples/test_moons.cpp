// The moons training loop, inspected: one schedule per step, and a long run
// whose live counts and kernel cache stay flat whatever the loop prints and
// whenever the learning rate changes.
#include "moons.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <memory>

using namespace loom;

namespace {

struct Live {
  uint64_t uops, buffers, cached_kernels;
  friend bool operator==(const Live&, const Live&) = default;
};
Live live() {
  const Counters c = counters();
  return {c.live_uops, c.live_buffers, c.kernel_cache_entries};
}

// Realizes run so far: each one schedules its graph or replays a cached plan.
uint64_t realizes(const Counters& c) { return c.schedule_cache_hits + c.schedule_cache_misses; }

// Kernels made so far, compiled or loaded from the disk cache (LOOM_CACHE_DIR).
uint64_t kernels_made() {
  const Counters c = counters();
  return c.kernels_compiled + c.kernels_loaded;
}

enum class Print { BeforeBackward, AfterStep };

struct Run {
  Live at_500{}, at_end{};
  uint64_t compiled_after_2 = 0, compiled_at_end = 0;
  double accuracy = 0;
};

// Trains the moons MLP for `steps`, reading the loss at step 1 and every 20th;
// when `lr_change` > 0 the learning rate halves from that step on.
Run train(const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make_opt, int steps,
          Print print, int lr_change) {
  manual_seed(0);
  const moons::Data data = moons::make_moons(200, 0.1, 42);
  const Tensor x = data.x(), y = data.y();
  moons::MLP model;
  auto opt = make_opt(model.parameters());
  Run run;
  for (int step = 1; step <= steps; ++step) {
    if (step == lr_change) opt->set_lr(opt->lr() / 2);
    {
      const bool printed = step == 1 || step % 20 == 0;
      opt->zero_grad();
      Tensor loss = nn::cross_entropy(model(x), y);
      if (printed && print == Print::BeforeBackward) CHECK(std::isfinite(loss.item<float>()));
      loss.backward();
      opt->step();
      if (printed && print == Print::AfterStep) CHECK(std::isfinite(loss.item<float>()));
    }
    if (step == 2) run.compiled_after_2 = kernels_made();
    if (step == 500) run.at_500 = live();
  }
  run.at_end = live();
  run.compiled_at_end = kernels_made();
  run.accuracy = moons::accuracy(model, data);
  return run;
}

// Trains through moons::training_step (loom::Capture), as the example does:
// the function runs at steps 1 and 2, every later step replays its kernels.
Run train_captured(int steps, uint64_t& graph_built_after_2) {
  manual_seed(0);
  const moons::Data data = moons::make_moons(200, 0.1, 42);
  const Tensor x = data.x(), y = data.y();
  moons::MLP model;
  optim::SGD opt(model.parameters(), 0.5);
  Capture step = moons::training_step(model, opt);
  Run run;
  Counters at_2{};
  for (int i = 1; i <= steps; ++i) {
    {
      const Counters before = counters();
      const Tensor loss = step({x, y})[0];
      if (i > 2) CHECK(counters().capture_replays == before.capture_replays + 1);
      if (i == 1 || i % 20 == 0) CHECK(std::isfinite(loss.item<float>()));
    }
    if (i == 2) {
      at_2 = counters();
      run.compiled_after_2 = kernels_made();
    }
    if (i == 500) run.at_500 = live();
  }
  const Counters end = counters();
  graph_built_after_2 = realizes(end) - realizes(at_2) + end.schedules_built - at_2.schedules_built;
  CHECK(end.capture_replays - at_2.capture_replays == static_cast<uint64_t>(steps - 2));
  run.at_end = live();
  run.compiled_at_end = kernels_made();
  run.accuracy = moons::accuracy(model, data);
  return run;
}

void check_flat(const Run& r) {
  CHECK(r.at_500.uops == r.at_end.uops);
  CHECK(r.at_500.buffers == r.at_end.buffers);
  CHECK(r.at_500.cached_kernels == r.at_end.cached_kernels);
  CHECK(r.compiled_after_2 == r.compiled_at_end);
  CHECK(r.accuracy >= 0.97);
}

auto sgd(double lr) {
  return [lr](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(std::move(p), lr); };
}
auto adam(double lr) {
  return [lr](std::vector<Tensor> p) { return std::make_unique<optim::Adam>(std::move(p), lr); };
}

}  // namespace

TEST_CASE("one SGD step of the moons MLP (forward, backward, update) is a single realize of one schedule") {
  manual_seed(0);
  const moons::Data data = moons::make_moons(200, 0.1, 42);
  const Tensor x = data.x(), y = data.y();
  moons::MLP model;
  optim::SGD opt(model.parameters(), 0.5);
  for (int step = 0; step < 3; ++step) {
    const Counters before = counters();
    opt.zero_grad();
    Tensor loss = nn::cross_entropy(model(x), y);
    loss.backward();
    opt.step();
    const Counters after = counters();
    CHECK(realizes(after) - realizes(before) == 1);
    CHECK(after.kernels_executed > before.kernels_executed);
    CHECK(loss.item<float>() > 0);  // computed by that schedule: no other runs
    CHECK(realizes(counters()) == realizes(after));
    const bool planned = after.schedule_cache_misses > before.schedule_cache_misses;
    CHECK(planned == (step == 0));  // planned once, replayed after
  }
}

TEST_CASE(
    "moons for 2,000 SGD steps, loss read before backward, lr halved mid-run: flat counts, no kernel after "
    "step 2") {
  check_flat(train(sgd(0.5), 2000, Print::BeforeBackward, 1000));
}

TEST_CASE("moons for 2,000 SGD steps, loss read after the step: flat counts, no kernel after step 2") {
  check_flat(train(sgd(0.5), 2000, Print::AfterStep, 0));
}

TEST_CASE("moons for 2,000 captured SGD steps: every step after the second replays, builds no graph") {
  uint64_t graph_built_after_2 = 0;
  check_flat(train_captured(2000, graph_built_after_2));
  CHECK(graph_built_after_2 == 0);  // no realize, no schedule: the replays ran the kernels directly
}

TEST_CASE("captured moons steps give the uncaptured parameters bitwise, set_lr mid-run included") {
  const moons::Data data = moons::make_moons(200, 0.1, 42);
  const Tensor x = data.x(), y = data.y();
  manual_seed(0);
  moons::MLP plain;
  manual_seed(0);
  moons::MLP captured;
  optim::SGD plain_opt(plain.parameters(), 0.5), captured_opt(captured.parameters(), 0.5);
  Capture step = moons::training_step(captured, captured_opt);
  for (int i = 1; i <= 40; ++i) {
    if (i == 20) {
      plain_opt.set_lr(0.125);
      captured_opt.set_lr(0.125);  // read by the replays too
    }
    plain_opt.zero_grad();
    const Tensor want = nn::cross_entropy(plain(x), y);
    want.backward();
    plain_opt.step();
    const Tensor got = step({x, y})[0];
    CAPTURE(i);
    CHECK(got.item<float>() == want.item<float>());
  }
  CHECK(counters().capture_replays > 0);
  CHECK(step.captured({x, y}));
  const auto p = plain.parameters(), c = captured.parameters();
  for (size_t i = 0; i < p.size(); ++i) {
    CAPTURE(i);
    CHECK(c[i].to_vector<float>() == p[i].to_vector<float>());
    CHECK(c[i].grad().to_vector<float>() == p[i].grad().to_vector<float>());
  }
}

TEST_CASE(
    "moons for 2,000 Adam steps, loss read before backward, lr halved mid-run: flat counts, no kernel after "
    "step 2") {
  check_flat(train(adam(1e-2), 2000, Print::BeforeBackward, 1000));
}
