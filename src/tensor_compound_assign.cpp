// `a += b` and its siblings: in place, as in PyTorch. The result is computed as `a + b` and
// assigned into `a` (Tensor::assign), so every handle of `a`, and the tensor `a` was cut from
// when it is a view, sees it. PyTorch's two rules for an in-place result hold: it keeps `a`'s
// shape (b broadcasts to a, never a to b), and its dtype casts to a's by torch.can_cast (no
// float result into an integer tensor, only Bool into Bool).
#include "src/tensor_ops.hpp"

#include <loom/gradient.hpp>

namespace loom {

using namespace detail;

namespace {

bool can_cast(DType from, DType to) {
  if (from.is_float() && !to.is_float()) return false;
  if (!from.is_bool() && to.is_bool()) return false;
  return true;
}

void check_not_recorded_leaf(const Tensor& self, const char* op) {
  const TensorNode& n = *self.node();
  const bool leaf = n.requires_grad || (n.view && n.view->base->requires_grad);
  if (leaf && grad_enabled())
    throw Error(fmt::format(
        "{}: a leaf that requires grad (or a view of one) is changed in place while gradients are recorded "
        "(expected the update inside a loom::NoGrad scope, as PyTorch's torch.no_grad())",
        op));
}

Tensor& in_place(Tensor& self, const Tensor& result, const char* op) {
  const UOpPtr &a = uop(self, op), &r = uop(result, op);
  check_not_recorded_leaf(self, op);
  if (*r->shape() != *a->shape())
    throw Error(
        fmt::format("{}: the result's shape {} differs from the tensor's {} (an in-place result "
                    "keeps the tensor's shape)",
                    op, str(*r->shape()), str(*a->shape())));
  if (!can_cast(r->dtype, a->dtype))
    throw Error(fmt::format(
        "{}: the result's dtype {} cannot be written in place into a tensor of dtype {} (expected "
        "no float result into an integer tensor, and only Bool into Bool)",
        op, scalar_name(r->dtype.scalar), scalar_name(a->dtype.scalar)));
  return self.assign(result);
}

}  // namespace

Tensor& Tensor::operator+=(const Tensor& other) { return in_place(*this, *this + other, "operator+="); }
Tensor& Tensor::operator-=(const Tensor& other) { return in_place(*this, *this - other, "operator-="); }
Tensor& Tensor::operator*=(const Tensor& other) { return in_place(*this, *this * other, "operator*="); }
Tensor& Tensor::operator/=(const Tensor& other) { return in_place(*this, *this / other, "operator/="); }

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  return in_place(*this, alpha == 1 ? *this + other : *this + other * alpha, "add_");
}
Tensor& Tensor::sub_(const Tensor& other, double alpha) {
  return in_place(*this, alpha == 1 ? *this - other : *this - other * alpha, "sub_");
}
Tensor& Tensor::mul_(const Tensor& other) { return in_place(*this, *this * other, "mul_"); }
Tensor& Tensor::div_(const Tensor& other) { return in_place(*this, *this / other, "div_"); }
Tensor& Tensor::clamp_(double lo, double hi) { return in_place(*this, clamp(lo, hi), "clamp_"); }
Tensor& Tensor::masked_fill_(const Tensor& mask, double value) {
  return in_place(*this, masked_fill(mask, value), "masked_fill_");
}

// copy_ and fill_ cast whatever they are given, as PyTorch's do (assign's rules).
Tensor& Tensor::copy_(const Tensor& src) {
  uop(*this, "copy_");
  check_not_recorded_leaf(*this, "copy_");
  return assign(src);
}
Tensor& Tensor::fill_(double value) {
  uop(*this, "fill_");
  check_not_recorded_leaf(*this, "fill_");
  return assign(value);
}
Tensor& Tensor::zero_() {
  uop(*this, "zero_");
  check_not_recorded_leaf(*this, "zero_");
  return assign(0.0);
}

}  // namespace loom
