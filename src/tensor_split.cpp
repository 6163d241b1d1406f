// split, chunk and unbind: a tensor cut into consecutive views along one axis, as PyTorch's.
// Each piece is a slice (unbind's also drops the axis), so a write through a piece reaches the
// tensor (docs/semantics.md, 20). The axis must have a concrete size: the number of pieces
// is a C++ number.
#include "src/tensor_ops.hpp"

namespace loom {

using namespace detail;

namespace {

// The concrete size of `axis` (normalised into `a`).
int64_t axis_size(const Tensor& t, int axis, int& a, const char* op) {
  const Shape& in = *uop(t, op)->shape();
  if (in.empty()) throw Error(fmt::format("{}: cannot cut a 0-d tensor (it has no axes)", op));
  a = norm_axis(axis, in.size(), op);
  if (in[a].is_symbolic())
    throw Error(fmt::format("{}: axis {} of shape {} is symbolic; the number of pieces needs a concrete size",
                            op, a, str(in)));
  return in[a].value();
}

std::vector<Tensor> pieces(const Tensor& t, int a, const std::vector<int64_t>& sizes) {
  std::vector<Tensor> out;
  int64_t at = 0;
  for (const int64_t n : sizes) {
    out.push_back(t.slice(a, at, at + n));
    at += n;
  }
  return out;
}

}  // namespace

std::vector<Tensor> Tensor::split(int64_t size, int axis) const {
  int a = 0;
  const int64_t n = axis_size(*this, axis, a, "split");
  if (size <= 0 && !(size == 0 && n == 0))
    throw Error(
        fmt::format("split: the piece size must be positive, got {} (axis {} of size {})", size, a, n));
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < n; at += size) sizes.push_back(std::min(size, n - at));
  if (sizes.empty()) sizes.push_back(0);  // PyTorch gives one empty piece of an empty axis
  return pieces(*this, a, sizes);
}

std::vector<Tensor> Tensor::split(const std::vector<int64_t>& sizes, int axis) const {
  int a = 0;
  const int64_t n = axis_size(*this, axis, a, "split");
  int64_t total = 0;
  for (const int64_t s : sizes) {
    if (s < 0)
      throw Error(fmt::format("split: piece sizes must not be negative, got {}", fmt::join(sizes, ", ")));
    total += s;
  }
  if (total != n)
    throw Error(
        fmt::format("split: piece sizes [{}] add up to {}, but axis {} has size {} (expected them to "
                    "add up to it)",
                    fmt::join(sizes, ", "), total, a, n));
  return pieces(*this, a, sizes);
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int axis) const {
  int a = 0;
  const int64_t n = axis_size(*this, axis, a, "chunk");
  if (chunks <= 0) throw Error(fmt::format("chunk: the number of chunks must be positive, got {}", chunks));
  const int64_t size = (n + chunks - 1) / chunks;
  if (size == 0) return pieces(*this, a, std::vector<int64_t>(static_cast<size_t>(chunks), 0));
  return split(size, a);
}

std::vector<Tensor> Tensor::unbind(int axis) const {
  int a = 0;
  const int64_t n = axis_size(*this, axis, a, "unbind");
  std::vector<Tensor> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(slice(a, i, i + 1).squeeze(a));
  return out;
}

}  // namespace loom
