// Reductions: REDUCE_AXIS with the dtype rules of shared/DESIGN.md §2, and the
// composites built on it.
#include "src/tensor_ops.hpp"

#include <cmath>

namespace loom {

using namespace detail;

// ---- reductions ---------------------------------------------------------------------------------
namespace {
// REDUCE_AXIS over `axes` (all when empty), then a reshape that drops them unless keepdim.
Tensor reduce(const Tensor& t, Op op, std::vector<int> axes, bool keepdim, const char* name) {
  UOpPtr x = uop(t, name);
  const Shape& in = *x->shape();
  std::vector<int64_t> ax;
  for (int a : axes) ax.push_back(norm_axis(a, in.size(), name));
  if (axes.empty())
    for (size_t i = 0; i < in.size(); ++i) ax.push_back(static_cast<int64_t>(i));
  std::sort(ax.begin(), ax.end());
  ax.erase(std::unique(ax.begin(), ax.end()), ax.end());
  if (in.empty()) return make_tensor(x);  // a 0-d tensor reduces to itself
  for (int64_t a : ax)
    if (in[a] == 0 && op == Op::MAX)
      throw Error(fmt::format("{}: cannot reduce axis {} of size 0 in shape {} (the reduction has no identity)",
                              name, a, str(in)));
  UOpPtr r = UOp::make(Op::REDUCE_AXIS, x->dtype, {x}, ReduceArg{op, ax});
  if (keepdim) return make_tensor(r);
  Shape out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!std::binary_search(ax.begin(), ax.end(), static_cast<int64_t>(i))) out.push_back(in[i]);
  return make_tensor(reshape_uop(r, out));
}
}  // namespace

Tensor Tensor::sum(std::vector<int> axes, bool keepdim) const {
  DType dt = dtype();
  Tensor x = dt.is_bool() || dt == DType::UInt8 ? cast(DType::Int32) : *this;  // PyTorch: sums of small ints are wider
  return reduce(x, Op::ADD, std::move(axes), keepdim, "sum");
}
Tensor Tensor::max(std::vector<int> axes, bool keepdim) const {
  return reduce(*this, Op::MAX, std::move(axes), keepdim, "max");
}

}  // namespace loom
