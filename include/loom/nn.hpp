#pragma once
// Neural-network building blocks (namespace loom::nn): modules, losses,
// attention and initialisers, built from Tensor ops so they differentiate and
// fuse like any other graph. docs/api.md, "nn" and "Modules", is the reference.
//
// Every layer is a Module (<loom/module.hpp>) holding its parameters as public
// tensors (leaves that require gradients). Copies share the parameters, like
// Tensor copies. Each is callable and lists its parameters:
//   nn::Linear fc(2, 16);
//   Tensor y = fc(x);                          // x [..., 2] -> y [..., 16]
//   auto named = fc.named_parameters("fc1");   // {"fc1.weight", ...}
#include <loom/checkpoint.hpp>
#include <loom/module.hpp>
#include <loom/nn_functional.hpp>
#include <loom/tensor.hpp>
#include <loom/variable.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loom::nn {

// ---- layers ----

// y = x W^T + b, W [out, in], b [out]; PyTorch's default initialisation:
// W and b uniform on [-1/sqrt(in), 1/sqrt(in)].
struct Linear : Module {
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) const override;  // x [..., in] -> [..., out]
  Tensor weight, bias;                             // bias undefined without one
};

// Rows of a [num, dim] table, N(0, 1) initialised: indices [...] (Int32 or
// Int64) -> [..., dim]. A realized index outside [0, num) is an error.
struct Embedding : Module {
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& indices) const override;
  Tensor weight;
};

// Normalises over the last axis: (x - mean) / sqrt(var + eps) * weight + bias,
// var biased; weight ones and bias zeros, both absent without elementwise_affine.
struct LayerNorm : Module {
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) const override;  // x [..., dim]
  Tensor weight, bias;
  int64_t dim;
  double eps;
};

// x / sqrt(mean(x^2 over the last axis) + eps) * weight, weight ones. Without
// eps, the machine epsilon of x's dtype, as PyTorch.
struct RMSNorm : Module {
  explicit RMSNorm(int64_t dim, std::optional<double> eps = std::nullopt, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) const override;  // x [..., dim]
  Tensor weight;
  int64_t dim;
  std::optional<double> eps;
};

// ---- activations and shape (no parameters) ----

struct ReLU : Module {
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) const override;
};
// approximate: "none" (erf) or "tanh", as Tensor::gelu.
struct GELU : Module {
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) const override;
  std::string approximate;
};
struct SiLU : Module {
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& x) const override;
};
// Merges axes start_dim..end_dim (the batch axis stays by default).
struct Flatten : Module {
  explicit Flatten(int start_dim = 1, int end_dim = -1);
  Tensor forward(const Tensor& x) const override;
  int start_dim, end_dim;
};

// In training, zeroes each element with probability p (loom's generator,
// manual_seed) and scales the rest by 1 / (1 - p); in evaluation, the identity.
// p must lie in [0, 1).
struct Dropout : Module {
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) const override;
  double p;
};

// Batch normalisation over every axis but the channel axis 1:
// (x - mean) / sqrt(var + eps) * weight + bias, var biased. In training (or
// without running statistics) mean and var are the batch's, and the buffers
// running_mean, running_var (the unbiased batch variance) move by `momentum`
// (a cumulative average when momentum is nullopt) and num_batches_tracked
// counts; in evaluation the running statistics are used. The updates are
// realized with the next realize on this thread (Module::update_buffer).
// weight ones, bias zeros, running_mean zeros, running_var ones, as PyTorch.
struct BatchNorm : Module {
  Tensor forward(const Tensor& x) const override;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;

 protected:
  BatchNorm(const char* type, std::vector<int64_t> ranks, int64_t num_features, double eps,
            std::optional<double> momentum, bool affine, bool track_running_stats);

 private:
  std::vector<int64_t> ranks_;  // the input ranks accepted
};
// Input [N, C] or [N, C, L].
struct BatchNorm1d : BatchNorm {
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true);
};
// Input [N, C, H, W].
struct BatchNorm2d : BatchNorm {
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true);
};

