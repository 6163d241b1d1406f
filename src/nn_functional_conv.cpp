// Convolutions as index arithmetic: the padded input's sliding windows (src/window.hpp, a view)
// times the weight, summed over (C_in / groups, kh, kw). Rangeify turns the view into
// x[n, c, i*s + ki*d, j*s + kj*d], so a conv2d forward is one kernel that reads x and w in
// place, with no im2col buffer. conv_transpose2d is a conv2d of the padded input with the
// flipped, channel-swapped weight, and a strided one a strided conv2d's dx by output phase
// (src/nn_conv_phase.hpp). Each declares its own gradient (src/custom_gradient.hpp),
// as the movement ops' rules would turn the window view into a scatter (a reduce over the
// view's repeats, indexed by divmods): a conv2d's dx is a conv_transpose2d of dy and a
// conv_transpose2d's dx a conv2d of dy, each a forward-shaped window reduce that gathers; dw
// is a correlation of the input's windows with dy, reduced over batch and output positions.
#include "src/autocast.hpp"
#include "src/custom_gradient.hpp"
#include "src/half_compute.hpp"
#include "src/nn_conv_correlate.hpp"
#include "src/nn_conv_phase.hpp"
#include "src/tensor_ops.hpp"
#include "src/window.hpp"

#include <loom/nn_functional.hpp>

