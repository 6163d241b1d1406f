#pragma once
// A strided convolution as stride-1 convolutions over phases. Along an axis of stride s, the
// padded input's row s*a + r is phase r's row a, and the dilated kernel's position t = s*m + r
// is phase r's tap m: y[i] = sum over r, m of xp_r[i + m] * w_r[m], a stride-1 correlation of
// the s*s phase images (as channels) with the phase-split kernel, whose windows read rows and
// columns one apart instead of s apart; and x's row s*a + r - p receives only phase r's taps,
// dx_r[a] = sum over m of dy[a - m] * w_r[m], a stride-1 correlation of dy with the flipped
// phase kernel, so no product is with the zeros a transposed conv inserts between dy's
// elements. The kernel is padded to M = ceil(K / s) taps a phase (K = d*(k - 1) + 1), the
// positions between dilated taps and past the last being zero weights. src/ only.
#include <loom/nn_functional.hpp>
#include <loom/tensor.hpp>

namespace loom::nn::functional::detail_conv {

// Whether a strided conv's forward and weight gradient go by phase: along each strided axis
// the kernel is undilated, so the split adds fewer than s zero taps (and a kernel shorter than
// the stride reads only its first k phases). A dilated kernel's phase kernel would be mostly
// zeros (d - 1 of every d positions), and the window view, which reads only the rows it needs,
// does less. The input gradient goes by phase whenever the conv is strided.
bool forward_by_phase(Size2d stride, Size2d dilation);

// conv2d(x, w, stride, padding, dilation, groups) without bias, as the correlation of x's
// phase images [N, C_in*Qh*Qw, oh + Mh - 1, ow + Mw - 1] (Q = min(s, K) phases that hold a
// tap; channel c*Qh*Qw + r*Qw + q holds xp[c, sh*a + r, sw*b + q]; stored, one copy of x at
// most, so the windows read contiguous rows) with the phase kernel [C_out, cg*Qh*Qw, Mh, Mw].
// The caller checks the shapes.
Tensor conv2d_by_phase(const Tensor& x, const Tensor& w, Size2d stride, Size2d padding, Size2d dilation,
                       int64_t groups);

// Whether conv2d_by_columns applies: a column stride above 1 that divides the width, undilated
// columns, and a kernel at least as wide as the stride (so every column phase holds a tap).
bool forward_by_columns(int64_t width, int64_t kernel_w, Size2d stride, Size2d dilation);

// conv2d(x, w, stride, padding, dilation, groups) without bias, only its columns split by
// phase (the lanes run along a row, so only the columns need to be one float apart; the rows
// are read at the stride in place): x's sw column phases [N, C_in*sw, H + 2*ph, ow + M - 1]
// (channel c*sw + r holds x[c, h, sw*b + r], padded; stored) correlated at stride (sh, 1) with
// the column-phase kernel [C_out, cg*sw, kh, M], M taps a phase, zero where no tap sits. A 7x7
// of stride 2 then sums 7 x 8 taps of which 7 x 7 are real, where conv2d_by_phase sums 8 x 8.
Tensor conv2d_by_columns(const Tensor& x, const Tensor& w, Size2d stride, Size2d padding, Size2d dilation,
                         int64_t groups);

// Its weight's gradient given dy = grad: the same column images (one node) correlated with dy,
// [C_out, cg*sw, kh, M], stored, back to [C_out, cg, kh, kw].
Tensor weight_grad_by_columns(const Tensor& x, const Tensor& grad, Size2d kernel, Size2d stride,
                              Size2d padding, Size2d dilation, int64_t groups);

// conv2d_by_phase's weight's gradient given dy = grad: the phase images correlated with dy (the
// same stored images as the forward's, one node), [C_out, cg*Qh*Qw, Mh, Mw], back to [C_out, cg, kh, kw].
Tensor weight_grad_by_phase(const Tensor& x, const Tensor& grad, Size2d kernel, Size2d stride, Size2d padding,
                            Size2d dilation, int64_t groups);

// The gradient with respect to x [N, C_in, size.h, size.w] of conv2d(x, w, stride, padding,
// dilation, groups) that gave dy = grad: one stride-1 correlation of dy with the flipped,
// channel-swapped phase kernel gives every phase that holds a tap as a channel, [N,
// C_in*Qh*Qw, A, B], and a copy interleaves them, zeros for the rest, into x's rows (A*s >= p
// + size). Rows past the last window get zero.
// `size` may be any size the windows reach or pass (a transposed conv's output_padding): this
// is also a strided conv_transpose2d's forward.
Tensor input_grad_by_phase(const Tensor& grad, const Tensor& w, Size2d size, Size2d stride, Size2d padding,
                           Size2d dilation, int64_t groups);

}  // namespace loom::nn::functional::detail_conv
