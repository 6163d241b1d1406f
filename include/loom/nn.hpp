#pragma once
// Neural-network building blocks (namespace loom::nn): layers, losses,
// attention and initialisers, built from Tensor ops so they differentiate and
// fuse like any other graph. docs/api.md, "nn", is the reference.
//
// Layers are small value types holding their parameters as public tensors
// (leaves that require gradients). Copies share the parameters, like Tensor
// copies. Each is callable and lists its parameters:
//   nn::Linear fc(2, 16);
//   Tensor y = fc(x);                          // x [..., 2] -> y [..., 16]
//   auto named = fc.named_parameters("fc1");   // {"fc1.weight", ...}
#include <loom/checkpoint.hpp>
#include <loom/nn_functional.hpp>
#include <loom/tensor.hpp>

#include <optional>
#include <string>
#include <vector>

namespace loom::nn {

// ---- layers ----

// y = x W^T + b, W [out, in], b [out]; PyTorch's default initialisation:
// W and b uniform on [-1/sqrt(in), 1/sqrt(in)].
struct Linear {
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor operator()(const Tensor& x) const;  // x [..., in] -> [..., out]
  std::vector<Tensor> parameters() const;
  NamedTensors named_parameters(const std::string& prefix = "") const;  // weight, bias
  Tensor weight, bias;                                                  // bias undefined without one
};

// Rows of a [num, dim] table, N(0, 1) initialised: indices [...] (Int32 or
// Int64) -> [..., dim]. A realized index outside [0, num) is an error.
struct Embedding {
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  Tensor operator()(const Tensor& indices) const;
  std::vector<Tensor> parameters() const;
  NamedTensors named_parameters(const std::string& prefix = "") const;  // weight
  Tensor weight;
};

// Normalises over the last axis: (x - mean) / sqrt(var + eps) * weight + bias,
// var biased; weight ones and bias zeros, both absent without elementwise_affine.
struct LayerNorm {
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool elementwise_affine = true);
  Tensor operator()(const Tensor& x) const;  // x [..., dim]
  std::vector<Tensor> parameters() const;
  NamedTensors named_parameters(const std::string& prefix = "") const;  // weight, bias
  Tensor weight, bias;
  int64_t dim;
  double eps;
};

// x / sqrt(mean(x^2 over the last axis) + eps) * weight, weight ones. Without
// eps, the machine epsilon of x's dtype, as PyTorch.
struct RMSNorm {
  explicit RMSNorm(int64_t dim, std::optional<double> eps = std::nullopt, bool elementwise_affine = true);
  Tensor operator()(const Tensor& x) const;  // x [..., dim]
  std::vector<Tensor> parameters() const;
  NamedTensors named_parameters(const std::string& prefix = "") const;  // weight
  Tensor weight;
  int64_t dim;
  std::optional<double> eps;
};

// ---- functions ----

// softmax(q k^T * scale + mask) v over the last two axes; leading axes
// broadcast. q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev].
// mask (broadcast to [..., L, S]): Bool, true where attention is allowed, or
// a float added to the scores; undefined for none. scale defaults to 1/sqrt(E).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask = {}, std::optional<double> scale = std::nullopt);

// Mean over N of -log softmax(logits)[i, labels[i]]; logits [N, C] float,
// labels [N] Int32 or Int64. A realized label outside [0, C) is an error naming
// it (a lazy one cannot be read without running the graph: it contributes 0).
Tensor cross_entropy(const Tensor& logits, const Tensor& labels);
// Mean of (pred - target)^2; shapes broadcast as in PyTorch.
Tensor mse(const Tensor& pred, const Tensor& target);

// ---- initialisers: replace a float tensor's values now (it is realized), as
// torch.nn.init does; they return the tensor. Fans are those of a [out, in, ...]
// weight: fan_in = in * receptive field, fan_out = out * receptive field. ----

enum class FanMode { FanIn, FanOut };
enum class Nonlinearity { Linear, ReLU, LeakyReLU, Tanh, Sigmoid };
// The recommended gain of a nonlinearity (torch.nn.init.calculate_gain);
// `param` is LeakyReLU's negative slope.
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);

// U(-b, b) with b = gain * sqrt(3 / fan), gain of `nonlinearity` (LeakyReLU with slope a).
Tensor& kaiming_uniform_(Tensor& t, double a = 0, FanMode mode = FanMode::FanIn,
                         Nonlinearity nonlinearity = Nonlinearity::LeakyReLU);
// U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1);
// N(mean, std^2).
Tensor& normal_(Tensor& t, double mean = 0, double std = 1);
// U(low, high).
Tensor& uniform_(Tensor& t, double low = 0, double high = 1);

}  // namespace loom::nn