namespace loom::nn::functional {

using detail::str;

namespace {

void check_positive(Size2d v, const char* what, const char* op) {
  if (v.h <= 0 || v.w <= 0)
    throw Error(fmt::format("{}: {} must be positive, got ({}, {})", op, what, v.h, v.w));
}

// The checks every convolution shares; x is [N, C_in, H, W] and w [C_out, C_in / groups, kh, kw].
void check_conv(const Tensor& x, const Tensor& w, const Tensor& b, int64_t groups, const char* op) {
  const Shape &xs = detail::uop(x, op)->shape().value(), &ws = detail::uop(w, op)->shape().value();
  if (xs.size() != 4 || ws.size() != 4)
    throw Error(
        fmt::format("{}: expected a 4-D input [N, C, H, W] and a 4-D weight, got input {} and weight {}", op,
                    str(xs), str(ws)));
  if (!x.dtype().is_float() || x.dtype() != w.dtype())
    throw Error(fmt::format("{}: input ({}) and weight ({}) must share one float dtype", op,
                            scalar_name(x.dtype().scalar), scalar_name(w.dtype().scalar)));
  if (groups <= 0) throw Error(fmt::format("{}: groups must be positive, got {}", op, groups));
  if (xs[1] % groups != 0)
    throw Error(fmt::format("{}: groups = {} does not divide the input's {} channels (input {})", op, groups,
                            xs[1], str(xs)));
  if (b.defined() && (b.dtype() != x.dtype() || b.ndim() != 1))
    throw Error(fmt::format("{}: bias must be 1-D of the input's dtype {}, got {} of {}", op,
                            scalar_name(x.dtype().scalar), str(b.shape()), scalar_name(b.dtype().scalar)));
}

}  // namespace

namespace detail_conv {

// conv2d on an input already padded: windows [N, C, oh, ow, kh, kw] split by group, times the
// weight split by group, summed over (C / groups, kh, kw).
Tensor correlate(const Tensor& xp, const Tensor& w, const Tensor& b, Size2d stride, Size2d dilation,
                 int64_t groups, const char* op) {
  const Shape &xs = xp.shape(), &ws = w.shape();
  const Dim n = xs[0];  // the batch may be symbolic
  const int64_t cin = xs[1], cout = ws[0], kh = ws[2], kw = ws[3];
  for (int a : {2, 3}) {
    const int64_t k = ws[a], d = a == 2 ? dilation.h : dilation.w;
    if (d * (k - 1) + 1 > xs[a])
      throw Error(
          fmt::format("{}: the kernel {} (dilated to {}) is larger than the padded input {} on axis {}", op,
                      str(ws), d * (k - 1) + 1, str(xs), a));
  }
  const Tensor win = detail::sliding_windows(xp, {kh, kw}, {stride.h, stride.w}, {dilation.h, dilation.w});
  const int64_t oh = win.shape()[2], ow = win.shape()[3], cg = cin / groups, og = cout / groups;
  // The taps (kh, kw) outside the channels in the sum: a padded read's mask depends on the tap,
  // not the channel, so it is computed once per tap rather than once per product.
  const std::vector<int> taps_first{0, 1, 2, 6, 7, 3, 4, 5};
  const Tensor xg = win.reshape({n, groups, 1, cg, oh, ow, kh, kw}).permute(taps_first);
  const Tensor wg = w.reshape({1, groups, og, cg, 1, 1, kh, kw}).permute(taps_first);
  Tensor y = (xg * wg).sum({3, 4, 5}).reshape({n, cout, oh, ow});
  if (b.defined()) y = y + b.reshape({1, cout, 1, 1});
  return y;
}

// The weight's gradient of a correlation of `input` [N, C_in, H, W] that gave `grad`
// [N, C_out, oh, ow]: dw[co, ci, ki, kj] = sum over n, i, j of
// grad[n, co, i, j] * input_padded[n, g*C_in/groups + ci, i*s + ki*d, j*s + kj*d], the same
// window view as the forward's, so it reads both in place. [C_out, C_in / groups, kh, kw].
// The windows may outnumber grad's positions (a transposed conv's output_padding): the first
// oh x ow are the ones used.
Tensor weight_grad(const Tensor& input, const Tensor& grad, int64_t kh, int64_t kw, Size2d stride,
                   Size2d padding, Size2d dilation, int64_t groups) {
  const Shape &xs = input.shape(), &gs = grad.shape();
  const Dim n = xs[0];  // the batch may be symbolic
  const int64_t cin = xs[1], cout = gs[1], oh = gs[2], ow = gs[3], cg = cin / groups, og = cout / groups;
  const Tensor xp = input.pad({{0, 0}, {0, 0}, {padding.h, padding.h}, {padding.w, padding.w}});
  Tensor win = detail::sliding_windows(xp, {kh, kw}, {stride.h, stride.w}, {dilation.h, dilation.w});
  if (win.shape()[2] != oh || win.shape()[3] != ow)
    win = win.shrink({{0, n}, {0, cin}, {0, oh}, {0, ow}, {0, kh}, {0, kw}});
  const Tensor xg = win.reshape({n, groups, 1, cg, oh, ow, kh, kw});
  const Tensor gg = grad.reshape({n, groups, og, 1, oh, ow, 1, 1});
  return (xg * gg).sum({0, 4, 5}).reshape({cout, cg, kh, kw});
}

}  // namespace detail_conv

using detail_conv::correlate;
using detail_conv::weight_grad;
using loom::detail::widened_half;

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, Size2d stride, Size2d padding,
              Size2d dilation, int64_t groups) {
  const char* op = "conv2d";
  // Under Autocast: bf16- or f16-rounded operands, products and sums in Float32, the result rounded
  // once to the autocast dtype (src/autocast.hpp).
  if (loom::detail::autocasts({&x, &w, &b})) {
    // The operands are rounded while the scope is on: out of it, autocast_dtype() is empty.
    const Tensor xr = loom::detail::autocast_operand(x), wr = loom::detail::autocast_operand(w),
                 br = loom::detail::autocast_operand(b);
    const Autocast off(*autocast_dtype(), false);
    return conv2d(xr, wr, br, stride, padding, dilation, groups);
  }
  check_conv(x, w, b, groups, op);
  // Halves: products and sums in Float32 (the products are exact there), the bias added there
  // too, the result rounded once (src/half_compute.hpp), as PyTorch's CPU convolution.
  if (loom::detail::is_half(x))
    return conv2d(widened_half(x), widened_half(w), widened_half(b), stride, padding, dilation, groups)
        .cast(x.dtype());
  check_positive(stride, "stride", op);
  check_positive(dilation, "dilation", op);
  if (padding.h < 0 || padding.w < 0)
    throw Error(fmt::format("{}: padding must be non-negative, got ({}, {})", op, padding.h, padding.w));
  const Shape &xs = x.shape(), &ws = w.shape();
  if (ws[1] * groups != xs[1])
    throw Error(
        fmt::format("{}: input {} has {} channels but weight {} with groups = {} expects {} ({} x {})", op,
                    str(xs), xs[1], str(ws), groups, ws[1] * groups, ws[1], groups));
  if (ws[0] % groups != 0)
    throw Error(fmt::format("{}: groups = {} does not divide the weight's {} output channels (weight {})", op,
                            groups, ws[0], str(ws)));
  if (b.defined() && b.shape()[0] != ws[0])
    throw Error(fmt::format("{}: bias {} does not match the weight's {} output channels (weight {})", op,
                            str(b.shape()), ws[0], str(ws)));
  const Tensor xp = x.pad({{0, 0}, {0, 0}, {padding.h, padding.h}, {padding.w, padding.w}});
  // A strided conv runs as stride-1 convs over phases (src/nn_conv_phase.hpp): its windows
  // read x s floats apart, and its transposed conv would spread dy by the stride, most of its
  // products with zeros, each behind a divide.
  const bool strided = stride.h > 1 || stride.w > 1;
  const bool by_phase = detail_conv::forward_by_phase(stride, dilation);
  Tensor forward = correlate(xp, w, {}, stride, dilation, groups, op);  // checks the kernel fits
  const bool by_columns = detail_conv::forward_by_columns(xs[3], ws[3], stride, dilation);
  if (by_columns)
    forward = detail_conv::conv2d_by_columns(x, w, stride, padding, dilation, groups);
  else if (by_phase)
    forward = detail_conv::conv2d_by_phase(x, w, stride, padding, dilation, groups);
  const Tensor y = detail::with_gradient(
      forward, {x, w},
      [stride, padding, dilation, groups, strided, by_phase, by_columns](const std::vector<Tensor>& in,
                                                                         const Tensor& g) {
        const Tensor &xi = in[0], &wi = in[1];
        const int64_t kh = wi.shape()[2], kw = wi.shape()[3];
        if (strided)
          return std::vector<Tensor>{
              detail_conv::input_grad_by_phase(g, wi, {xi.shape()[2], xi.shape()[3]}, stride, padding,
                                               dilation, groups),
              by_columns
                  ? detail_conv::weight_grad_by_columns(xi, g, {kh, kw}, stride, padding, dilation, groups)
              : by_phase
                  ? detail_conv::weight_grad_by_phase(xi, g, {kh, kw}, stride, padding, dilation, groups)
                  : weight_grad(xi, g, kh, kw, stride, padding, dilation, groups)};
        // The output_padding that gives the transposed conv x's size: the rows past the last window.
        auto rest = [&](int64_t size, int64_t k, int64_t s, int64_t p, int64_t d) {
          return (size + 2 * p - d * (k - 1) - 1) % s;
        };
        const Size2d extra{rest(xi.shape()[2], kh, stride.h, padding.h, dilation.h),
                           rest(xi.shape()[3], kw, stride.w, padding.w, dilation.w)};
        return std::vector<Tensor>{conv_transpose2d(g, wi, {}, stride, padding, extra, groups, dilation),
                                   weight_grad(xi, g, kh, kw, stride, padding, dilation, groups)};
      });
  return b.defined() ? y + b.reshape({1, ws[0], 1, 1}) : y;
}

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  const Shape &xs = detail::uop(x, "conv1d")->shape().value(),
              &ws = detail::uop(w, "conv1d")->shape().value();
  if (xs.size() != 3 || ws.size() != 3)
    throw Error(
        fmt::format("conv1d: expected a 3-D input [N, C, L] and a 3-D weight [C_out, C_in / groups, k], "
                    "got input {} and weight {}",
                    str(xs), str(ws)));
  return conv2d(x.unsqueeze(2), w.unsqueeze(2), b, {1, stride}, {0, padding}, {1, dilation}, groups)
      .squeeze(2);
}

