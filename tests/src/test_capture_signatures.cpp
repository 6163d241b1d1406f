// loom::Capture over calls of mixed argument signatures (an epoch whose last
// batch is smaller): each signature replays its own recording, every one bound
// to the live parameters and optimiser state, so the captured loop equals the
// plain one bitwise in any order of signatures.
#include "check.hpp"

#include <loom/capture.hpp>
#include <loom/nn.hpp>
#include <loom/optim.hpp>

#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace loom;
using test::iota;
using test::make;

namespace {
bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

enum class Kind { SGD, Adam, RunningMean, Classifier };
const char* name_of(Kind k) {
  switch (k) {
    case Kind::SGD: return "SGD";
    case Kind::Adam: return "Adam";
    case Kind::RunningMean: return "running mean";
    case Kind::Classifier: return "Adam, cross-entropy";
  }
  return "";
}

// A two-layer MLP trained on mean squared error (on cross-entropy against
// Int32 class labels for Classifier), with the state the step carries from
// call to call: its parameters, the optimiser's moments and, for RunningMean,
// a buffer the step updates by assign (as BatchNorm's running mean), with
// the parameters then copied to new buffers on every update.
struct Trainer {
  nn::Linear fc1, fc2;
  std::unique_ptr<optim::Optimizer> opt;
  Tensor running_mean;  // defined for Kind::RunningMean
  bool classifier;
  Trainer(Kind kind, uint64_t seed)
      : fc1(make_linear(seed, 5, 8)), fc2(make_linear(seed + 1, 8, 2)), classifier(kind == Kind::Classifier) {
    std::vector<Tensor> params = fc1.parameters();
    for (const auto& p : fc2.parameters()) params.push_back(p);
    if (kind == Kind::Adam || kind == Kind::Classifier)
      opt = std::make_unique<optim::Adam>(params, 0.01);
    else
      opt = std::make_unique<optim::SGD>(params, 0.05, kind == Kind::RunningMean ? 0.9 : 0.0);
    if (kind == Kind::RunningMean) running_mean = Tensor::zeros({5}).realize();
  }
  static nn::Linear make_linear(uint64_t seed, int64_t in, int64_t out) {
    manual_seed(seed);
    return nn::Linear(in, out);
  }
  std::vector<Tensor> step(const std::vector<Tensor>& args) {
    const Tensor& x = args[0];
    opt->zero_grad();
    Tensor loss, held;
    {
      const Tensor out = fc2(fc1(x).relu());
      loss = classifier ? nn::cross_entropy(out, args[1]) : nn::mse(out, args[1]);
      // Held through the update, the output's graph reads the parameters: their assigns copy.
      if (running_mean.defined()) held = out;
    }
    loss.backward();
    if (running_mean.defined()) {
      NoGrad guard;
      running_mean.assign(running_mean * 0.9f + x.mean(0) * 0.1f);
    }
    opt->step();  // realizes the parameters, their gradients and the optimiser's state
    if (running_mean.defined()) running_mean.realize();
    return {loss};
  }
  // Every tensor the step carries to the next call.
  std::vector<Tensor> state() const {
    const std::vector<Tensor> params = {fc1.weight, fc1.bias, fc2.weight, fc2.bias};
    std::vector<Tensor> out = params;
    for (const auto& p : params) out.push_back(p.grad());
    if (running_mean.defined()) out.push_back(running_mean);
    return out;
  }
};

// A batch of `n` rows: new buffers on every call, values depending on the
// call; the targets are Int32 class labels for a classifier.
std::vector<Tensor> batch(int64_t n, int call, bool labels = false) {
  const Tensor x = make(DType::Float32, iota(n * 5, 0.013 * (call % 7 + 1), -0.3 + 0.01 * call), {n, 5});
  if (!labels) return {x, make(DType::Float32, iota(n * 2, -0.021, 0.2 - 0.005 * call), {n, 2})};
  std::vector<double> classes;
  for (int64_t i = 0; i < n; ++i) classes.push_back(static_cast<double>((i + call) % 3 == 0));
  return {x, make(DType::Int32, classes, {n})};
}

// Runs `sizes` through a plain and a captured Trainer, checking after every
// call that the loss and every piece of carried state are bitwise the same.
void check_against_plain(Kind kind, const std::vector<int64_t>& sizes) {
  Trainer plain(kind, 11), captured(kind, 11);
  Capture step([&](const std::vector<Tensor>& args) { return captured.step(args); });
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::vector<Tensor> args = batch(sizes[i], static_cast<int>(i), kind == Kind::Classifier);
    const Tensor want = plain.step(args)[0];
    const Tensor got = step(args)[0];
    CAPTURE(i);
    CAPTURE(sizes[i]);
    REQUIRE(bitwise_equal(got, want));
    const std::vector<Tensor> a = captured.state(), b = plain.state();
    for (size_t s = 0; s < a.size(); ++s) {
      CAPTURE(s);
      REQUIRE(bitwise_equal(a[s], b[s]));
    }
  }
}
}  // namespace

TEST_CASE(
    "an epoch's smaller last batch (4, 4, 4, 4, 3 repeated): SGD and Adam equal the plain loop bitwise") {
  // Classifier: the report's case, an MLP on cross-entropy with integer labels.
  std::vector<int64_t> sizes;
  for (int epoch = 0; epoch < 4; ++epoch)
    for (int64_t n : {4, 4, 4, 4, 3}) sizes.push_back(n);
  for (const Kind kind : {Kind::SGD, Kind::Adam, Kind::Classifier}) {
    const std::string kind_name = name_of(kind);
    CAPTURE(kind_name);
    check_against_plain(kind, sizes);
  }
}

TEST_CASE("both signatures of an epoch with a smaller last batch replay, with no graph built") {
  Trainer captured(Kind::Adam, 3);
  Capture step([&](const std::vector<Tensor>& args) { return captured.step(args); });
  for (int epoch = 0; epoch < 3; ++epoch)
    for (int64_t n : {4, 4, 4, 4, 3}) step(batch(n, epoch));
  CHECK(step.captured(batch(4, 0)));
  CHECK(step.captured(batch(3, 0)));
  const void* weight = test::buffer_address(captured.fc1.weight);
  const Counters before = counters();
  step(batch(4, 9));
  step(batch(3, 9));
  CHECK(counters().capture_replays == before.capture_replays + 2);
  CHECK(counters().schedules_built == before.schedules_built);
  // Nothing else reads the parameters: both replays update them in place, with no copy.
  CHECK(test::buffer_address(captured.fc1.weight) == weight);
}

TEST_CASE(
    "property: random sequences of 2-4 signatures through SGD, Adam and a running mean equal the plain "
    "loop") {
  std::mt19937 rng(24);
  const std::vector<int64_t> pool = {1, 2, 3, 4, 6};
  for (const Kind kind : {Kind::SGD, Kind::Adam, Kind::RunningMean})
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<int64_t> choices = pool;
      std::shuffle(choices.begin(), choices.end(), rng);
      choices.resize(2 + rng() % 3);
      std::vector<int64_t> sizes;
      for (int i = 0; i < 12; ++i) sizes.push_back(choices[rng() % choices.size()]);
      std::string shown;
      for (int64_t n : sizes) shown += std::to_string(n) + " ";
      const std::string kind_name = name_of(kind);
      CAPTURE(kind_name);
      CAPTURE(shown);
      check_against_plain(kind, sizes);
    }
}
