// floor, ceil, trunc and round, as PyTorch's: each from the IR's TRUNC, which is exact, plus a
// step of one where truncation went the wrong way. Their gradient is 0 (TRUNC's, and the steps
// are selected by comparisons). Integer tensors come back unchanged, in a tensor of their own;
// Bool is an error, as in PyTorch. BFloat16 and Float16 round in Float32 and narrow back, which
// is exact: a half value's integer neighbours are half values too.
#include "src/composites.hpp"
#include "src/half_compute.hpp"
#include "src/tensor_ops.hpp"

#include <cmath>

namespace loom {

using namespace detail;

namespace {

UOpPtr ceil_f(const UOpPtr& x) {
  const UOpPtr t = alu(Op::TRUNC, {x});
  return where(t < x, t + const_as(x, 1), t);
}

// Half to even: x - trunc(x) is exact, so the tie test is too. At +-inf the difference is NaN
// and every test false: trunc(inf) = inf stays.
UOpPtr round_half_even(const UOpPtr& x) {
  const UOpPtr t = alu(Op::TRUNC, {x});
  const UOpPtr d = x - t, magnitude = umax(d, -d), half = const_as(x, 0.5);
  const UOpPtr odd = ne(alu(Op::TRUNC, {t * half}) + alu(Op::TRUNC, {t * half}), t);
  const UOpPtr away = alu(Op::OR, {half < magnitude, land(eq(magnitude, half), odd)});
  const UOpPtr step = where(x < const_as(x, 0), const_as(x, -1), const_as(x, 1));
  return where(away, t + step, t);
}

template <class Rounding>
Tensor rounded(const Tensor& t, const char* op, Rounding&& rounding) {
  const UOpPtr& x = uop(t, op);
  if (x->dtype.is_bool())
    throw Error(fmt::format("{}: not defined for a Bool tensor (expected a float or integer tensor)", op));
  if (!x->dtype.is_float()) return make_tensor(x);
  return rounded_once(t, [&](const Tensor& f) { return make_tensor(rounding(uop(f, op))); });
}

}  // namespace

Tensor Tensor::floor() const { return rounded(*this, "floor", floor_of); }
Tensor Tensor::ceil() const { return rounded(*this, "ceil", ceil_f); }
Tensor Tensor::trunc() const {
  return rounded(*this, "trunc", [](const UOpPtr& x) { return alu(Op::TRUNC, {x}); });
}

// With decimals (float tensors only, as in PyTorch): round(x * 10^d) / 10^d, or for d < 0 round(x / 10^-d) *
// 10^-d, the power in the tensor's dtype.
Tensor Tensor::round(int decimals) const {
  if (decimals == 0) return rounded(*this, "round", round_half_even);
  if (!uop(*this, "round")->dtype.is_float())
    throw Error(fmt::format("round: decimals = {} needs a float tensor, got {} (as in PyTorch)", decimals,
                            scalar_name(dtype().scalar)));
  const double scale = std::pow(10.0, std::abs(decimals));
  return rounded(*this, "round", [&](const UOpPtr& x) {
    const UOpPtr s = const_as(x, scale);
    return decimals > 0 ? round_half_even(x * s) / s : round_half_even(x / s) * s;
  });
}

}  // namespace loom
