// BatchNorm1d/2d: batch statistics and running statistics against hand-derived
// values (PyTorch's formulas: unbiased variance for running_var), eval mode,
// the update realized with the optimizer's step and replayed by a Capture,
// finite differences and errors.
#include "check.hpp"
#include "gradcheck.hpp"
#include "support/error_message.hpp"

#include <loom/capture.hpp>
#include <loom/debug.hpp>
#include <loom/nn.hpp>
#include <loom/optim.hpp>

#include <cmath>
#include <cstring>

using namespace loom;
using test::check_message;
using test::error_of;
using test::values;

namespace {

// x [N, C, L] as doubles; per channel c: the mean and the biased / unbiased variance.
struct Stats {
  std::vector<double> mean, var, unbiased;
};
Stats stats_of(const std::vector<double>& x, int64_t n, int64_t c, int64_t l) {
  Stats s{std::vector<double>(c), std::vector<double>(c), std::vector<double>(c)};
  const double count = static_cast<double>(n * l);
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < l; ++j) sum += x[(i * c + ch) * l + j];
    s.mean[ch] = sum / count;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < l; ++j) sq += std::pow(x[(i * c + ch) * l + j] - s.mean[ch], 2);
    s.var[ch] = sq / count;
    s.unbiased[ch] = sq / (count - 1);
  }
  return s;
}

std::vector<double> batch_values(int step, int64_t numel) {
  std::vector<double> v;
  for (int64_t i = 0; i < numel; ++i)
    v.push_back(std::sin(0.7 * static_cast<double>(i) + step) * (1 + step) + step);
  return v;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])),
                  "element " << i << ": got " << got[i] << ", expected " << want[i]);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector<float>(), y = b.to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("BatchNorm1d in training normalises with batch statistics and moves the running ones by momentum") {
  const int64_t n = 4, c = 3, l = 5;
  for (const std::optional<double> momentum : {std::optional<double>(0.1), std::optional<double>()}) {
    CAPTURE(momentum.has_value());
    nn::BatchNorm1d bn(c, 1e-5, momentum);
    std::vector<double> rm(c, 0), rv(c, 1);
    for (int step = 0; step < 3; ++step) {
      const auto xv = batch_values(step, n * c * l);
      const Tensor x = Tensor::from_vector<double>(xv, {n, c, l}).cast(DType::Float32);
      const Tensor y = bn(x);
      const Stats s = stats_of(xv, n, c, l);
      std::vector<double> want;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t j = 0; j < l; ++j)
            want.push_back((xv[(i * c + ch) * l + j] - s.mean[ch]) / std::sqrt(s.var[ch] + 1e-5));
      check_close(values(y), want, 1e-5);  // realizing y realizes the running statistics with it
      const double f = momentum ? *momentum : 1.0 / (step + 1);  // cumulative average without momentum
      for (int64_t ch = 0; ch < c; ++ch) {
        rm[ch] = f * s.mean[ch] + (1 - f) * rm[ch];
        rv[ch] = f * s.unbiased[ch] + (1 - f) * rv[ch];
      }
      check_close(values(bn.running_mean), rm, 1e-5);
      check_close(values(bn.running_var), rv, 1e-5);
      CHECK(bn.num_batches_tracked.item<int64_t>() == step + 1);
    }
    bn.eval();  // evaluation: the running statistics, no update
    const auto xv = batch_values(7, n * c);
    const Tensor y = bn(Tensor::from_vector<double>(xv, {n, c}).cast(DType::Float32));
    std::vector<double> want;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = 0; ch < c; ++ch) want.push_back((xv[i * c + ch] - rm[ch]) / std::sqrt(rv[ch] + 1e-5));
    check_close(values(y), want, 1e-5);
    check_close(values(bn.running_mean), rm, 1e-5);
    CHECK(bn.num_batches_tracked.item<int64_t>() == 3);
  }
}

TEST_CASE(
    "BatchNorm2d applies weight and bias per channel; without running statistics it always uses the "
    "batch's") {
  manual_seed(2);
  nn::BatchNorm2d bn(2, 1e-3, 0.1, true, false);
  CHECK(!bn.running_mean.defined());
  CHECK(bn.named_buffers().empty());
  {
    NoGrad no_grad;
    bn.weight.assign(Tensor::from_vector<float>({2, -1}, {2}));
    bn.bias.assign(Tensor::from_vector<float>({0.5, 3}, {2}));
  }
  const Tensor x = Tensor::randn({3, 2, 2, 2});
  bn.eval();
  const auto xv = values(x);
  // [N, C, H*W] statistics per channel.
  const Stats s = stats_of(xv, 3, 2, 4);
  std::vector<double> want;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t ch = 0; ch < 2; ++ch)
      for (int64_t j = 0; j < 4; ++j)
        want.push_back((xv[(i * 2 + ch) * 4 + j] - s.mean[ch]) / std::sqrt(s.var[ch] + 1e-3) * (ch ? -1 : 2) +
                       (ch ? 3 : 0.5));
  check_close(values(bn(x)), want, 1e-5);
}

