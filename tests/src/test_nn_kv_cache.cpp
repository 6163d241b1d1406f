// nn::KVCache: decoding through the cache equals attention over every token so far
// (a float64 loop over the host's copies of the keys and values); one token at a time
// it compiles nothing after its first single-token step and writes its buffers in place.
#include "check.hpp"
#include "support/error_message.hpp"

#include <loom/debug.hpp>
#include <loom/nn.hpp>

#include <cmath>
#include <random>

using namespace loom;
using test::buffer_address;
using test::check_message;
using test::error_of;

namespace {

constexpr int64_t kBatch = 2, kHeads = 3, kDim = 4, kMaxLen = 9;

std::vector<float> uniform(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// softmax(q k^T / sqrt(D)) v for one query per (batch, head) over `tokens` keys; the
// keys and values are [B, H, tokens, D] row-major.
std::vector<double> attend(const std::vector<float>& q, const std::vector<float>& k,
                           const std::vector<float>& v, int64_t tokens) {
  std::vector<double> out;
  for (int64_t bh = 0; bh < kBatch * kHeads; ++bh) {
    std::vector<double> score(static_cast<size_t>(tokens));
    double top = -INFINITY, total = 0;
    for (int64_t j = 0; j < tokens; ++j) {
      double s = 0;
      for (int64_t d = 0; d < kDim; ++d) s += double(q[bh * kDim + d]) * k[(bh * tokens + j) * kDim + d];
      score[j] = s / std::sqrt(double(kDim));
      top = std::max(top, score[j]);
    }
    for (double& s : score) total += s = std::exp(s - top);
    for (int64_t d = 0; d < kDim; ++d) {
      double acc = 0;
      for (int64_t j = 0; j < tokens; ++j) acc += score[j] / total * v[(bh * tokens + j) * kDim + d];
      out.push_back(acc);
    }
  }
  return out;
}

// [B, H, a, D] and [B, H, b, D] row-major, joined along the tokens.
std::vector<float> join(const std::vector<float>& x, int64_t a, const std::vector<float>& y, int64_t b) {
  std::vector<float> out;
  for (int64_t bh = 0; bh < kBatch * kHeads; ++bh) {
    out.insert(out.end(), x.begin() + bh * a * kDim, x.begin() + (bh + 1) * a * kDim);
    out.insert(out.end(), y.begin() + bh * b * kDim, y.begin() + (bh + 1) * b * kDim);
  }
  return out;
}

Tensor tokens_of(const std::vector<float>& data, int64_t n) {
  return Tensor::from_vector(data, {kBatch, kHeads, n, kDim});
}

}  // namespace

TEST_CASE("KVCache: a prompt, then one token at a time, attends as attention over every token so far") {
  std::mt19937_64 rng(7);
  nn::KVCache cache(kBatch, kHeads, kMaxLen, kDim);
  const void* keys_memory = buffer_address(cache.key_buffer());
  std::vector<float> all_k, all_v;
  int64_t cached = 0;
  uint64_t compiled_after_first_token = 0;
  for (const int64_t n : {3, 1, 1, 1, 1, 1, 1}) {
    const auto k = uniform(static_cast<size_t>(kBatch * kHeads * n * kDim), rng);
    const auto v = uniform(k.size(), rng);
    const auto q = uniform(static_cast<size_t>(kBatch * kHeads * kDim), rng);
    if (cached == 5) compiled_after_first_token = counters().kernels_compiled;
    auto [keys, values] = cache.update(tokens_of(k, n), tokens_of(v, n));
    all_k = join(all_k, cached, k, n);
    all_v = join(all_v, cached, v, n);
    cached += n;
    CHECK(cache.size() == cached);
    CHECK(keys.shape()[2].is_symbolic() == (n == 1));
    const Tensor out = nn::scaled_dot_product_attention(tokens_of(q, 1), keys, values);
    const std::vector<double> want = attend(q, all_k, all_v, cached);
    const std::vector<float> got = out.to_vector<float>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
  }
  // Tokens 5 to 9 ran the kernels tokens 4 and 5 compiled (the 4th is the first of one token).
  CHECK(counters().kernels_compiled == compiled_after_first_token);
  CHECK(buffer_address(cache.key_buffer()) == keys_memory);  // written in place, never copied
  CHECK_THROWS_AS(cache.update(tokens_of(std::vector<float>(24), 1), tokens_of(std::vector<float>(24), 1)),
                  Error);  // 10 tokens: past max_len
}

TEST_CASE("KVCache: crop keeps the first tokens, and the next update writes after them") {
  nn::KVCache cache(1, 1, 4, 1);
  cache.update(Tensor::full({1, 1, 3, 1}, 1), Tensor::full({1, 1, 3, 1}, 2));
  cache.crop(1);
  auto [keys, values] = cache.update(Tensor::full({1, 1, 1, 1}, 5), Tensor::full({1, 1, 1, 1}, 6));
  CHECK(keys.to_vector<float>() == std::vector<float>{1, 5});  // [1, 1, T=2, 1]
  CHECK(values.to_vector<float>() == std::vector<float>{2, 6});
  test::check_values(cache.key_buffer() * 1, {1, 5, 1, 0});  // the cropped token stays until overwritten
  cache.reset();
  CHECK(cache.size() == 0);
  check_message(error_of([&] { cache.crop(1); }), {"KVCache::crop", "length 1", "[0, 0]"});
}

TEST_CASE("KVCache: errors name the shapes, the dtype and max_len") {
  nn::KVCache cache(kBatch, kHeads, 2, kDim);
  const Tensor token = Tensor::zeros({kBatch, kHeads, 1, kDim});
  check_message(error_of([&] {
                  cache.update(Tensor::zeros({kBatch, kHeads, 1, 5}), token);
                }),
                {"KVCache::update", "k has shape [2, 3, 1, 5]", "expected [2, 3, n, 4]"});
  check_message(error_of([&] { cache.update(token, token.cast(DType::Float64)); }),
                {"KVCache::update", "v has", "dtype Float64", "dtype Float32"});
  check_message(error_of([&] {
                  cache.update(Tensor::zeros({kBatch, kHeads, 3, kDim}), token);
                }),
                {"KVCache::update", "k has 3 tokens but v has 1"});
  cache.update(token, token);
  check_message(
      error_of([&] {
        cache.update(Tensor::zeros({kBatch, kHeads, 2, kDim}), Tensor::zeros({kBatch, kHeads, 2, kDim}));
      }),
      {"KVCache::update", "holds 1 of its max_len 2 tokens; 2 more do not fit"});
  check_message(error_of([] { nn::KVCache(1, 0, 4, 4); }), {"KVCache", "heads 0", "must all be positive"});
}
