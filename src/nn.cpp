// loom::nn: layers, losses and initialisers composed from Tensor ops, so the
// gradient and the scheduler see nothing but ordinary graphs.
#include "schedule/schedule.hpp"
#include "src/autocast.hpp"
#include "src/half_compute.hpp"
#include "src/nn_common.hpp"
#include "src/tensor_ops.hpp"

#include <loom/gradient.hpp>
#include <loom/nn.hpp>

#include <cmath>
#include <limits>

namespace loom::nn {

using detail::str;
using namespace detail_nn;

namespace {

Tensor uniform_values(const Shape& shape, double low, double high, DType dtype = DType::Float32) {
  return Tensor::rand(shape, dtype) * (high - low) + low;
}

void check_last_axis(const Tensor& x, int64_t dim, const char* op) {
  if (x.ndim() == 0 || x.shape().back() != dim)
    throw Error(
        fmt::format("{}: input of shape {} does not end in the normalized size {}", op, str(x.shape()), dim));
}

// fan_in, fan_out of a [out, in, receptive...] weight.
std::pair<double, double> fans(const Tensor& t, const char* op) {
  if (t.ndim() < 2)
    throw Error(fmt::format("{}: fan in and fan out need a tensor of at least 2 dimensions, got shape {}", op,
                            str(t.shape())));
  double receptive = 1;
  for (int64_t i = 2; i < t.ndim(); ++i) receptive *= static_cast<double>(t.shape()[i]);
  return {static_cast<double>(t.shape()[1]) * receptive, static_cast<double>(t.shape()[0]) * receptive};
}

// Replaces t's values by `values` now, outside any gradient.
Tensor& fill_(Tensor& t, const Tensor& values) {
  NoGrad no_grad;
  t.assign(values);
  return t.realize();
}

}  // namespace

std::optional<std::vector<int64_t>> detail_nn::realized_indices(const Tensor& t) {
  const UOpPtr& view = t.node()->uop;
  if (!is_buffer_view(view)) return std::nullopt;
  const void* data = detail::buffer_data(view->op == Op::BUFFER ? view : view->src[0]);
  const auto n = static_cast<size_t>(t.numel());
  if (t.dtype() == DType::Int32) {
    const auto* p = static_cast<const int32_t*>(data);
    return std::vector<int64_t>(p, p + n);
  }
  const auto* p = static_cast<const int64_t*>(data);
  return std::vector<int64_t>(p, p + n);
}

void detail_nn::check_indices(const Tensor& idx, int64_t n, const char* op, const char* what,
                              std::optional<int64_t> ignored) {
  if (idx.dtype() != DType::Int32 && idx.dtype() != DType::Int64)
    throw Error(fmt::format("{}: {} have dtype {}; expected Int32 or Int64", op, what,
                            scalar_name(idx.dtype().scalar)));
  const auto values = realized_indices(idx);
  if (!values) return;
  for (size_t i = 0; i < values->size(); ++i)
    if (((*values)[i] < 0 || (*values)[i] >= n) && (*values)[i] != ignored)
      throw Error(
          fmt::format("{}: {} value {} at position {} is outside [0, {})", op, what, (*values)[i], i, n));
}

// ---- layers --------------------------------------------------------------------------

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias) : Module("Linear") {
  register_parameter("weight", &Linear::weight);
  register_parameter("bias", &Linear::bias);
  if (in_features < 0 || out_features < 0)
    throw Error(
        fmt::format("Linear: sizes must be non-negative, got in {} and out {}", in_features, out_features));
  const double bound = in_features > 0 ? 1 / std::sqrt(static_cast<double>(in_features)) : 0;
  weight = parameter(uniform_values({out_features, in_features}, -bound, bound));
  if (with_bias) bias = parameter(uniform_values({out_features}, -bound, bound));
}

namespace {

// x W^T + b. Half operands multiply and sum in Float32 with the bias added there too, and the
// result is rounded once (src/half_compute.hpp), as PyTorch's CPU addmm.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_same_dtype("Linear", x, "input", weight, "weight");
  if (loom::detail::is_half(x))
    return linear(loom::detail::widened_half(x), loom::detail::widened_half(weight),
                  loom::detail::widened_half(bias))
        .cast(x.dtype());
  const Tensor y = x.matmul(weight.transpose());
  return bias.defined() ? y + bias : y;
}

}  // namespace

