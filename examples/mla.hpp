#pragma once
// Multi-head latent attention (DeepSeek-V2), row-major like PyTorch: a layer
// that caches one small latent per token instead of a key and a value per head.
//
//   c_q  = x W_DQ                         queries' latent         [B, L, dcq]
//   c_kv = x W_DKV                        the cached latent       [B, S, dc]
//   Q_h  = c_q W_UQ_h,  K_h = c_kv W_UK_h,  V_h = c_kv W_UV_h      [B, *, dh]
//   decoupled RoPE: q_r,h = RoPE(c_q W_QR_h) per head, k_r = RoPE(x W_KR)
//   shared by the heads and cached beside c_kv                   [B, *, dR]
//   out  = sum_h softmax((Q_h K_h^T + q_r,h k_r^T) / sqrt(dh + dR)) V_h W_O_h
//
// Weight absorption folds the up-projections into the query and output sides,
// W_QK,h = W_UQ_h^T W_UK_h and W_OV,h = W_UV_h^T W_O_h, so attention runs on
// the latents themselves and no K or V of [B, S, H, dh] ever exists:
//   scores_h = (c_q W_QK,h) c_kv^T + q_r,h k_r^T,  out = sum_h (P_h c_kv) W_OV,h
#include <loom/loom.hpp>

#include <cmath>
#include <vector>

namespace mla {

using loom::Shape;
using loom::Tensor;

struct Config {
  int64_t d_model = 32, heads = 4, head_dim = 12, latent = 20, q_latent = 24, rope_dim = 8, max_len = 16;
};

// Rotary position embedding on pairs (x0, x1) of the last axis. The tables hold
// every position up to max_len; rows are picked by a position *tensor*, so a
// new position changes data, never a kernel.
struct Rope {
  Tensor cos, sin;  // [max_len, dim / 2]
  Rope(int64_t dim, int64_t max_len, double base = 10000) {
    std::vector<float> c, s;
    for (int64_t p = 0; p < max_len; ++p)
      for (int64_t i = 0; i < dim / 2; ++i) {
        const double angle = static_cast<double>(p) * std::pow(base, -2.0 * static_cast<double>(i) / dim);
        c.push_back(static_cast<float>(std::cos(angle)));
        s.push_back(static_cast<float>(std::sin(angle)));
      }
    cos = Tensor::from_vector(c, {max_len, dim / 2});
    sin = Tensor::from_vector(s, {max_len, dim / 2});
  }
  // x [..., L, dim] at positions [L] (Int32).
  Tensor operator()(const Tensor& x, const Tensor& positions) const {
    Shape pairs = x.shape();
    pairs.back() /= 2;
    pairs.push_back(2);
    const Tensor xp = x.reshape(pairs);
    const Tensor x0 = xp.slice(-1, 0, 1).squeeze(-1), x1 = xp.slice(-1, 1, 2).squeeze(-1);
    const Tensor c = cos.index_select(0, positions), s = sin.index_select(0, positions);
    return loom::stack({x0 * c - x1 * s, x0 * s + x1 * c}, -1).reshape(x.shape());
  }
};

// What the cache keeps per token.
struct Latents {
  Tensor ckv;     // [B, S, dc]
  Tensor k_rope;  // [B, S, dR], rotated
};
struct Queries {
  Tensor cq;      // [B, L, dcq]
  Tensor q_rope;  // [B, H, L, dR], rotated
};
// The absorbed weights, computed once for inference.
struct Absorbed {
  Tensor w_qk;  // [H, dcq, dc]
  Tensor w_ov;  // [H * dc, d_model]
};

struct MultiHeadLatentAttention {
  Config cfg;
  loom::nn::Linear down_q, up_q, rope_q, down_kv, up_k, up_v, rope_k, out;
  Rope rope;

  explicit MultiHeadLatentAttention(const Config& c)
      : cfg(c),
        down_q(c.d_model, c.q_latent, false),
        up_q(c.q_latent, c.heads * c.head_dim, false),
        rope_q(c.q_latent, c.heads * c.rope_dim, false),
        down_kv(c.d_model, c.latent, false),
        up_k(c.latent, c.heads * c.head_dim, false),
        up_v(c.latent, c.heads * c.head_dim, false),
        rope_k(c.d_model, c.rope_dim, false),
        out(c.heads * c.head_dim, c.d_model, false),
        rope(c.rope_dim, c.max_len) {}

  Latents latents(const Tensor& x, const Tensor& positions) const {
    return {down_kv(x), rope(rope_k(x), positions)};
  }
  Queries queries(const Tensor& x, const Tensor& positions) const {
    const Tensor cq = down_q(x);
    const int64_t b = x.shape()[0], l = x.shape()[1];
    const Tensor qr = rope_q(cq).reshape({b, l, cfg.heads, cfg.rope_dim}).permute({0, 2, 1, 3});
    return {cq, rope(qr, positions)};
  }
  double scale() const { return 1 / std::sqrt(static_cast<double>(cfg.head_dim + cfg.rope_dim)); }

