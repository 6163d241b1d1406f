// topk by ranks: element i's rank is how many elements come before it (greater, NaN first as
// PyTorch, or equal at a lower index), so the ranks are a permutation and output r is the
// element of rank r. An [n, n] compare and a [k, n] selection, both fused reduces: O(n^2)
// work, no sort, lazy like every other op. The values are a gather, so the gradient goes to
// the selected elements.
#include "src/tensor_ops.hpp"

namespace loom {

using namespace detail;

std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int dim, bool largest) const {
  const UOpPtr& x = uop(*this, "topk");
  const Shape& in = *x->shape();
  if (x->dtype.is_bool())
    throw Error("topk: not implemented for Bool tensors (as in PyTorch); cast to an integer dtype first");
  const int a = norm_axis(dim, in.size(), "topk");
  const int64_t n = in.empty() ? 1 : in[a].concrete("topk");
  if (k < 0 || k > n)
    throw Error(
        fmt::format("topk: k = {} is out of range for dimension {} of size {} in shape {} (expected "
                    "0 <= k <= {})",
                    k, a, n, str(in), n));
  if (in.empty()) {
    const auto [v, i] = reshape({1}).topk(k, 0, largest);
    return {v.reshape(k == 1 ? Shape{} : Shape{0}), i.reshape(k == 1 ? Shape{} : Shape{0})};
  }
  const Tensor t = transpose(a, -1);                        // [.., n]
  const Tensor xj = t.unsqueeze(-1), xi = t.unsqueeze(-2);  // [.., n(j), 1] and [.., 1, n(i)]
  const Tensor j = Tensor::arange(0, n, 1, DType::Int64).reshape({n, 1});
  const Tensor i = Tensor::arange(0, n, 1, DType::Int64).reshape({1, n});
  Tensor ahead = largest ? xj > xi : xj < xi;
  Tensor same = xj.eq(xi);
  if (x->dtype.is_float()) {
    const Tensor nan_j = xj.ne(xj), nan_i = xi.ne(xi);
    // NaN is the largest value: first when largest, last otherwise.
    ahead = ahead | (largest ? nan_j & ~nan_i : ~nan_j & nan_i);
    same = same | (nan_j & nan_i);
  }
  const Tensor before = ahead | (same & (j < i));         // [.., n(j), n(i)]
  const Tensor rank = before.cast(DType::Int64).sum(-2);  // [.., n(i)]
  const Tensor r = Tensor::arange(0, k, 1, DType::Int64).reshape({k, 1});
  const Tensor hit = rank.unsqueeze(-2).eq(r);                                 // [.., k, n(i)]
  const Tensor index = hit.where(i, Tensor::scalar(0, DType::Int64)).sum(-1);  // [.., k]
  const Tensor values = t.gather(-1, index);
  return {values.transpose(a, -1), index.transpose(a, -1)};
}

// A full stable sort is topk of the whole axis: NaN last ascending and first descending, equal
// values in their order, as torch.sort(stable=True). Bool sorts as UInt8.
std::pair<Tensor, Tensor> Tensor::sort(int dim, bool descending) const {
  const UOpPtr& x = uop(*this, "sort");
  if (x->dtype.is_bool()) {
    auto [values, indices] = cast(DType::UInt8).sort(dim, descending);
    return {values.cast(DType::Bool), indices};
  }
  if (x->shape()->empty()) return topk(1, dim, descending);
  const int a = norm_axis(dim, x->shape()->size(), "sort");
  return topk((*x->shape())[a].concrete("sort"), a, descending);
}
Tensor Tensor::argsort(int dim, bool descending) const { return sort(dim, descending).second; }

}  // namespace loom
