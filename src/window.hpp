#pragma once
// Sliding windows as a view built from movement ops only (repeat, reshape, shrink, permute),
// so rangeify turns a window into index arithmetic (x[o*s + k*d]) and a pool or convolution
// reads its input in place: no buffer of the windows' shape. src/ only.
#include <loom/tensor.hpp>

#include <vector>

namespace loom::detail {

// The windows of size kernel[j] with stride[j] and dilation[j] over the last kernel.size()
// axes of x: [..., i_1, ..., i_m] -> [..., o_1, ..., o_m, k_1, ..., k_m] with
// o_j = (i_j - d_j*(k_j - 1) - 1) / s_j + 1 and element [.., o, k] = x[.., o*s + k*d]. The
// caller checks that every window fits (d*(k - 1) + 1 <= i) and that k, s and d are positive.
Tensor sliding_windows(const Tensor& x, const std::vector<int64_t>& kernel,
                       const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation);

}  // namespace loom::detail