Tensor Linear::forward(const Tensor& x) const {
  if (!x.defined() || x.ndim() == 0 || x.shape().back() != weight.shape()[1])
    throw Error(fmt::format("Linear: input of shape {} does not end in in_features {}",
                            x.defined() ? str(x.shape()) : "undefined", weight.shape()[1]));
  // Under Autocast the operands, the bias included as in torch.autocast, are rounded to the
  // autocast dtype and the layer runs in it (src/autocast.hpp).
  if (loom::detail::autocasts({&x, &weight, &bias})) {
    const Tensor xr = loom::detail::autocast_operand(x), wr = loom::detail::autocast_operand(weight),
                 br = loom::detail::autocast_operand(bias);
    const Autocast off(*autocast_dtype(), false);
    return linear(xr, wr, br);
  }
  return linear(x, weight, bias);
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim) : Module("Embedding") {
  register_parameter("weight", &Embedding::weight);
  if (num_embeddings < 0 || embedding_dim < 0)
    throw Error(
        fmt::format("Embedding: sizes must be non-negative, got {} x {}", num_embeddings, embedding_dim));
  weight = parameter(Tensor::randn({num_embeddings, embedding_dim}));
}

Tensor Embedding::forward(const Tensor& indices) const {
  if (!indices.defined()) throw Error("Embedding: the indices are undefined (default-constructed)");
  check_indices(indices, weight.shape()[0], "Embedding", "indices");
  Shape out = indices.shape();
  out.push_back(weight.shape()[1]);
  return weight.index_select(0, indices.reshape({-1})).reshape(out);
}

LayerNorm::LayerNorm(int64_t dim_, double eps_, bool elementwise_affine)
    : Module("LayerNorm"), dim(dim_), eps(eps_) {
  register_parameter("weight", &LayerNorm::weight);
  register_parameter("bias", &LayerNorm::bias);
  if (dim <= 0) throw Error(fmt::format("LayerNorm: the normalized size must be positive, got {}", dim));
  if (elementwise_affine) {
    weight = parameter(Tensor::ones({dim}));
    bias = parameter(Tensor::zeros({dim}));
  }
}

// Under Autocast, norms and losses take half inputs and parameters in Float32 (src/autocast.hpp).
Tensor LayerNorm::forward(const Tensor& input) const {
  check_float(input, "LayerNorm");
  const Tensor x = loom::detail::autocast_float32(input), w = loom::detail::autocast_float32(weight),
               b = loom::detail::autocast_float32(bias);
  check_last_axis(x, dim, "LayerNorm");
  if (w.defined()) check_same_dtype("LayerNorm", x, "input", w, "weight");
  // A half input computes in Float32 (weight and bias widened too) and rounds once
  // (src/half_compute.hpp), as PyTorch's CPU layer_norm.
  const Tensor xf = loom::detail::widened_half(x), wf = loom::detail::widened_half(w),
               bf = loom::detail::widened_half(b);
  const Tensor centred = xf - xf.mean(-1, true);
  Tensor y = centred * (centred.square().mean(-1, true) + eps).rsqrt();
  if (wf.defined()) y = y * wf + bf;
  return loom::detail::is_half(x) ? y.cast(x.dtype()) : y;
}

RMSNorm::RMSNorm(int64_t dim_, std::optional<double> eps_, bool elementwise_affine)
    : Module("RMSNorm"), dim(dim_), eps(eps_) {
  register_parameter("weight", &RMSNorm::weight);
  if (dim <= 0) throw Error(fmt::format("RMSNorm: the normalized size must be positive, got {}", dim));
  if (elementwise_affine) weight = parameter(Tensor::ones({dim}));
}

Tensor RMSNorm::forward(const Tensor& input) const {
  check_float(input, "RMSNorm");
  const Tensor x = loom::detail::autocast_float32(input), w = loom::detail::autocast_float32(weight);
  check_last_axis(x, dim, "RMSNorm");
  if (w.defined()) check_same_dtype("RMSNorm", x, "input", w, "weight");
  const double e = eps.value_or(x.dtype() == DType::Float64 ? std::numeric_limits<double>::epsilon()
                                                            : std::numeric_limits<float>::epsilon());
  // A half input computes in Float32 and rounds once (src/half_compute.hpp), as LayerNorm.
  const Tensor xf = loom::detail::widened_half(x), wf = loom::detail::widened_half(w);
  Tensor y = xf * (xf.square().mean(-1, true) + e).rsqrt();
  if (wf.defined()) y = y * wf;
  return loom::detail::is_half(x) ? y.cast(x.dtype()) : y;
}

