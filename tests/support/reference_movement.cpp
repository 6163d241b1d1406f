#include "support/reference_movement.hpp"

#include <loom/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace loom::ref {

namespace {
// out[idx] = in[source(idx)] for every output multi-index idx; `source` fills the
// input multi-index and returns false where the output element is padding (0).
template <class Source>
RefTensor gather(const RefTensor& in, RefShape out_shape, Source source) {
  RefTensor out = RefTensor::zeros(in.dtype, std::move(out_shape));
  const RefShape strides = row_major_strides(in.shape);
  std::vector<int64_t> out_idx(out.shape.size(), 0), in_idx(in.shape.size(), 0);
  for (int64_t k = 0, n = out.size(); k < n; ++k) {
    if (source(out_idx, in_idx)) {
      int64_t from = 0;
      for (size_t d = 0; d < in_idx.size(); ++d) from += in_idx[d] * strides[d];
      if (in.dtype.is_float())
        out.f[k] = in.f[from];
      else
        out.i[k] = in.i[from];
    }
    next_index(out_idx, out.shape);
  }
  return out;
}

[[noreturn]] void bad_arg(std::string_view op, const RefShape& in_shape, const std::vector<int64_t>& arg,
                          std::string_view expected) {
  throw Error(fmt::format("reference interpreter: {} of shape {} with arg {}: expected {}", op, in_shape, arg,
                          expected));
}

// Checks that `axes` are distinct axes of a rank-`rank` tensor.
bool distinct_axes(const std::vector<int64_t>& axes, size_t rank) {
  std::vector<bool> seen(rank, false);
  for (int64_t a : axes) {
    if (a < 0 || a >= static_cast<int64_t>(rank) || seen[a]) return false;
    seen[a] = true;
  }
  return true;
}

// Checks a flat (a, b) pair list against `shape`: one pair per axis, each passing `ok(a, b, dim)`.
template <class Ok>
bool pairs_fit(const std::vector<int64_t>& bounds, const RefShape& shape, Ok ok) {
  if (bounds.size() != 2 * shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!ok(bounds[2 * d], bounds[2 * d + 1], shape[d])) return false;
  return true;
}
}  // namespace

RefTensor reshape(const RefTensor& in, const RefShape& shape) {
  for (int64_t d : shape)
    if (d < 0) bad_arg("RESHAPE", in.shape, shape, "non-negative sizes");
  if (numel(shape) != in.size()) bad_arg("RESHAPE", in.shape, shape, "the same number of elements");
  RefTensor out = in;  // row-major: the flat order is unchanged
  out.shape = shape;
  return out;
}

RefTensor permute(const RefTensor& in, const std::vector<int64_t>& order) {
  const size_t rank = in.shape.size();
  if (order.size() != rank || !distinct_axes(order, rank))
    bad_arg("PERMUTE", in.shape, order, "a permutation of the axes");
  RefShape out_shape;
  for (int64_t a : order) out_shape.push_back(in.shape[a]);
  return gather(in, out_shape, [&](const std::vector<int64_t>& out_idx, std::vector<int64_t>& in_idx) {
    for (size_t d = 0; d < rank; ++d) in_idx[order[d]] = out_idx[d];
    return true;
  });
}

RefTensor expand(const RefTensor& in, const RefShape& shape) {
  const size_t rank = in.shape.size();
  bool ok = shape.size() == rank;
  for (size_t d = 0; ok && d < rank; ++d) ok = shape[d] >= 0 && (in.shape[d] == shape[d] || in.shape[d] == 1);
  if (!ok) bad_arg("EXPAND", in.shape, shape, "the same rank, growing only axes of size 1");
  return gather(in, shape, [&](const std::vector<int64_t>& out_idx, std::vector<int64_t>& in_idx) {
    for (size_t d = 0; d < rank; ++d) in_idx[d] = in.shape[d] == 1 ? 0 : out_idx[d];
    return true;
  });
}

RefTensor pad(const RefTensor& in, const std::vector<int64_t>& bounds) {
  if (!pairs_fit(bounds, in.shape, [](int64_t lo, int64_t hi, int64_t) { return lo >= 0 && hi >= 0; }))
    bad_arg("PAD", in.shape, bounds, "one non-negative (lo, hi) pair per axis");
  const size_t rank = in.shape.size();
  RefShape out_shape = in.shape;
  for (size_t d = 0; d < rank; ++d) out_shape[d] += bounds[2 * d] + bounds[2 * d + 1];
  return gather(in, out_shape, [&](const std::vector<int64_t>& out_idx, std::vector<int64_t>& in_idx) {
    for (size_t d = 0; d < rank; ++d) {
      in_idx[d] = out_idx[d] - bounds[2 * d];
      if (in_idx[d] < 0 || in_idx[d] >= in.shape[d]) return false;
    }
    return true;
  });
}

RefTensor shrink(const RefTensor& in, const std::vector<int64_t>& bounds) {
  if (!pairs_fit(bounds, in.shape, [](int64_t start, int64_t end, int64_t dim) {
        return 0 <= start && start <= end && end <= dim;
      }))
    bad_arg("SHRINK", in.shape, bounds, "one (start, end) pair per axis with 0 <= start <= end <= size");
  const size_t rank = in.shape.size();
  RefShape out_shape(rank);
  for (size_t d = 0; d < rank; ++d) out_shape[d] = bounds[2 * d + 1] - bounds[2 * d];
  return gather(in, out_shape, [&](const std::vector<int64_t>& out_idx, std::vector<int64_t>& in_idx) {
    for (size_t d = 0; d < rank; ++d) in_idx[d] = out_idx[d] + bounds[2 * d];
    return true;
  });
}

RefTensor flip(const RefTensor& in, const std::vector<int64_t>& axes) {
  const size_t rank = in.shape.size();
  if (!distinct_axes(axes, rank)) bad_arg("FLIP", in.shape, axes, "distinct axes");
  std::vector<bool> flipped(rank, false);
  for (int64_t a : axes) flipped[a] = true;
  return gather(in, in.shape, [&](const std::vector<int64_t>& out_idx, std::vector<int64_t>& in_idx) {
    for (size_t d = 0; d < rank; ++d) in_idx[d] = flipped[d] ? in.shape[d] - 1 - out_idx[d] : out_idx[d];
    return true;
  });
}

}  // namespace loom::ref
