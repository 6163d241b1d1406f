// Pooling over sliding windows (src/window.hpp): max and average pools reduce each window of the
// padded input, a view, so they read the input in place. max_pool2d selects the first maximum of
// each window (row-major) with a one-hot mask, so its gradient goes there alone, as PyTorch's
// (a max reduce would split a tie). adaptive_avg_pool2d multiplies by two averaging matrices.
#include "src/half_compute.hpp"
#include "src/tensor_ops.hpp"
#include "src/window.hpp"

#include <loom/nn_functional.hpp>

namespace loom::nn::functional {

using detail::str;

namespace {

struct Window {
  Size2d kernel, stride, padding, dilation;
};

// x [N, C, H, W] or [C, H, W]; a float tensor for pools that pad with -inf or divide.
Window check_pool(const Tensor& x, Size2d kernel, Size2d stride, Size2d padding, Size2d dilation,
                  bool ceil_mode, const char* op) {
  const Shape& xs = detail::uop(x, op)->shape().value();
  if (xs.size() != 3 && xs.size() != 4)
    throw Error(fmt::format("{}: expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got {}", op, str(xs)));
  if (!x.dtype().is_float())
    throw Error(fmt::format("{}: expected a float input, got {}", op, scalar_name(x.dtype().scalar)));
  if (ceil_mode) throw Error(fmt::format("{}: ceil_mode = true is not implemented", op));
  if (kernel.h <= 0 || kernel.w <= 0)
    throw Error(fmt::format("{}: the pooling window ({}, {}) must be positive (input {})", op, kernel.h,
                            kernel.w, str(xs)));
  if (stride.unset()) stride = kernel;
  if (stride.h <= 0 || stride.w <= 0 || dilation.h <= 0 || dilation.w <= 0)
    throw Error(fmt::format("{}: stride ({}, {}) and dilation ({}, {}) must be positive", op, stride.h,
                            stride.w, dilation.h, dilation.w));
  if (padding.h < 0 || padding.w < 0 || 2 * padding.h > kernel.h || 2 * padding.w > kernel.w)
    throw Error(
        fmt::format("{}: padding ({}, {}) must be between 0 and half the window ({}, {}), as in PyTorch", op,
                    padding.h, padding.w, kernel.h, kernel.w));
  const int64_t h = xs[xs.size() - 2] + 2 * padding.h, w = xs[xs.size() - 1] + 2 * padding.w;
  if (dilation.h * (kernel.h - 1) + 1 > h || dilation.w * (kernel.w - 1) + 1 > w)
    throw Error(
        fmt::format("{}: the window ({}, {}) with dilation ({}, {}) is larger than the padded input {}x{} "
                    "(input {}, padding ({}, {}))",
                    op, kernel.h, kernel.w, dilation.h, dilation.w, h, w, str(xs), padding.h, padding.w));
  return {kernel, stride, padding, dilation};
}

// The padded input's windows, [..., oh, ow, kh * kw].
Tensor windows(const Tensor& x, const Window& win, double pad_value) {
  std::vector<std::pair<int64_t, int64_t>> pads(x.ndim(), {0, 0});
  pads[x.ndim() - 2] = {win.padding.h, win.padding.h};
  pads[x.ndim() - 1] = {win.padding.w, win.padding.w};
  const Tensor w = detail::sliding_windows(x.pad(pads, pad_value), {win.kernel.h, win.kernel.w},
                                           {win.stride.h, win.stride.w}, {win.dilation.h, win.dilation.w});
  return w.flatten(-2, -1);
}

}  // namespace

Tensor max_pool2d(const Tensor& x, Size2d kernel, Size2d stride, Size2d padding, Size2d dilation,
                  bool ceil_mode) {
  const Window win = check_pool(x, kernel, stride, padding, dilation, ceil_mode, "max_pool2d");
  const Tensor w = windows(x, win, -std::numeric_limits<double>::infinity());
  const int64_t k = win.kernel.h * win.kernel.w;
  // The first maximum: the largest k - position among the elements equal to the max (or NaN).
  const Tensor top = w.detach();
  const Tensor is_max = top.eq(top.max(-1, true)) | top.ne(top);
  const Tensor score = is_max.where(Tensor::arange(k, 0, -1, DType::Int32), Tensor::scalar(0, DType::Int32));
  const Tensor first = score.eq(score.max(-1, true));
  return first.where(w, 0.0).sum(-1);
}

Tensor avg_pool2d(const Tensor& x, Size2d kernel, Size2d stride, Size2d padding, bool ceil_mode,
                  bool count_include_pad) {
  const Window win = check_pool(x, kernel, stride, padding, {1, 1}, ceil_mode, "avg_pool2d");
  if (detail::is_half(x))  // the sum and the division in Float32, rounded once (src/half_compute.hpp)
    return detail::rounded_once(x, [&](const Tensor& xf) {
      return avg_pool2d(xf, kernel, stride, padding, ceil_mode, count_include_pad);
    });
  const Tensor sum = windows(x, win, 0).sum(-1);
  if (count_include_pad || (padding.h == 0 && padding.w == 0))
    return sum / static_cast<double>(win.kernel.h * win.kernel.w);
  // Divide by the number of real elements in each window: the same windows over ones.
  const Shape& xs = x.shape();
  const Tensor ones = Tensor::ones({xs[xs.size() - 2], xs[xs.size() - 1]}, x.dtype());
  return sum / windows(ones, win, 0).sum(-1);
}

namespace {
// A [out, in] matrix whose row i averages in[floor(i * in / out), ceil((i + 1) * in / out)).
Tensor averaging(int64_t out, int64_t in, DType dt) {
  std::vector<double> m(static_cast<size_t>(out * in), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    const int64_t lo = i * in / out, hi = ((i + 1) * in + out - 1) / out;
    for (int64_t j = lo; j < hi; ++j) m[static_cast<size_t>(i * in + j)] = 1.0 / static_cast<double>(hi - lo);
  }
  return Tensor::from_vector<double>(m, {out, in}).cast(dt);
}
}  // namespace

Tensor adaptive_avg_pool2d(const Tensor& x, Size2d output_size) {
  const char* op = "adaptive_avg_pool2d";
  const Shape& xs = detail::uop(x, op)->shape().value();
  if (xs.size() != 3 && xs.size() != 4)
    throw Error(fmt::format("{}: expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got {}", op, str(xs)));
  if (!x.dtype().is_float())
    throw Error(fmt::format("{}: expected a float input, got {}", op, scalar_name(x.dtype().scalar)));
  const int64_t h = xs[xs.size() - 2], w = xs[xs.size() - 1];
  if (output_size.h <= 0 || output_size.w <= 0 || h == 0 || w == 0)
    throw Error(
        fmt::format("{}: output size ({}, {}) and the input's spatial size {}x{} must be positive (input {})",
                    op, output_size.h, output_size.w, h, w, str(xs)));
  // A half input: both products in Float32 (weights not rounded), rounded once (src/half_compute.hpp).
  return detail::rounded_once(x, [&](const Tensor& xf) {
    return averaging(output_size.h, h, xf.dtype())
        .matmul(xf)
        .matmul(averaging(output_size.w, w, xf.dtype()).transpose());
  });
}

}  // namespace loom::nn::functional
