// Conv1d, Conv2d and ConvTranspose2d: parameters with PyTorch's default
// initialisation, forwarded to nn::functional's convolutions.
#include "src/autocast.hpp"
#include "src/nn_common.hpp"

#include <loom/gradient.hpp>
#include <loom/nn.hpp>

#include <cmath>
#include <tuple>

namespace loom::nn {

using detail::str;

namespace {

void check_channels(const char* op, int64_t in, int64_t out, int64_t groups) {
  if (in <= 0 || out <= 0)
    throw Error(fmt::format("{}: in_channels and out_channels must be positive, got {} and {}", op, in, out));
  if (groups <= 0) throw Error(fmt::format("{}: groups must be positive, got {}", op, groups));
  if (in % groups != 0 || out % groups != 0)
    throw Error(fmt::format("{}: groups = {} must divide in_channels = {} and out_channels = {}", op, groups,
                            in, out));
}

void check_positive(const char* op, const char* what, Size2d s) {
  if (s.h <= 0 || s.w <= 0)
    throw Error(fmt::format("{}: {} must be positive, got ({}, {})", op, what, s.h, s.w));
}

void check_non_negative(const char* op, const char* what, Size2d s) {
  if (s.h < 0 || s.w < 0)
    throw Error(fmt::format("{}: {} must be non-negative, got ({}, {})", op, what, s.h, s.w));
}

// The checks every convolution module makes of its sizes, naming the module.
void check_sizes(const char* op, int64_t in, int64_t out, int64_t groups, Size2d kernel, Size2d stride,
                 Size2d dilation, Size2d padding) {
  check_channels(op, in, out, groups);
  check_positive(op, "kernel_size", kernel);
  check_positive(op, "stride", stride);
  check_positive(op, "dilation", dilation);
  check_non_negative(op, "padding", padding);
}

// PyTorch's _ConvNd.reset_parameters: kaiming_uniform_(weight, a = sqrt(5)), whose bound
// is 1/sqrt(fan_in), and the bias uniform on the same bound; fan_in comes from the weight
// ([_, fan_in / receptive, k...]), so a transposed convolution uses out / groups.
std::pair<Tensor, Tensor> conv_parameters(const Shape& weight_shape, bool with_bias, int64_t bias_size) {
  Tensor w = Tensor::zeros(weight_shape).realize();
  kaiming_uniform_(w, std::sqrt(5.0));
  Tensor b;
  if (with_bias) {
    double fan_in = 1;
    for (size_t i = 1; i < weight_shape.size(); ++i) fan_in *= static_cast<double>(weight_shape[i]);
    const double bound = 1 / std::sqrt(fan_in);
    b = Tensor::zeros({bias_size}).realize();
    uniform_(b, -bound, bound);
    b = detail_nn::parameter(b);
  }
  return {detail_nn::parameter(w), b};
}

// x is float, of rank `rank` or `rank - 1` (unbatched), with `channels` on its channel axis,
// and has the weight's dtype.
void check_input(const char* op, const Tensor& x, int64_t rank, int64_t channels, const Tensor& weight,
                 const char* layout) {
  detail_nn::check_float(x, op);
  const bool rank_ok = x.ndim() == rank || x.ndim() == rank - 1;
  if (!rank_ok || x.shape()[x.ndim() - rank + 1] != channels)
    throw Error(fmt::format("{}: expected input of shape {} with C = in_channels = {}, got {}", op, layout,
                            channels, str(x.shape())));
  if (!loom::detail::autocasts({&x, &weight})) detail_nn::check_same_dtype(op, x, "input", weight, "weight");
}

// Runs a batched convolution on an unbatched input by adding and removing the batch axis.
template <class F>
Tensor batched(const Tensor& x, int64_t rank, F&& f) {
  if (x.ndim() == rank) return f(x);
  return f(x.unsqueeze(0)).squeeze(0);
}

}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, Size2d kernel, Size2d stride_, Size2d padding_, Size2d dilation_,
               int64_t groups_, bool with_bias)
    : Module("Conv2d"),
      in_channels(in),
      out_channels(out),
      kernel_size(kernel),
      stride(stride_),
      padding(padding_),
      dilation(dilation_),
      groups(groups_) {
  register_parameter("weight", &Conv2d::weight);
  register_parameter("bias", &Conv2d::bias);
  check_sizes("Conv2d", in, out, groups, kernel, stride, dilation, padding);
  std::tie(weight, bias) = conv_parameters({out, in / groups, kernel.h, kernel.w}, with_bias, out);
}

Tensor Conv2d::forward(const Tensor& x) const {
  check_input("Conv2d", x, 4, in_channels, weight, "[N, C, H, W] or [C, H, W]");
  return batched(x, 4, [&](const Tensor& xb) {
    return functional::conv2d(xb, weight, bias, stride, padding, dilation, groups);
  });
}

Conv1d::Conv1d(int64_t in, int64_t out, int64_t kernel, int64_t stride_, int64_t padding_, int64_t dilation_,
               int64_t groups_, bool with_bias)
    : Module("Conv1d"),
      in_channels(in),
      out_channels(out),
      kernel_size(kernel),
      stride(stride_),
      padding(padding_),
      dilation(dilation_),
      groups(groups_) {
  register_parameter("weight", &Conv1d::weight);
  register_parameter("bias", &Conv1d::bias);
  check_sizes("Conv1d", in, out, groups, {kernel, kernel}, {stride, stride}, {dilation, dilation},
              {padding, padding});
  std::tie(weight, bias) = conv_parameters({out, in / groups, kernel}, with_bias, out);
}

Tensor Conv1d::forward(const Tensor& x) const {
  check_input("Conv1d", x, 3, in_channels, weight, "[N, C, L] or [C, L]");
  return batched(x, 3, [&](const Tensor& xb) {
    return functional::conv1d(xb, weight, bias, stride, padding, dilation, groups);
  });
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, Size2d kernel, Size2d stride_, Size2d padding_,
                                 Size2d output_padding_, int64_t groups_, bool with_bias, Size2d dilation_)
    : Module("ConvTranspose2d"),
      in_channels(in),
      out_channels(out),
      kernel_size(kernel),
      stride(stride_),
      padding(padding_),
      output_padding(output_padding_),
      groups(groups_),
      dilation(dilation_) {
  register_parameter("weight", &ConvTranspose2d::weight);
  register_parameter("bias", &ConvTranspose2d::bias);
  check_sizes("ConvTranspose2d", in, out, groups, kernel, stride, dilation, padding);
  check_non_negative("ConvTranspose2d", "output_padding", output_padding);
  if ((output_padding.h >= stride.h && output_padding.h >= dilation.h) ||
      (output_padding.w >= stride.w && output_padding.w >= dilation.w))
    throw Error(
        fmt::format("ConvTranspose2d: output_padding ({}, {}) must be smaller than the stride ({}, {}) or "
                    "the dilation ({}, {})",
                    output_padding.h, output_padding.w, stride.h, stride.w, dilation.h, dilation.w));
  std::tie(weight, bias) = conv_parameters({in, out / groups, kernel.h, kernel.w}, with_bias, out);
}

Tensor ConvTranspose2d::forward(const Tensor& x) const {
  check_input("ConvTranspose2d", x, 4, in_channels, weight, "[N, C, H, W] or [C, H, W]");
  return batched(x, 4, [&](const Tensor& xb) {
    return functional::conv_transpose2d(xb, weight, bias, stride, padding, output_padding, groups, dilation);
  });
}

}  // namespace loom::nn
