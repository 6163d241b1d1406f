// MaxPool2d and AvgPool2d: nn::functional's pooling with its arguments held.
#include "src/nn_common.hpp"

#include <loom/nn.hpp>

namespace loom::nn {

MaxPool2d::MaxPool2d(Size2d kernel, Size2d stride_, Size2d padding_, Size2d dilation_, bool return_indices,
                     bool ceil_mode_)
    : Module("MaxPool2d"),
      kernel_size(kernel),
      stride(stride_),
      padding(padding_),
      dilation(dilation_),
      ceil_mode(ceil_mode_) {
  if (return_indices)
    throw Error("MaxPool2d: return_indices = true is not implemented (forward returns one tensor)");
}

Tensor MaxPool2d::forward(const Tensor& x) const {
  detail_nn::check_float(x, "MaxPool2d");
  return functional::max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode);
}

AvgPool2d::AvgPool2d(Size2d kernel, Size2d stride_, Size2d padding_, bool ceil_mode_, bool count_include_pad_)
    : Module("AvgPool2d"),
      kernel_size(kernel),
      stride(stride_),
      padding(padding_),
      ceil_mode(ceil_mode_),
      count_include_pad(count_include_pad_) {}

Tensor AvgPool2d::forward(const Tensor& x) const {
  detail_nn::check_float(x, "AvgPool2d");
  return functional::avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
}

}  // namespace loom::nn
