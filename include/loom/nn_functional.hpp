#pragma once
// loom::nn::functional: PyTorch's torch.nn.functional convolutions, pooling, batch norm,
// dropout, padding and resizing, with its semantics and argument order. Every function is
// built from Tensor ops, so it differentiates and fuses like any other graph: a convolution
// is a sliding-window view of its input (index arithmetic, no im2col buffer) multiplied by
// the weight and summed. docs/api.md, "nn.functional", is the reference; docs/semantics.md
// lists the deviations. Included by <loom/nn.hpp>.
#include <loom/tensor.hpp>

#include <optional>
#include <string_view>
#include <vector>

namespace loom::nn::functional {

// A (height, width) pair where PyTorch takes an int or a pair: 2 means (2, 2). Default-made,
// it is unset (0, 0), which pooling reads as "the kernel size" for its stride.
struct Size2d {
  Size2d() = default;
  Size2d(int64_t both) : h(both), w(both) {}  // NOLINT: implicit, as PyTorch takes an int
  Size2d(int64_t h, int64_t w) : h(h), w(w) {}
  bool unset() const { return h == 0 && w == 0; }
  int64_t h = 0, w = 0;
};

// ---- padding and resizing ----

// F.pad: `pad` holds (before, after) pairs from the last axis backward, as in PyTorch.
// mode "constant" (fills `value`; a negative pad cuts), "reflect" (mirrors without repeating
// the edge; each pad < the axis size) or "replicate" (repeats the edge).
Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, std::string_view mode = "constant",
           double value = 0);

// F.interpolate of x [N, C, H, W] to `size`, or to floor(H * scale_factor) x floor(W * scale_factor)
// when size is unset; mode "nearest" or "bilinear" (align_corners as PyTorch's).
Tensor interpolate(const Tensor& x, Size2d size = {}, std::optional<double> scale_factor = std::nullopt,
                   std::string_view mode = "nearest", bool align_corners = false);

// ---- convolution: x [N, C_in, H, W], w [C_out, C_in / groups, kh, kw], b [C_out] or undefined ----

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b = {}, Size2d stride = {1, 1},
              Size2d padding = {0, 0}, Size2d dilation = {1, 1}, int64_t groups = 1);
// x [N, C_in, L], w [C_out, C_in / groups, k].
Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b = {}, int64_t stride = 1, int64_t padding = 0,
              int64_t dilation = 1, int64_t groups = 1);
// The gradient of conv2d with respect to its input: w [C_in, C_out / groups, kh, kw];
// output (H - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b = {}, Size2d stride = {1, 1},
                        Size2d padding = {0, 0}, Size2d output_padding = {0, 0}, int64_t groups = 1,
                        Size2d dilation = {1, 1});

// ---- pooling over the last two axes of x [N, C, H, W] or [C, H, W]; stride unset = kernel ----

// Padding is -inf. The gradient goes to the first maximum of each window (row-major), as PyTorch's.
// ceil_mode = true is not implemented (an error).
Tensor max_pool2d(const Tensor& x, Size2d kernel, Size2d stride = {}, Size2d padding = {0, 0},
                  Size2d dilation = {1, 1}, bool ceil_mode = false);
// The window's sum over kh * kw, or over the elements inside the input when !count_include_pad.
Tensor avg_pool2d(const Tensor& x, Size2d kernel, Size2d stride = {}, Size2d padding = {0, 0},
                  bool ceil_mode = false, bool count_include_pad = true);
// Output cell i averages input rows floor(i * H / h) to ceil((i + 1) * H / h), as PyTorch's.
Tensor adaptive_avg_pool2d(const Tensor& x, Size2d output_size);

// ---- normalization and regularisation ----

// F.batch_norm over x [N, C, ...] per channel C. In training, normalises by the batch's mean and
// biased variance and, when defined, assigns running_mean and running_var (the unbiased variance)
// their momentum updates, as PyTorch; otherwise normalises by the running statistics.
// weight and bias [C] may be undefined.
Tensor batch_norm(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight = {},
                  const Tensor& bias = {}, bool training = false, double momentum = 0.1, double eps = 1e-5);

// In training, zeroes each element with probability p (loom's generator, manual_seed) and scales
// the rest by 1 / (1 - p); otherwise x. p must be in [0, 1).
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);

}  // namespace loom::nn::functional
