// F.interpolate over the last two axes. nearest selects rows and columns (index_select, so the
// gradient sums into the selected elements); bilinear multiplies by two [out, in] matrices of
// interpolation weights, one per axis, computed on the host with PyTorch's source-index rules.
#include "src/half_compute.hpp"
#include "src/tensor_ops.hpp"

#include <loom/nn_functional.hpp>

#include <cmath>

namespace loom::nn::functional {

using detail::str;

namespace {
// PyTorch's scale from output to input: 1 / scale_factor when given, else in / out.
double source_scale(int64_t in, int64_t out, std::optional<double> scale_factor) {
  return scale_factor ? 1.0 / *scale_factor : static_cast<double>(in) / static_cast<double>(out);
}

Tensor nearest_index(int64_t in, int64_t out, std::optional<double> scale_factor) {
  const double scale = source_scale(in, out, scale_factor);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < out; ++i)
    idx.push_back(std::min(static_cast<int64_t>(std::floor(static_cast<double>(i) * scale)), in - 1));
  return Tensor::from_vector<int64_t>(idx, {out});
}

// [out, in]: row i holds the two linear weights of output i's source position.
Tensor bilinear_weights(int64_t in, int64_t out, std::optional<double> scale_factor, bool align_corners,
                        DType dt) {
  std::vector<double> m(static_cast<size_t>(out * in), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    double src = 0;
    if (align_corners)
      src = out > 1 ? static_cast<double>(i) * static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0;
    else
      src = std::max(source_scale(in, out, scale_factor) * (static_cast<double>(i) + 0.5) - 0.5, 0.0);
    const int64_t i0 = std::min(static_cast<int64_t>(src), in - 1);
    const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
    const double l1 = src - static_cast<double>(i0);
    m[static_cast<size_t>(i * in + i0)] += 1 - l1;
    m[static_cast<size_t>(i * in + i1)] += l1;
  }
  return Tensor::from_vector<double>(m, {out, in}).cast(dt);
}
}  // namespace

Tensor interpolate(const Tensor& x, Size2d size, std::optional<double> scale_factor, std::string_view mode,
                   bool align_corners) {
  const char* op = "interpolate";
  const Shape& xs = detail::uop(x, op)->shape().value();
  if (xs.size() != 4) throw Error(fmt::format("{}: expected a 4-D input [N, C, H, W], got {}", op, str(xs)));
  if (!x.dtype().is_float())
    throw Error(fmt::format("{}: expected a float input, got {}", op, scalar_name(x.dtype().scalar)));
  if (mode != "nearest" && mode != "bilinear")
    throw Error(fmt::format("{}: mode \"{}\" is not one of \"nearest\", \"bilinear\"", op, mode));
  if (size.unset() == !scale_factor)
    throw Error(fmt::format("{}: give exactly one of size and scale_factor (input {})", op, str(xs)));
  if (scale_factor && !(*scale_factor > 0))
    throw Error(fmt::format("{}: scale_factor must be positive, got {}", op, *scale_factor));
  if (align_corners && mode == "nearest")
    throw Error(fmt::format("{}: align_corners is only for mode \"bilinear\"", op));
  const int64_t h = xs[2], w = xs[3];
  const int64_t oh =
      scale_factor ? static_cast<int64_t>(std::floor(static_cast<double>(h) * *scale_factor)) : size.h;
  const int64_t ow =
      scale_factor ? static_cast<int64_t>(std::floor(static_cast<double>(w) * *scale_factor)) : size.w;
  if (oh <= 0 || ow <= 0 || h == 0 || w == 0)
    throw Error(
        fmt::format("{}: input {} resized to {}x{}; both sizes must be positive", op, str(xs), oh, ow));
  if (mode == "nearest")
    return x.index_select(2, nearest_index(h, oh, scale_factor))
        .index_select(3, nearest_index(w, ow, scale_factor));
  // A half input: both products in Float32 (weights not rounded), rounded once (src/half_compute.hpp).
  return detail::rounded_once(x, [&](const Tensor& xf) {
    return bilinear_weights(h, oh, scale_factor, align_corners, xf.dtype())
        .matmul(xf)
        .matmul(bilinear_weights(w, ow, scale_factor, align_corners, xf.dtype()).transpose());
  });
}

}  // namespace loom::nn::functional
