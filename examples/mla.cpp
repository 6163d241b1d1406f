// Multi-head latent attention: a latent cache, weight absorption and decoupled
// RoPE, checked against the naive layer, then trained on a toy task.
//   mla [max_train_steps]     (default 400)
//
// 1. Absorbed and naive attention over a prefilled cache agree, and the
//    absorbed schedule holds no K or V buffer of [B, S, H, dh] (the naive one does).
// 2. Decoding token by token through the fixed-size cache equals recomputing the
//    whole sequence, and compiles no kernel after the first token.
// 3. An embedding + MLA + linear model learns a next-token rule that needs
//    attention (each sequence repeats a random pair: a b a b ...), until the loss
//    is below half its initial value.
#include "mla.hpp"
#include "host_random.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace {

using loom::Tensor;

float max_abs_diff(const Tensor& a, const Tensor& b) { return (a - b).abs().max().item<float>(); }

Tensor positions(int64_t start, int64_t count) {
  std::vector<int32_t> p;
  for (int64_t i = 0; i < count; ++i) p.push_back(static_cast<int32_t>(start + i));
  return Tensor::from_vector(p, {count});
}

bool report(bool ok, const std::string& what) {
  fmt::print("{} {}\n", ok ? "ok  " : "FAIL", what);
  return ok;
}

// Buffers of exactly `numel` elements anywhere in the schedule of `t`.
int buffers_of_size(const Tensor& t, int64_t numel) {
  int n = 0;
  for (const auto& k : loom::schedule_of({t}))
    for (const auto& b : k.buffers) n += b.numel == numel;
  return n;
}

bool check_absorption(const mla::MultiHeadLatentAttention& layer, const mla::Absorbed& w, const Tensor& x,
                      int64_t prefill) {
  const mla::Config& c = layer.cfg;
  const int64_t batch = x.shape()[0];
  mla::LatentCache cache(batch, c);
  const Tensor pos = positions(0, prefill), xs = x.slice(1, 0, prefill);
  cache.write(layer.latents(xs, pos), pos);
  loom::realize({cache.ckv, cache.k_rope});
  const mla::Queries q = layer.queries(xs, pos);
  const Tensor mask = mla::visible(pos, c.max_len);
  const Tensor naive = layer.naive(q, cache.all(), mask), absorbed = layer.absorbed(w, q, cache.all(), mask);
  const int64_t kv_numel = batch * c.max_len * c.heads * c.head_dim;
  const int naive_kv = buffers_of_size(naive, kv_numel), absorbed_kv = buffers_of_size(absorbed, kv_numel);
  const float diff = max_abs_diff(naive, absorbed);
  bool ok = report(diff <= 1e-4f, fmt::format("absorbed vs naive over a {}-token prefill: max |diff| {:.2e}",
                                              prefill, diff));
  ok &= report(absorbed_kv == 0 && naive_kv > 0,
               fmt::format("buffers of B*S*H*dh = {} elements: naive {}, absorbed {}", kv_numel, naive_kv,
                           absorbed_kv));
  return ok;
}

bool check_decoding(const mla::MultiHeadLatentAttention& layer, const mla::Absorbed& w, const Tensor& x,
                    int64_t prefill) {
  const mla::Config& c = layer.cfg;
  mla::LatentCache cache(x.shape()[0], c);
  const Tensor pos0 = positions(0, prefill);
  cache.write(layer.latents(x.slice(1, 0, prefill), pos0), pos0);
  loom::realize({cache.ckv, cache.k_rope});
  std::vector<Tensor> decoded;
  uint64_t compiled_after_first = 0;
  bool no_new_kernels = true;
  for (int64_t t = prefill; t < c.max_len; ++t) {
    const Tensor pos = positions(t, 1), token = x.index_select(1, pos);  // data, not constants
    cache.write(layer.latents(token, pos), pos);
    Tensor y = layer.absorbed(w, layer.queries(token, pos), cache.all(), mla::visible(pos, c.max_len));
    loom::realize({y, cache.ckv, cache.k_rope});  // one schedule; the cache is written in place
    decoded.push_back(y);
    const loom::Counters now = loom::counters();  // a kernel from the disk cache counts as new too
    const uint64_t compiled = now.kernels_compiled + now.kernels_loaded;
    if (t == prefill) compiled_after_first = compiled;
    no_new_kernels &= compiled == compiled_after_first;
  }
  bool ok = report(no_new_kernels, fmt::format("decoding tokens {}..{} compiled no kernel after the first",
                                               prefill, c.max_len - 1));
  float worst = 0;
  for (int64_t t = prefill; t < c.max_len; ++t) {  // recompute the whole sequence, no cache
    const Tensor pos = positions(0, t + 1), xs = x.slice(1, 0, t + 1);
    const Tensor causal = Tensor::arange(t + 1).unsqueeze(0) <= Tensor::arange(t + 1).unsqueeze(1);
    const Tensor full = layer.naive(layer.queries(xs, pos), layer.latents(xs, pos), causal);
    worst = std::max(worst, max_abs_diff(full.slice(1, t, t + 1), decoded[t - prefill]));
  }
  ok &= report(worst <= 1e-4f, fmt::format("decoded with the cache vs recomputed: max |diff| {:.2e}", worst));
  return ok;
}

