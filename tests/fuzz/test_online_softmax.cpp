// schedule/online_softmax.hpp end to end (LOOM_ENABLE=online_softmax): attention's
// weighted sum computed from the scores in one kernel, its max folded into the sum's loop
// (codegen/lower_reduce.cpp), against a float64 reference on the host, under the kernel
// checker (whose interpreter runs the nested max as a loop of its own), and the schedule
// inspected for [.., L, S] buffers.
#include "fuzz/kernel_checker.hpp"
#include "ir/flags.hpp"
#include "src/schedule_cache.hpp"

#include <loom/debug.hpp>
#include <loom/loom.hpp>
#include <loom/nn.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <optional>

using namespace loom;

namespace {

struct Enabled {
  uint64_t token = detail::push_flag_overrides({{"LOOM_ENABLE", "online_softmax"}});
  ~Enabled() { detail::pop_flag_overrides(token); }
};

std::vector<float> ramp(int64_t n, double scale, double phase) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>(2 * std::sin(i * scale + phase));
  return v;
}

// softmax(q k^T * scale + mask) v per head, in float64; `visible(h, i, j)` is the mask.
template <class Visible>
std::vector<double> reference(const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, int64_t heads, int64_t l, int64_t s, int64_t e,
                              Visible visible) {
  std::vector<double> out(static_cast<size_t>(heads * l * e));
  const double scale = 1 / std::sqrt(static_cast<double>(e));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < l; ++i) {
      std::vector<double> w(static_cast<size_t>(s));
      double max = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t j = 0; j < s; ++j) {
        double d = 0;
        for (int64_t c = 0; c < e; ++c) d += double(q[(h * l + i) * e + c]) * k[(h * s + j) * e + c];
        w[j] = visible(h, i, j) ? d * scale : -std::numeric_limits<double>::infinity();
        max = std::max(max, w[j]);
      }
      for (double& x : w) sum += (x = std::exp(x - max));
      for (int64_t c = 0; c < e; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < s; ++j) acc += w[j] * v[(h * s + j) * e + c];
        out[(h * l + i) * e + c] = acc / sum;
      }
    }
  return out;
}

// The largest buffer any kernel of the schedule binds, in elements.
int64_t largest_buffer(const std::vector<Tensor>& tensors) {
  int64_t most = 0;
  for (const auto& kernel : schedule_of(tensors))
    for (const auto& b : kernel.buffers) most = std::max(most, b.numel);
  return most;
}

}  // namespace

TEST_CASE(
    "online_softmax: attention as one weighted sum equals float64, causal, masked or not, no [L, S] buffer") {
  const Enabled on;
  const int64_t heads = 2, e = 16;
  for (const int64_t t : {1, 7, 64, 150})
    for (const int mode : {0, 1, 2}) {  // plain, causal, a padding mask hiding the first key of head 1
      CAPTURE(t);
      CAPTURE(mode);
      const auto qv = ramp(heads * t * e, 0.37, 0.1), kv = ramp(heads * t * e, 0.53, 0.7),
                 vv = ramp(heads * t * e, 0.91, 1.3);
      const Tensor q = Tensor::from_vector(qv, {1, heads, t, e}),
                   k = Tensor::from_vector(kv, {1, heads, t, e}),
                   v = Tensor::from_vector(vv, {1, heads, t, e});
      std::vector<bool> keep(static_cast<size_t>(heads * t), true);
      if (t > 1) keep[static_cast<size_t>(t)] = false;
      std::vector<float> keep_f(keep.begin(), keep.end());
      const Tensor mask = Tensor::from_vector(keep_f, {1, heads, 1, t}).cast(DType::Bool);
      const Tensor y = mode == 2   ? nn::scaled_dot_product_attention(q, k, v, mask)
                       : mode == 1 ? nn::scaled_dot_product_attention(q, k, v, {}, std::nullopt, true)
                                   : nn::scaled_dot_product_attention(q, k, v);
      // Every buffer is q's, k's, v's, the output's or smaller: never t x t per head.
      if (t >= 64) CHECK(largest_buffer({y}) <= heads * t * e);
      const std::vector<double> want =
          reference(qv, kv, vv, heads, t, t, e, [&](int64_t h, int64_t i, int64_t j) {
            return mode == 1 ? j <= i : mode == 2 ? bool(keep[static_cast<size_t>(h * t + j)]) : true;
          });
      const std::vector<float> got = y.to_vector<float>();
      REQUIRE(got.size() == want.size());
      double worst = 0;
      for (size_t n = 0; n < got.size(); ++n) worst = std::max(worst, std::abs(got[n] - want[n]));
      CHECK(worst < 2e-6);
    }
}

