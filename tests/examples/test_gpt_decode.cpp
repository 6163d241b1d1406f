// The GPT example's decoding through a KVCache (examples/gpt.hpp): each token's logits
// equal a forward pass over the whole sequence, and decoding a long text compiles
// nothing after its first token.
#include "gpt.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace loom;

namespace {

// A small model, trained for no steps: random weights decode as well as trained ones.
gpt::Config small_config() {
  gpt::Config c;
  c.vocab_size = 23;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  c.dropout = 0.1;  // eval() switches it off
  return c;
}

// A small model with weights from `seed`, in evaluation mode, and a decoder for it with
// an empty cache; by default each token's graph is built anew (no Capture).
struct Decoding {
  gpt::Model model;
  gpt::Decoder decode;
  explicit Decoding(uint64_t seed, gpt::Decoder::Steps steps = gpt::Decoder::Steps::built)
      : model((manual_seed(seed), small_config())), decode(model, steps) {
    model.eval();
  }
};

uint64_t kernels_made() {
  const Counters c = counters();
  return c.kernels_compiled + c.kernels_loaded;
}

}  // namespace

TEST_CASE(
    "decoding through the KV cache gives each position the logits of a forward pass over the sequence") {
  Decoding d(7);
  NoGrad no_grad;
  const std::vector<int32_t> tokens{3, 17, 0, 22, 5, 5, 9, 14, 1, 20, 11, 2, 8, 19, 4, 6};  // a whole block
  const Tensor full = d.model.forward(Tensor::from_vector(tokens, {1, 16}));                // [1, 16, 23]
  const std::vector<float> expected = full.to_vector<float>();
  for (int32_t p = 0; p < 16; ++p) {
    CAPTURE(p);
    const std::vector<float> got = d.decode(tokens[static_cast<size_t>(p)], p).to_vector<float>();
    REQUIRE(got.size() == 23);
    const auto row = expected.begin() + p * 23;
    float scale = 0;
    for (int i = 0; i < 23; ++i) scale = std::max(scale, std::abs(row[i]));
    for (int i = 0; i < 23; ++i) CHECK(std::abs(got[static_cast<size_t>(i)] - row[i]) <= 1e-5f * scale);
    CHECK(std::max_element(got.begin(), got.end()) - got.begin() == std::max_element(row, row + 23) - row);
  }
}

TEST_CASE("a token decoded at a position the cache held before replaces its key and value there") {
  Decoding d(8);
  NoGrad no_grad;
  for (int32_t p = 0; p < 6; ++p) d.decode(10 + p, p);
  // Rebuilt from position 0 with other tokens (as the sampler does when the block fills):
  // the old rows past the new position are never seen, and the rewritten ones are the new.
  const std::vector<int32_t> tokens{4, 2, 21};
  std::vector<float> got;
  for (int32_t p = 0; p < 3; ++p) got = d.decode(tokens[static_cast<size_t>(p)], p).to_vector<float>();
  const std::vector<float> full = d.model.forward(Tensor::from_vector(tokens, {1, 3})).to_vector<float>();
  for (int i = 0; i < 23; ++i)
    CHECK(got[static_cast<size_t>(i)] == doctest::Approx(full[46 + i]).epsilon(1e-5));
}

TEST_CASE("decoding compiles the kernels of its first token only, whatever the number of tokens") {
  Decoding d(9);
  NoGrad no_grad;
  d.decode(1, 0);
  const uint64_t after_first = kernels_made();
  const uint64_t misses = counters().schedule_cache_misses;
  for (int32_t p = 1; p < 16; ++p) d.decode((p * 7) % 23, p);
  CHECK(kernels_made() == after_first);
  CHECK(counters().schedule_cache_misses == misses);
}

TEST_CASE("decoding under loom::Capture replays the step with each token and position, the caches carried") {
  Decoding plain(10), captured(10, gpt::Decoder::Steps::replayed);
  NoGrad no_grad;
  for (int32_t p = 0; p < 16; ++p) {
    CAPTURE(p);
    const int32_t token = (p * 5 + 3) % 23;
    const std::vector<float> want = plain.decode(token, p).to_vector<float>();
    CHECK(captured.decode(token, p).to_vector<float>() ==
          want);  // the same kernels on the same values: equal bits
    if (p >= 2) CHECK(captured.decode.replays(token, p));
  }
  CHECK_FALSE(plain.decode.replays(3, 0));
}