// PyTorch's transposed convolution: every input element spreads the weight over the output.
// Equivalently, the input with stride - 1 zeros between elements, padded by d*(k-1) - p before
// and d*(k-1) - p + output_padding after (cut where negative), correlated with the weight
// flipped in space and with its in and out channels swapped per group.
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b, Size2d stride, Size2d padding,
                        Size2d output_padding, int64_t groups, Size2d dilation) {
  const char* op = "conv_transpose2d";
  if (loom::detail::autocasts({&x, &w, &b})) {
    const Tensor xr = loom::detail::autocast_operand(x), wr = loom::detail::autocast_operand(w),
                 br = loom::detail::autocast_operand(b);
    const Autocast off(*autocast_dtype(), false);
    return conv_transpose2d(xr, wr, br, stride, padding, output_padding, groups, dilation);
  }
  check_conv(x, w, b, groups, op);
  if (loom::detail::is_half(x))  // in Float32, rounded once, as conv2d
    return conv_transpose2d(widened_half(x), widened_half(w), widened_half(b), stride, padding,
                            output_padding, groups, dilation)
        .cast(x.dtype());
  check_positive(stride, "stride", op);
  check_positive(dilation, "dilation", op);
  const Shape &xs = x.shape(), &ws = w.shape();
  if (ws[0] != xs[1])
    throw Error(
        fmt::format("{}: input {} has {} channels but weight {} expects {} (weight [C_in, C_out / groups, "
                    "kh, kw])",
                    op, str(xs), xs[1], str(ws), ws[0]));
  const int64_t cin = xs[1], og = ws[1], cout = og * groups;
  if (b.defined() && b.shape()[0] != cout)
    throw Error(fmt::format("{}: bias {} does not match the {} output channels (weight {}, groups = {})", op,
                            str(b.shape()), cout, str(ws), groups));
  const int64_t sz[2] = {stride.h, stride.w}, pd[2] = {padding.h, padding.w},
                opd[2] = {output_padding.h, output_padding.w}, dl[2] = {dilation.h, dilation.w};
  int64_t out[2];
  for (int a = 0; a < 2; ++a) {
    if (pd[a] < 0 || opd[a] < 0)
      throw Error(fmt::format("{}: padding ({}, {}) and output_padding ({}, {}) must be non-negative", op,
                              pd[0], pd[1], opd[0], opd[1]));
    if (opd[a] >= std::max(sz[a], dl[a]))
      throw Error(
          fmt::format("{}: output_padding {} on axis {} must be smaller than the stride {} or the "
                      "dilation {}",
                      op, opd[a], a + 2, sz[a], dl[a]));
    out[a] = (xs[a + 2] - 1) * sz[a] - 2 * pd[a] + dl[a] * (ws[a + 2] - 1) + opd[a] + 1;
    if (out[a] <= 0)
      throw Error(
          fmt::format("{}: input {} with weight {}, stride {}, padding {} gives an output of size {} on "
                      "axis {}",
                      op, str(xs), str(ws), sz[a], pd[a], out[a], a + 2));
  }
  // A strided transposed conv is a strided conv2d's dx: gathered by output phase
  // (src/nn_conv_phase.hpp), not as the correlation of the input with s - 1 zeros inserted
  // between its elements, most of whose products would be with those zeros.
  auto transposed = [&] {
    if (sz[0] > 1 || sz[1] > 1)
      return detail_conv::input_grad_by_phase(x, w, {out[0], out[1]}, stride, padding, dilation, groups);
    std::vector<std::pair<int64_t, int64_t>> grow(4, {0, 0});
    std::vector<std::pair<Dim, Dim>> cut;
    for (const Dim& d : xs) cut.emplace_back(0, d);
    for (int a = 0; a < 2; ++a) {
      const int64_t lo = dl[a] * (ws[a + 2] - 1) - pd[a], hi = lo + opd[a];
      grow[a + 2] = {std::max<int64_t>(lo, 0), std::max<int64_t>(hi, 0)};
      const int64_t size = xs[a + 2] + grow[a + 2].first + grow[a + 2].second;
      cut[a + 2] = {std::max<int64_t>(-lo, 0), size - std::max<int64_t>(-hi, 0)};
    }
    const Tensor xp = x.pad(grow).shrink(cut);
    const int64_t cg = cin / groups, kh = ws[2], kw = ws[3];
    const Tensor wt =
        w.reshape({groups, cg, og, kh, kw}).transpose(1, 2).flip({3, 4}).reshape({cout, cg, kh, kw});
    return correlate(xp, wt, {}, {1, 1}, dilation, groups, op);
  };
  const Tensor y = detail::with_gradient(
      transposed(), {x, w},
      [stride, padding, dilation, groups](const std::vector<Tensor>& in, const Tensor& g) {
        const Tensor &xi = in[0], &wi = in[1];
        const Shape& is = xi.shape();
        // The conv2d of dy reaches x's rows, and past them when output_padding >= stride.
        Tensor dx = conv2d(g, wi, {}, stride, padding, dilation, groups);
        if (dx.shape() != is) dx = dx.shrink({{0, is[0]}, {0, is[1]}, {0, is[2]}, {0, is[3]}});
        const Size2d kernel{wi.shape()[2], wi.shape()[3]};
        return std::vector<Tensor>{
            dx, detail_conv::forward_by_phase(stride, dilation)
                    ? detail_conv::weight_grad_by_phase(g, xi, kernel, stride, padding, dilation, groups)
                    : weight_grad(g, xi, kernel.h, kernel.w, stride, padding, dilation, groups)};
      });
  return b.defined() ? y + b.reshape({1, cout, 1, 1}) : y;
}

}  // namespace loom::nn::functional