// Sequences a b a b ... of random pairs (a != b): from the second token on, the
// next token is the one two back, which only attention can find.
struct Batch {
  Tensor tokens, targets;  // [B, T] Int32, [B * (T - 2)] Int32
};
Batch pairs_batch(examples::HostRandom& rng, int64_t batch, int64_t len, int64_t vocab) {
  std::vector<int32_t> tokens, targets;
  for (int64_t b = 0; b < batch; ++b) {
    const auto a = static_cast<int32_t>(rng.uniform() * vocab);
    const auto c = static_cast<int32_t>((a + 1 + static_cast<int64_t>(rng.uniform() * (vocab - 1))) % vocab);
    for (int64_t t = 0; t < len; ++t) tokens.push_back(t % 2 ? c : a);
    for (int64_t t = 2; t < len; ++t) targets.push_back(t % 2 ? c : a);
  }
  return {Tensor::from_vector(tokens, {batch, len}), Tensor::from_vector(targets, {batch * (len - 2)})};
}

bool train(const mla::Config& c, int max_steps) {
  const int64_t vocab = 12, batch = 16, len = c.max_len;
  loom::nn::Embedding embed(vocab, c.d_model);
  mla::MultiHeadLatentAttention layer(c);
  loom::nn::Linear head(c.d_model, vocab);
  std::vector<Tensor> params{embed.weight, head.weight, head.bias};
  for (auto& [name, p] : layer.named_parameters()) params.push_back(p);
  loom::optim::Adam opt(params, 1e-2);
  const Tensor pos = positions(0, len);
  const Tensor causal = Tensor::arange(len).unsqueeze(0) <= Tensor::arange(len).unsqueeze(1);
  examples::HostRandom rng(11);
  fmt::print("training embedding({}) + MLA + linear on repeated pairs, Adam lr {}\n", vocab, opt.lr());
  float first = 0, loss_value = 0;
  for (int step = 1; step <= max_steps; ++step) {
    const Batch b = pairs_batch(rng, batch, len, vocab);
    const Tensor e = embed(b.tokens);
    const Tensor h = e + layer.naive(layer.queries(e, pos), layer.latents(e, pos), causal);
    const Tensor logits = head(h).slice(1, 1, len - 1).reshape({-1, vocab});  // predictions of tokens 2..T-1
    opt.zero_grad();
    Tensor loss = loom::nn::cross_entropy(logits, b.targets);
    loss.backward();
    opt.step();
    loss_value = loss.item<float>();
    if (step == 1) first = loss_value;
    if (step % 20 == 0 || step == 1) fmt::print("step {:4d}  loss {:.4f}\n", step, loss_value);
    if (loss_value < first / 2) {
      fmt::print("step {:4d}  loss {:.4f}\n", step, loss_value);
      break;
    }
  }
  return report(loss_value < first / 2, fmt::format("training: loss {:.4f} from {:.4f} (below half: {:.4f})",
                                                    loss_value, first, first / 2));
}

}  // namespace

int main(int argc, char** argv) {
  const int max_steps = argc > 1 ? std::stoi(argv[1]) : 400;
  loom::manual_seed(1);
  const mla::Config c;
  fmt::print(
      "MLA: d_model {}, {} heads of {} (+ RoPE {}), KV latent {}, query latent {}, cache of {} tokens\n",
      c.d_model, c.heads, c.head_dim, c.rope_dim, c.latent, c.q_latent, c.max_len);
  const mla::MultiHeadLatentAttention layer(c);
  const mla::Absorbed w = layer.absorb();
  const Tensor x = Tensor::randn({2, c.max_len, c.d_model}).realize();
  bool ok = check_absorption(layer, w, x, 10);
  ok &= check_decoding(layer, w, x, 10);
  ok &= train(c, max_steps);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
