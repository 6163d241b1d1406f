#pragma once
// The two window reduces every convolution is made of (src/nn_functional_conv.cpp): the
// correlation of a padded input with a weight, and the weight's gradient of one. src/ only.
#include <loom/nn_functional.hpp>
#include <loom/tensor.hpp>

namespace loom::nn::functional::detail_conv {

// conv2d on an input already padded, xp [N, C_in, H, W] with w [C_out, C_in / groups, kh, kw]:
// windows [N, C, oh, ow, kh, kw] split by group, times the weight split by group, summed over
// (C_in / groups, kh, kw); plus b when defined. `op` names the caller in errors.
Tensor correlate(const Tensor& xp, const Tensor& w, const Tensor& b, Size2d stride, Size2d dilation,
                 int64_t groups, const char* op);

// The weight's gradient of a correlation of `input` [N, C_in, H, W] (padded by `padding` first)
// that gave `grad` [N, C_out, oh, ow]: [C_out, C_in / groups, kh, kw]. The windows may
// outnumber grad's positions (a transposed conv's output_padding): the first oh x ow are used.
Tensor weight_grad(const Tensor& input, const Tensor& grad, int64_t kh, int64_t kw, Size2d stride,
                   Size2d padding, Size2d dilation, int64_t groups);

}  // namespace loom::nn::functional::detail_conv