TEST_CASE("an optimizer step realizes BatchNorm's running statistics in its one schedule") {
  manual_seed(6);
  nn::Sequential net(nn::Linear(3, 4), nn::BatchNorm1d(4), nn::ReLU(), nn::Linear(4, 1));
  optim::SGD opt(net.parameters(), 0.1);
  const Tensor x = Tensor::randn({8, 3}), y = Tensor::randn({8, 1});
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    nn::mse(net(x), y).backward();
    reset_counters();
    opt.step();
    CHECK(counters().schedule_cache_hits + counters().schedule_cache_misses == 1);
    const auto& bn = net.at<nn::BatchNorm1d>(1);
    reset_counters();
    CHECK(bn.num_batches_tracked.item<int64_t>() == step + 1);  // already computed: no realize
    values(bn.running_var);
    values(bn.running_mean);
    CHECK(counters().kernels_executed == 0);
  }
}

TEST_CASE(
    "a captured training step updates BatchNorm's running statistics on every replay, bitwise as the loop") {
  const auto make_net = [] {
    manual_seed(9);
    return nn::Sequential(nn::Linear(3, 4), nn::BatchNorm1d(4), nn::ReLU(), nn::Linear(4, 1));
  };
  nn::Sequential plain = make_net(), captured = make_net();
  optim::Adam plain_opt(plain.parameters(), 0.01), captured_opt(captured.parameters(), 0.01);
  const auto train_step = [](nn::Sequential& net, optim::Optimizer& opt, const std::vector<Tensor>& b) {
    opt.zero_grad();
    const Tensor loss = nn::mse(net(b[0]), b[1]);
    loss.backward();
    opt.step();
    return std::vector<Tensor>{loss};
  };
  Capture step([&](const std::vector<Tensor>& b) { return train_step(captured, captured_opt, b); });
  for (int i = 0; i < 6; ++i) {
    manual_seed(100 + i);
    const std::vector<Tensor> b{Tensor::randn({8, 3}).realize(), Tensor::randn({8, 1}).realize()};
    const auto want = train_step(plain, plain_opt, b);
    const auto got = step(b);
    CAPTURE(i);
    CHECK(bitwise_equal(got[0], want[0]));
    const auto ps = plain.state_dict(), cs = captured.state_dict();
    for (size_t k = 0; k < ps.size(); ++k) {
      CAPTURE(ps[k].first);
      if (ps[k].second.dtype() == DType::Int64)
        CHECK(cs[k].second.item<int64_t>() == ps[k].second.item<int64_t>());
      else
        CHECK(bitwise_equal(cs[k].second, ps[k].second));
    }
  }
  CHECK(step.captured({Tensor::zeros({8, 3}), Tensor::zeros({8, 1})}));
  CHECK(captured.at<nn::BatchNorm1d>(1).num_batches_tracked.item<int64_t>() == 6);
}

TEST_CASE("BatchNorm's training-mode gradients match central finite differences") {
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        nn::BatchNorm2d bn(2, 1e-5, 0.1, true, false);
        bn.weight = t[1];
        bn.bias = t[2];
        return bn(t[0]);
      },
      {{{3, 2, 2, 2}}, {{2}}, {{2}}});
}

TEST_CASE("BatchNorm rejects bad shapes, channel counts, one value per channel and bad arguments") {
  nn::BatchNorm2d bn2(3);
  nn::BatchNorm1d bn1(3);
  check_message(error_of([&] {
                  bn2(Tensor::zeros({2, 3, 4}));
                }),
                {"BatchNorm2d", "[N, C, H, W]", "C = 3", "[2, 3, 4]"});
  check_message(error_of([&] { bn1(Tensor::zeros({2, 4})); }), {"BatchNorm1d", "C = 3", "[2, 4]"});
  check_message(error_of([&] {
                  bn1(Tensor::zeros({1, 3}));
                }),
                {"BatchNorm1d", "more than 1 value per channel"});
  check_message(error_of([&] {
                  bn1(Tensor::zeros({2, 3}, DType::Float64));
                }),
                {"BatchNorm1d", "Float64", "Float32"});
  check_message(error_of([] { nn::BatchNorm1d(0); }), {"BatchNorm1d", "num_features"});
  check_message(error_of([] { nn::BatchNorm1d(2, 1e-5, 1.5); }), {"BatchNorm1d", "momentum"});
  bn1.eval();
  CHECK(bn1(Tensor::zeros({1, 3})).shape() == Shape{1, 3});  // evaluation accepts a single sample
}