  // [B, S, H * dh] -> [B, H, S, dh]
  Tensor heads_first(const Tensor& t) const {
    return t.reshape({t.shape()[0], t.shape()[1], cfg.heads, cfg.head_dim}).permute({0, 2, 1, 3});
  }

  // Decompresses K and V per head and attends over [q_h | q_r,h] . [k_h | k_r].
  Tensor naive(const Queries& q, const Latents& kv, const Tensor& mask) const {
    const int64_t b = q.cq.shape()[0], l = q.cq.shape()[1], s = kv.ckv.shape()[1];
    const Tensor k_r = kv.k_rope.unsqueeze(1).expand({b, cfg.heads, s, cfg.rope_dim});
    const Tensor queries = loom::cat({heads_first(up_q(q.cq)), q.q_rope}, -1);
    const Tensor keys = loom::cat({heads_first(up_k(kv.ckv)), k_r}, -1);
    const Tensor a =
        loom::nn::scaled_dot_product_attention(queries, keys, heads_first(up_v(kv.ckv)), mask, scale());
    return out(a.permute({0, 2, 1, 3}).reshape({b, l, cfg.heads * cfg.head_dim}));
  }

  Absorbed absorb() const {
    loom::NoGrad no_grad;
    const auto per_head = [&](const Tensor& w) {  // [H * dh, c] -> [H, dh, c]
      return w.reshape({cfg.heads, cfg.head_dim, w.shape()[1]});
    };
    Tensor w_qk = per_head(up_q.weight).transpose().matmul(per_head(up_k.weight));  // [H, dcq, dc]
    const Tensor w_o =
        out.weight.reshape({cfg.d_model, cfg.heads, cfg.head_dim}).permute({1, 2, 0});  // [H, dh, d]
    Tensor w_ov =
        per_head(up_v.weight).transpose().matmul(w_o).reshape({cfg.heads * cfg.latent, cfg.d_model});
    loom::realize({w_qk, w_ov});
    return {w_qk, w_ov};
  }

  // Attention on the latents: no K or V tensor.
  Tensor absorbed(const Absorbed& w, const Queries& q, const Latents& kv, const Tensor& mask) const {
    const int64_t b = q.cq.shape()[0], l = q.cq.shape()[1];
    const Tensor ckv = kv.ckv.unsqueeze(1);                    // [B, 1, S, dc]
    const Tensor q_latent = q.cq.unsqueeze(1).matmul(w.w_qk);  // [B, H, L, dc]
    Tensor scores = q_latent.matmul(ckv.transpose()) + q.q_rope.matmul(kv.k_rope.unsqueeze(1).transpose());
    scores = scores * scale();
    if (mask.defined()) scores = mask.where(scores, Tensor::scalar(-INFINITY));
    const Tensor z = scores.softmax(-1).matmul(ckv);  // [B, H, L, dc]
    return z.permute({0, 2, 1, 3}).reshape({b, l, cfg.heads * cfg.latent}).matmul(w.w_ov);
  }

  loom::NamedTensors named_parameters() const {
    loom::NamedTensors all;
    const std::pair<const char*, const loom::nn::Linear*> parts[] = {
        {"down_q", &down_q}, {"up_q", &up_q}, {"rope_q", &rope_q}, {"down_kv", &down_kv},
        {"up_k", &up_k},     {"up_v", &up_v}, {"rope_k", &rope_k}, {"out", &out}};
    for (const auto& [name, layer] : parts)
      for (auto& p : layer->named_parameters(name)) all.push_back(std::move(p));
    return all;
  }
};

// A cache of fixed size [B, max_len, ...]: every write is a whole-tensor
// assign through a position mask, so the kernels are the same for every token.
struct LatentCache {
  Tensor ckv, k_rope;
  LatentCache(int64_t batch, const Config& c)
      : ckv(Tensor::zeros({batch, c.max_len, c.latent}).realize()),
        k_rope(Tensor::zeros({batch, c.max_len, c.rope_dim}).realize()) {}

  // Writes fresh latents [B, L, ...] at `positions` ([L], Int32).
  void write(const Latents& fresh, const Tensor& positions) {
    const int64_t max_len = ckv.shape()[1];
    const Tensor hit =
        positions.unsqueeze(1).eq(Tensor::arange(max_len).unsqueeze(0)).cast(loom::DType::Float32);
    const Tensor written = (hit.sum(0) > 0).unsqueeze(1);  // [max_len, 1]
    const Tensor place = hit.transpose();                  // [max_len, L]: row j picks the token written at j
    ckv.assign(written.where(place.matmul(fresh.ckv), ckv));
    k_rope.assign(written.where(place.matmul(fresh.k_rope), k_rope));
  }
  Latents all() const { return {ckv, k_rope}; }
};

// Query i (at positions[i]) may see cache slot j when j <= positions[i]: [L, max_len].
inline Tensor visible(const Tensor& positions, int64_t max_len) {
  return Tensor::arange(max_len).unsqueeze(0) <= positions.unsqueeze(1);
}

}  // namespace mla