// ---- functions ------------------------------------------------------------------------

namespace {

// The leading (batch) axes of an attention's scores: q's, k's and v's leading axes
// broadcast together, or an error naming the op and all three shapes.
Shape attention_batch(const Tensor& q, const Tensor& k, const Tensor& v, const char* op) {
  Shape out;
  for (const Tensor* t : {&q, &k, &v}) {
    const Shape lead(t->shape().begin(), t->shape().end() - 2);
    if (lead.size() > out.size()) out.insert(out.begin(), lead.size() - out.size(), 1);
    for (size_t i = 0; i < lead.size(); ++i) {
      Dim& o = out[out.size() - lead.size() + i];
      if (o != lead[i] && o != 1 && lead[i] != 1)
        throw Error(fmt::format("{}: the leading axes of q {}, k {} and v {} do not broadcast together", op,
                                str(q.shape()), str(k.shape()), str(v.shape())));
      if (o == 1) o = lead[i];
    }
  }
  return out;
}

// k or v with its heads (axis -3) repeated `rep` times each, as PyTorch's
// repeat_interleave: head h of the result is head h / rep of t. An expand and a
// reshape, so nothing is copied.
Tensor repeat_heads(const Tensor& t, int64_t rep) {
  if (rep == 1) return t;
  Shape expanded = t.shape(), merged = t.shape();
  const size_t h = t.ndim() - 3;
  expanded.insert(expanded.begin() + static_cast<std::ptrdiff_t>(h) + 1, rep);
  merged[h] *= rep;
  return t.unsqueeze(static_cast<int>(h) + 1).expand(expanded).reshape(merged);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k_in, const Tensor& v_in,
                                    const Tensor& mask, std::optional<double> scale, bool is_causal,
                                    bool enable_gqa) {
  const char* op = "scaled_dot_product_attention";
  // Under Autocast q, k, v and a float mask are rounded to the autocast dtype, as in
  // torch.autocast's lower-precision list; the products then run in it, the softmax in Float32.
  const bool float_mask = mask.defined() && loom::detail::autocast_eligible(mask);
  const auto rounded = [&](const Tensor& t) { return t.dtype() == *autocast_dtype(); };
  if (loom::detail::autocasts({&q, &k_in, &v_in}) &&
      !(rounded(q) && rounded(k_in) && rounded(v_in) && (!float_mask || rounded(mask)))) {
    return scaled_dot_product_attention(
        loom::detail::autocast_operand(q), loom::detail::autocast_operand(k_in),
        loom::detail::autocast_operand(v_in), float_mask ? loom::detail::autocast_operand(mask) : mask, scale,
        is_causal, enable_gqa);
  }
  for (const Tensor* t : {&q, &k_in, &v_in}) check_float(*t, op);
  check_same_dtype(op, k_in, "k", q, "q");
  check_same_dtype(op, v_in, "v", q, "q");
  if (q.ndim() < 2 || k_in.ndim() < 2 || v_in.ndim() < 2)
    throw Error(fmt::format("{}: q, k and v need at least 2 dimensions, got {}, {} and {}", op,
                            str(q.shape()), str(k_in.shape()), str(v_in.shape())));
  if (q.shape().back() != k_in.shape().back() ||
      k_in.shape()[k_in.ndim() - 2] != v_in.shape()[v_in.ndim() - 2])
    throw Error(fmt::format("{}: q {} and k {} must agree in the last size, k and v {} in the sequence size",
                            op, str(q.shape()), str(k_in.shape()), str(v_in.shape())));
  Tensor k = k_in, v = v_in;
  if (enable_gqa) {
    if (q.ndim() < 3 || k.ndim() < 3 || v.ndim() < 3)
      throw Error(fmt::format("{}: enable_gqa needs q, k and v with a heads axis (-3), got {}, {} and {}", op,
                              str(q.shape()), str(k.shape()), str(v.shape())));
    const int64_t hq = q.shape()[q.ndim() - 3], hk = k.shape()[k.ndim() - 3], hv = v.shape()[v.ndim() - 3];
    if (hk != hv || hk == 0 || hq % hk != 0)
      throw Error(
          fmt::format("{}: enable_gqa needs k {} and v {} with equal head counts (axis -3) dividing q's "
                      "{}, got {}, {} and {}",
                      op, str(k.shape()), str(v.shape()), str(q.shape()), hk, hv, hq));
    k = repeat_heads(k, hq / hk);
    v = repeat_heads(v, hq / hk);
  }
  const Dim L = q.shape()[q.ndim() - 2], S = k.shape()[k.ndim() - 2];  // S symbolic over a cache's T rows
  Shape scores_shape = attention_batch(q, k, v, op);
  scores_shape.push_back(L);
  scores_shape.push_back(S);
  if (mask.defined()) {
    if (is_causal)
      throw Error(
          fmt::format("{}: both a mask {} and is_causal were given; expected one of them (PyTorch "
                      "refuses an explicit mask with is_causal too)",
                      op, str(mask.shape())));
    if (!mask.dtype().is_bool() && !mask.dtype().is_float())
      throw Error(fmt::format("{}: mask {} has dtype {}; expected Bool or a float dtype", op,
                              str(mask.shape()), scalar_name(mask.dtype().scalar)));
    if (mask.dtype().is_float()) check_same_dtype(op, mask, "float mask", q, "q");
    // The mask broadcasts to the scores, never the scores to the mask: a mask
    // with more or larger axes is a mistake that would silently add a batch.
    const Shape& ms = mask.shape();
    bool fits = ms.size() <= scores_shape.size();
    for (size_t i = 1; fits && i <= ms.size(); ++i)
      fits = ms[ms.size() - i] == 1 || ms[ms.size() - i] == scores_shape[scores_shape.size() - i];
    if (!fits)
      throw Error(
          fmt::format("{}: mask {} does not broadcast to the scores' shape {} ([..., L, S] of q {}, k {})",
                      op, str(mask.shape()), str(scores_shape), str(q.shape()), str(k_in.shape())));
  }
  const double s = scale.value_or(1 / std::sqrt(static_cast<double>(q.shape().back())));
  Tensor scores = q.matmul(k.transpose(-2, -1)) * s;
  const Tensor minus_inf = Tensor::scalar(-std::numeric_limits<double>::infinity(), scores.dtype());
  if (is_causal) {
    // Key j is visible to query i when j <= i: a comparison of two index ranges,
    // so the schedule sees index arithmetic it can fuse, not an L x S constant.
    // The weights are masked again (they are 0 there already): a buffer that is 0
    // outside an index condition tells its readers so (schedule/masked_reads.hpp), and
    // the product's sums and its gradient's skip the keys above the diagonal
    // (codegen/reduce_bounds.cpp).
    const Tensor causal = Tensor::arange(S).unsqueeze(0) <= Tensor::arange(L).unsqueeze(1);
    const Tensor zero = Tensor::scalar(0.0, scores.dtype());
    return causal.where(causal.where(scores, minus_inf).softmax(-1), zero).matmul(v);
  }
  if (mask.defined()) scores = mask.dtype().is_bool() ? mask.where(scores, minus_inf) : scores + mask;
  return scores.softmax(-1).matmul(v);
}

// ---- initialisers -----------------------------------------------------------------------

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Sigmoid: return 1;
    case Nonlinearity::Tanh: return 5.0 / 3;
    case Nonlinearity::ReLU: return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: return std::sqrt(2.0 / (1 + param * param));
  }
  return 1;
}

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity) {
  check_float(t, "kaiming_uniform_");
  const auto [fan_in, fan_out] = fans(t, "kaiming_uniform_");
  const double fan = mode == FanMode::FanIn ? fan_in : fan_out;
  const double bound = fan > 0 ? calculate_gain(nonlinearity, a) * std::sqrt(3 / fan) : 0;
  return fill_(t, uniform_values(t.shape(), -bound, bound, t.dtype()));
}

Tensor& xavier_uniform_(Tensor& t, double gain) {
  check_float(t, "xavier_uniform_");
  const auto [fan_in, fan_out] = fans(t, "xavier_uniform_");
  const double bound = fan_in + fan_out > 0 ? gain * std::sqrt(6 / (fan_in + fan_out)) : 0;
  return fill_(t, uniform_values(t.shape(), -bound, bound, t.dtype()));
}

Tensor& normal_(Tensor& t, double mean, double std) {
  check_float(t, "normal_");
  if (std < 0) throw Error(fmt::format("normal_: std must be non-negative, got {}", std));
  return fill_(t, Tensor::randn(t.shape(), t.dtype()) * std + mean);
}

Tensor& uniform_(Tensor& t, double low, double high) {
  check_float(t, "uniform_");
  if (high < low) throw Error(fmt::format("uniform_: low {} is above high {}", low, high));
  return fill_(t, uniform_values(t.shape(), low, high, t.dtype()));
}

}  // namespace loom::nn
