// Selections by a mask: masked_fill and the triangles triu and tril, each a WHERE over the
// input and a constant, so the gradient passes where the input is kept and nowhere else.
#include "src/tensor_ops.hpp"

namespace loom {

using namespace detail;

// PyTorch's out-of-place masked_fill: mask and tensor broadcast together; the mask must be Bool
// (PyTorch 2 rejects the UInt8 masks older versions took with a warning).
Tensor Tensor::masked_fill(const Tensor& mask, double value) const {
  const UOpPtr &x = uop(*this, "masked_fill"), &m = uop(mask, "masked_fill");
  if (!m->dtype.is_bool())
    throw Error(fmt::format("masked_fill: expected a Bool mask, got {} (compare first, e.g. m.ne(0))",
                            scalar_name(m->dtype.scalar)));
  const Shape s = broadcast_shape(*m->shape(), *x->shape(), "masked_fill");
  const UOpPtr xs = expand_uop(x, s);
  return make_tensor(loom::where(expand_uop(m, s), const_as(xs, value), xs));
}

namespace {
// Keeps the elements whose column minus row satisfies `keep` against k on the last two axes,
// zero elsewhere; the mask is built from two aranges and broadcast over the batch axes.
Tensor triangle(const Tensor& t, int64_t k, bool upper, const char* op) {
  const UOpPtr& x = uop(t, op);
  const Shape& s = *x->shape();
  if (s.size() < 2)
    throw Error(fmt::format("{}: expected a tensor of at least 2 dimensions, got shape {}", op, str(s)));
  const Dim rows = s[s.size() - 2], cols = s[s.size() - 1];  // either may be symbolic
  const Tensor row = Tensor::arange(0, rows, 1, DType::Int64).reshape({rows, 1});
  const Tensor col = Tensor::arange(0, cols, 1, DType::Int64).reshape({1, cols});
  const Tensor diagonal = col - row;
  const Tensor kept = upper ? diagonal >= k : diagonal <= k;
  const UOpPtr keep = expand_uop(kept.node()->uop, s);
  return make_tensor(loom::where(keep, x, const_as(x, 0)));
}
}  // namespace

Tensor Tensor::triu(int64_t k) const { return triangle(*this, k, true, "triu"); }
Tensor Tensor::tril(int64_t k) const { return triangle(*this, k, false, "tril"); }

}  // namespace loom