TEST_CASE("online_softmax: off by default, the scores are stored; on, they are not") {
  const int64_t t = 96, e = 8;
  const Tensor q = Tensor::from_vector(ramp(t * e, 0.3, 0), {1, t, e});
  const Tensor k = Tensor::from_vector(ramp(t * e, 0.5, 1), {1, t, e});
  const Tensor v = Tensor::from_vector(ramp(t * e, 0.7, 2), {1, t, e});
  const Tensor y = (q.matmul(k.transpose(1, 2)) * 0.25).softmax(-1).matmul(v);
  CHECK(largest_buffer({y}) >= t * t);
  const Enabled on;
  CHECK(largest_buffer({y}) <= t * e);
  CHECK(schedule_of({y}).size() == 1);
}

TEST_CASE("online_softmax: a row whose keys are all masked is NaN, as the stored scores give it") {
  const int64_t t = 5, e = 4;
  const Tensor q = Tensor::from_vector(ramp(t * e, 0.3, 0), {1, 1, t, e});
  const Tensor k = Tensor::from_vector(ramp(t * e, 0.5, 1), {1, 1, t, e});
  const Tensor v = Tensor::from_vector(ramp(t * e, 0.7, 2), {1, 1, t, e});
  // Row 2 sees no key; row 3 sees only the last; the others all but the first.
  std::vector<float> m(static_cast<size_t>(t * t), 1);
  for (int64_t j = 0; j < t; ++j) m[2 * t + j] = 0, m[3 * t + j] = j == t - 1;
  for (int64_t i : {0, 1, 4}) m[i * t] = 0;
  const Tensor mask = Tensor::from_vector(m, {t, t}).cast(DType::Bool);
  const std::vector<float> stored = nn::scaled_dot_product_attention(q, k, v, mask).to_vector<float>();
  const Enabled on;
  const Tensor y = nn::scaled_dot_product_attention(q, k, v, mask);
  const std::vector<float> online = y.to_vector<float>();
  REQUIRE(online.size() == stored.size());
  for (size_t n = 0; n < online.size(); ++n) {
    CAPTURE(n);
    CHECK(std::isnan(online[n]) == std::isnan(stored[n]));
    CHECK(std::isnan(online[n]) == (n / e == 2));
    if (!std::isnan(stored[n])) CHECK(std::abs(online[n] - stored[n]) < 1e-6);
  }
}

TEST_CASE("online_softmax: weights another kernel reads (a backward) stay stored, the gradients unchanged") {
  const int64_t t = 24, e = 8;
  auto grads = [&] {
    Tensor q = Tensor::from_vector(ramp(t * e, 0.3, 0), {1, t, e}).requires_grad_();
    Tensor k = Tensor::from_vector(ramp(t * e, 0.5, 1), {1, t, e}).requires_grad_();
    const Tensor v = Tensor::from_vector(ramp(t * e, 0.7, 2), {1, t, e});
    const Tensor loss = ((q.matmul(k.transpose(1, 2)) * 0.3).softmax(-1).matmul(v) * v).sum();
    loss.backward();
    std::vector<float> out = q.grad().to_vector<float>();
    for (float x : k.grad().to_vector<float>()) out.push_back(x);
    return out;
  };
  const std::vector<float> stored = grads();
  const Enabled on;
  CHECK(grads() == stored);
}

TEST_CASE("online_softmax: every kernel pass agrees with the interpreter, the running max's fold included") {
  const Enabled on;
  fuzz::Coverage coverage;
  fuzz::KernelChecker checker(true, &coverage);
  detail::schedule_cache().clear();
  for (const bool causal : {false, true}) {
    const int64_t t = 6, e = 4;  // sizes no other test uses: the kernels compile here
    const Tensor q = Tensor::from_vector(ramp(2 * t * e, 0.3, 0), {2, t, e});
    const Tensor k = Tensor::from_vector(ramp(2 * t * e, 0.5, 1), {2, t, e});
    const Tensor v = Tensor::from_vector(ramp(2 * t * e, 0.7, 2), {2, t, e});
    nn::scaled_dot_product_attention(q, k, v, {}, std::nullopt, causal).realize();
  }
  const auto failure = checker.failure();
  CHECK_MESSAGE(!failure, (failure ? failure->message.substr(0, 2000) : std::string()));
  CHECK(coverage.kernel_checks["checked"] >= 8);  // lower_reduce's fold among them
}