// ---- convolution and pooling: torch.nn's modules over nn::functional ----

// Where PyTorch takes an int or a pair, Size2d takes either (2 is (2, 2)).
using functional::Size2d;

// conv2d(x, weight, bias, stride, padding, dilation, groups): x [N, in, H, W] or
// [in, H, W], weight [out, in / groups, kh, kw], bias [out]. PyTorch's default
// initialisation: weight kaiming_uniform_ with a = sqrt(5), which is uniform on
// +-1/sqrt(fan_in), and bias the same, fan_in = in / groups * kh * kw.
struct Conv2d : Module {
  Conv2d(int64_t in_channels, int64_t out_channels, Size2d kernel_size, Size2d stride = 1, Size2d padding = 0,
         Size2d dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) const override;
  Tensor weight, bias;  // bias undefined without one
  int64_t in_channels, out_channels;
  Size2d kernel_size, stride, padding, dilation;
  int64_t groups;
};

// conv1d: x [N, in, L] or [in, L], weight [out, in / groups, k]; initialised as Conv2d.
struct Conv1d : Module {
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) const override;
  Tensor weight, bias;
  int64_t in_channels, out_channels, kernel_size, stride, padding, dilation, groups;
};

// conv_transpose2d: x [N, in, H, W] or [in, H, W], weight [in, out / groups, kh, kw],
// PyTorch's argument order (output_padding before groups, dilation last). fan_in is
// taken from the weight as PyTorch does: out / groups * kh * kw.
struct ConvTranspose2d : Module {
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, Size2d kernel_size, Size2d stride = 1,
                  Size2d padding = 0, Size2d output_padding = 0, int64_t groups = 1, bool bias = true,
                  Size2d dilation = 1);
  Tensor forward(const Tensor& x) const override;
  Tensor weight, bias;
  int64_t in_channels, out_channels;
  Size2d kernel_size, stride, padding, output_padding;
  int64_t groups;
  Size2d dilation;
};

// max_pool2d; stride unset means the kernel size. return_indices and ceil_mode
// are kept for PyTorch's argument order but not implemented (an error).
struct MaxPool2d : Module {
  explicit MaxPool2d(Size2d kernel_size, Size2d stride = {}, Size2d padding = 0, Size2d dilation = 1,
                     bool return_indices = false, bool ceil_mode = false);
  Tensor forward(const Tensor& x) const override;
  Size2d kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

// avg_pool2d; stride unset means the kernel size.
struct AvgPool2d : Module {
  explicit AvgPool2d(Size2d kernel_size, Size2d stride = {}, Size2d padding = 0, bool ceil_mode = false,
                     bool count_include_pad = true);
  Tensor forward(const Tensor& x) const override;
  Size2d kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};

// ---- functions ----

// softmax(q k^T * scale + mask) v over the last two axes; leading axes
// broadcast. q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev].
// mask (broadcast to [..., L, S]): Bool, true where attention is allowed, or
// a float added to the scores; undefined for none. scale defaults to 1/sqrt(E).
// is_causal: query i attends to keys 0..i (PyTorch's lower-triangular L x S mask,
// aligned top-left), built from index comparisons; it excludes `mask`.
// enable_gqa: k and v have fewer heads (axis -3) than q, a divisor of q's, and
// each is repeated to q's heads (q head h reads k/v head h / (Hq / Hkv)).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask = {}, std::optional<double> scale = std::nullopt,
                                    bool is_causal = false, bool enable_gqa = false);

