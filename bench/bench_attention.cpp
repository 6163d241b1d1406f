// Causal attention as a model calls it, nn::scaled_dot_product_attention, measured, never
// asserted: run
//   LOOM_THREADS=2 ./build/bench/bench_attention --benchmark_min_time=0.3
// bench/compare runs it beside PyTorch (bench/peers/peers.py: torch's own
// scaled_dot_product_attention where it has one, else the eager formula). A forward is one
// realize of the output; forward+backward one realize of the gradients of q, k and v of
// sum(y * y). GFLOP/s counts the two products, 4·B·H·T²·d, half of them under the causal
// mask, and 2.5 times that more for the backward's five products (as FlashAttention counts).
// gpt_decode_256: examples/gpt.hpp's model at its size (random weights, no dropout) decodes
// 256 tokens greedily, one at a time through its KVCache, each token's logits read back.
#include "gpt.hpp"

#include <loom/loom.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {

struct Attention {
  const char* name;
  int64_t batch, heads, tokens, dim;
};
// Issue 27's rows: B = 4, H = 8, d = 64 at T = 1024 and 2048.
const Attention kCases[] = {
    {"attention_causal_4x8x1024x64", 4, 8, 1024, 64},
    {"attention_causal_4x8x2048x64", 4, 8, 2048, 64},
};

void attention(benchmark::State& state, const Attention& a, bool backward) {
  const loom::Shape shape{a.batch, a.heads, a.tokens, a.dim};
  loom::Tensor q = loom::Tensor::randn(shape), k = loom::Tensor::randn(shape), v = loom::Tensor::randn(shape);
  loom::realize({q, k, v});
  if (backward) q.requires_grad_(), k.requires_grad_(), v.requires_grad_();
  auto step = [&] {
    const loom::Tensor y =
        loom::nn::scaled_dot_product_attention(q, k, v, {}, std::nullopt, /*is_causal=*/true);
    if (backward) {
      loom::realize(loom::gradient((y * y).sum(), {q, k, v}));
    } else {
      loom::Tensor(y).realize();
    }
  };
  step();  // compiles; the loop measures cached plans
  for (auto _ : state) step();
  const double t = static_cast<double>(a.tokens);
  const double forward =
      4.0 * static_cast<double>(a.batch * a.heads) * t * t * static_cast<double>(a.dim) / 2;
  state.counters["GFLOP/s"] =
      benchmark::Counter(forward * (backward ? 3.5 : 1) * 1e-9 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void gpt_decode(benchmark::State& state, bool captured) {
  constexpr int64_t kTokens = 256;
  gpt::Config config;
  config.vocab_size = 114;  // the fortunes corpus's characters
  config.dropout = 0;
  loom::manual_seed(0);
  gpt::Model model(config);
  model.eval();
  loom::NoGrad no_grad;
  gpt::Decoder decoder(model, captured ? gpt::Decoder::Steps::replayed : gpt::Decoder::Steps::built);
  auto decode = [&] {
    int32_t token = 0;
    for (int32_t p = 0; p < kTokens; ++p) {
      const std::vector<float> l = decoder(token, p).to_vector<float>();
      token = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    }
  };
  decode();  // compiles (and records); the loop measures cached plans (or replays)
  for (auto _ : state) decode();
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(kTokens * state.iterations()), benchmark::Counter::kIsRate);
}

const bool kRegistered = [] {
  for (const bool captured : {false, true})
    benchmark::RegisterBenchmark(captured ? "gpt_decode_256_captured" : "gpt_decode_256",
                                 [captured](benchmark::State& s) { gpt_decode(s, captured); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  for (const Attention& a : kCases) {
    benchmark::RegisterBenchmark((std::string(a.name) + "_forward").c_str(),
                                 [&a](benchmark::State& s) { attention(s, a, false); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((std::string(a.name) + "_forward_backward").c_str(),
                                 [&a](benchmark::State& s) { attention(s, a, true); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
