// Sliding windows from movement ops (tinygrad's _pool). Along one axis of size i, with
// o = (i - d*(k-1) - 1) / s + 1 windows: repeat x until it holds k rows of L = i*f + d
// elements, so row r starts at x[(r*d) mod i] = x[r*d]; keep o*s columns of each row, view
// them as [o, s] and keep column 0: element [r, w] is x[r*d + w*s]. When k <= s and d = 1 the
// windows do not overlap, and a pad to o*s, a reshape to [o, s] and a shrink to [o, k] do.
#include "src/window.hpp"

#include "src/tensor_ops.hpp"

namespace loom::detail {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The other axes may be symbolic (a batch of B rows): they are carried as Dims.
std::vector<std::pair<Dim, Dim>> full_bounds(const Shape& s) {
  std::vector<std::pair<Dim, Dim>> b;
  for (const Dim& d : s) b.emplace_back(0, d);
  return b;
}

// Axis a of size i becomes the two axes [o, k] at a, a + 1.
Tensor window_axis(const Tensor& x, size_t a, int64_t k, int64_t s, int64_t d) {
  const Shape in = x.shape();
  const int64_t i = in[a];
  const int64_t o = (i - d * (k - 1) - 1) / s + 1;
  auto with = [&](std::vector<int64_t> sizes) {  // in, with axis a replaced by `sizes`
    Shape out(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(a));
    out.insert(out.end(), sizes.begin(), sizes.end());
    out.insert(out.end(), in.begin() + static_cast<std::ptrdiff_t>(a) + 1, in.end());
    return out;
  };
  auto bounds = [&](std::vector<std::pair<Dim, Dim>> b, const Shape& of) {
    auto all = full_bounds(of);
    for (size_t j = 0; j < b.size(); ++j) all[a + j] = b[j];
    return all;
  };
  if (k <= s && d == 1) {
    std::vector<std::pair<int64_t, int64_t>> pad(in.size(), {0, 0});
    pad[a].second = std::max<int64_t>(0, o * s - i);
    const Tensor p = x.pad(pad);
    const Tensor cut = p.shrink(bounds({{0, o * s}}, p.shape())).reshape(with({o, s}));
    return cut.shrink(bounds({{0, o}, {0, k}}, cut.shape()));
  }
  // f = 2 when o*s runs past the last window's start (i - d*(k-1)), so a row is long enough.
  const int64_t f = 1 + (o * s > i - d * (k - 1) ? 1 : 0);
  const int64_t row = i * f + d;
  const int64_t reps = ceil_div(k * row, i);
  const Tensor repeated = x.unsqueeze(static_cast<int>(a)).expand(with({reps, i})).reshape(with({reps * i}));
  const Tensor rows = repeated.shrink(bounds({{0, k * row}}, repeated.shape())).reshape(with({k, row}));
  const Tensor strided = rows.shrink(bounds({{0, k}, {0, o * s}}, rows.shape())).reshape(with({k, o, s}));
  const Tensor windows =
      strided.shrink(bounds({{0, k}, {0, o}, {0, 1}}, strided.shape())).reshape(with({k, o}));
  return windows.transpose(static_cast<int>(a), static_cast<int>(a) + 1);
}
}  // namespace

Tensor sliding_windows(const Tensor& x, const std::vector<int64_t>& kernel,
                       const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation) {
  const size_t m = kernel.size(), lead = x.shape().size() - m;
  Tensor w = x;
  for (size_t j = 0; j < m; ++j) w = window_axis(w, lead + 2 * j, kernel[j], stride[j], dilation[j]);
  // [..., o_1, k_1, ..., o_m, k_m] -> [..., o_1, ..., o_m, k_1, ..., k_m]
  std::vector<int> order;
  for (size_t j = 0; j < lead; ++j) order.push_back(static_cast<int>(j));
  for (size_t j = 0; j < m; ++j) order.push_back(static_cast<int>(lead + 2 * j));
  for (size_t j = 0; j < m; ++j) order.push_back(static_cast<int>(lead + 2 * j + 1));
  return w.permute(order);
}

}  // namespace loom::detail