// A key/value cache for decoding one token at a time. Keys and values live in
// preallocated [B, H, max_len, D] buffers; update() writes the new tokens through a
// slice of each (an assign into a view, docs/semantics.md 20) and returns the keys
// and values cached so far as [B, H, T, D] slices. One token at a time, T is the
// variable ("T", 1, max_len) bound to the count, so every length runs the kernels
// compiled for the first; a prompt of n > 1 tokens is written at numeric positions.
class KVCache {
 public:
  KVCache(int64_t batch, int64_t heads, int64_t max_len, int64_t head_dim, DType dtype = DType::Float32);
  // Appends k and v ([B, H, n, D], the cache's dtype) after the tokens cached; returns
  // (keys, values) of every token cached, [B, H, T, D]. Lazy, like every op: the write
  // happens at the next realize that reads the cache. Error past max_len, or on a shape
  // or dtype that does not match the cache.
  std::pair<Tensor, Tensor> update(const Tensor& k, const Tensor& v);
  int64_t size() const { return size_; }  // tokens cached
  int64_t max_len() const { return max_len_; }
  // Keeps the first `length` tokens (an error past size()): the next update writes after them.
  void crop(int64_t length);
  void reset() { crop(0); }
  // The whole buffers, [B, H, max_len, D]; rows at and past size() hold stale or zero values.
  const Tensor& key_buffer() const { return keys_; }
  const Tensor& value_buffer() const { return values_; }

 private:
  Tensor keys_, values_;
  int64_t max_len_, size_ = 0;
  Variable length_;
};

// ---- losses (src/nn_losses.cpp): torch.nn.functional's, with its formulas ----

// How a loss combines its per-element values: their mean, their sum, or none (the
// per-element losses themselves), as PyTorch's `reduction`.
enum class Reduction { Mean, Sum, None };

// Mean over N of -log softmax(logits)[i, labels[i]]; logits [N, C] float,
// labels [N] Int32 or Int64. A realized label outside [0, C) is an error naming
// it (a lazy one cannot be read without running the graph: it contributes 0).
Tensor cross_entropy(const Tensor& logits, const Tensor& labels);
struct CrossEntropyOptions {
  Tensor weight;                        // [C] per-class weights; undefined: all 1
  std::optional<int64_t> ignore_index;  // labels equal to it add nothing (PyTorch's default -100
                                        // is not assumed: a stray -100 is an error here)
  double label_smoothing = 0;           // in [0, 1]: the target mixes in uniform 1/C
  Reduction reduction = Reduction::Mean;
};
// PyTorch's cross_entropy with its options: logits [N, C] or [N, C, d1, ...] (also [C]) and
// class indices [N] or [N, d1, ...] (also 0-d), or class probabilities of the logits' shape. A
// mean of class indices divides by the summed weights of the labels not ignored (NaN when all
// are); of probabilities, by the number of samples.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options);
// PyTorch's nll_loss: cross_entropy's rules on log-probabilities (no softmax, no smoothing).
Tensor nll_loss(const Tensor& log_probs, const Tensor& labels, const CrossEntropyOptions& options = {});
// -w (t log(p) + (1 - t) log(1 - p)), each log clamped at -100 as PyTorch does; p in [0, 1].
Tensor binary_cross_entropy(const Tensor& probs, const Tensor& target, Reduction reduction = Reduction::Mean,
                            const Tensor& weight = {});
// The same on logits, in PyTorch's stable form (1 - t) x + (1 + (pw - 1) t)(log1p(e^-|x|) + max(-x, 0));
// `pos_weight` (broadcast along the last axis) weighs the positive term, `weight` each element.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::Mean, const Tensor& weight = {},
                                        const Tensor& pos_weight = {});
// Mean of (pred - target)^2; shapes broadcast as in PyTorch.
Tensor mse(const Tensor& pred, const Tensor& target);
Tensor mse_loss(const Tensor& pred, const Tensor& target, Reduction reduction = Reduction::Mean);
// |pred - target|.
Tensor l1_loss(const Tensor& pred, const Tensor& target, Reduction reduction = Reduction::Mean);
// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta = 0: l1_loss).
Tensor smooth_l1_loss(const Tensor& pred, const Tensor& target, Reduction reduction = Reduction::Mean,
                      double beta = 1);
// 0.5 d^2 where |d| <= delta, else delta (|d| - 0.5 delta).
Tensor huber_loss(const Tensor& pred, const Tensor& target, Reduction reduction = Reduction::Mean,
                  double delta = 1);

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
