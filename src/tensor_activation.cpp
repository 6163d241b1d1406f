// The activations of torch.nn.functional (erf, gelu, silu, softplus, leaky_relu), built from
// the IR's primitives and the composites of tensor_elementwise_math.cpp, with PyTorch's
// formulas so values and gradients (kinks included) match its CPU kernels. Float32 erf is one
// ERF node, which codegen lowers to ir/float_math.hpp's erf_f32; Float64's is a composite
// (src/composites.hpp) of the same method: either way the gradient applies erf' = 2/sqrt(pi)
// exp(-x^2) instead of the derivative of its polynomials.
#include "ir/float_math.hpp"
#include "src/composites.hpp"
#include "src/half_compute.hpp"
#include "src/tensor_ops.hpp"

#include <cmath>
#include <numbers>

namespace loom {

using namespace detail;

namespace {

// Chebyshev coefficients of Q(t) = erfcx(z) / t, t = 2 / (2 + z), for z in [0.5, z_max], in
// s = (t - mid) / half; fitted and checked by tools/fit_erf.py (largest relative error of t Q
// 9.8e-17; Float32's fit is erf_f32's).
struct ErfcFit {
  double z_max, t_lo, t_hi;
  std::vector<double> coefficients;
};
const ErfcFit kErfcFloat64{
    6,
    0.25,
    0.8,
    {0.54946429511922982786, 0.19863814860634424788, 0.021017557492874383253, 0.00062330038760694793987,
     -0.00012351630643154491377, -8.188588865359774053e-6, 1.2829549924191963623e-6, 6.9117060247387300104e-8,
     -1.8810462606342434107e-8, 1.7952779943318417322e-11, 2.7408515792360539489e-10,
     -2.1202480021379180694e-11, -2.6147492376678084004e-12, 6.1470612496459903415e-13,
     -1.8956157206845145818e-14, -9.1171391111850753913e-15, 1.4769301991029442386e-15,
     -1.7695764998306194725e-17}};

// erfc(z) for z >= 0.5 (z is clamped to the fit's interval; past z_max erf rounds to 1):
// exp(-z^2) t Q(t). Its relative error is Q's plus exp's of z^2's rounding (z^2 ulps), which
// reach erf = 1 - erfc scaled down by erfc <= 0.48.
UOpPtr erfc_tail(const UOpPtr& a) {
  const ErfcFit& fit = kErfcFloat64;
  const UOpPtr z = umax(-umax(-a, const_as(a, -fit.z_max)), const_as(a, 0.5));  // clamp, NaN stays
  const UOpPtr t = const_as(z, 2) / (const_as(z, 2) + z);
  const double mid = (fit.t_lo + fit.t_hi) / 2, half = (fit.t_hi - fit.t_lo) / 2;
  const UOpPtr s = (t - const_as(t, mid)) * const_as(t, 1 / half);
  return exp_of(-(z * z)) * t * clenshaw(fit.coefficients, s);
}

void require_float(const UOpPtr& x, const char* op) {
  if (!x->dtype.is_float())
    throw Error(fmt::format("{}: expected a float tensor, got {} (as in PyTorch; cast it first)", op,
                            scalar_name(x->dtype.scalar)));
}
}  // namespace

// The series near 0 (x itself, so erf(-0) = -0), sign(x) (1 - erfc(|x|)) beyond; NaN takes the
// second branch and stays NaN, ±inf clamps to ±1.
UOpPtr detail::erf_of(const UOpPtr& x) {
  if (x->dtype == DType::Float32) return alu(Op::ERF, {x});
  const UOpPtr a = umax(x, -x);
  const UOpPtr magnitude = const_as(x, 1) - erfc_tail(a);
  // The series to n = 13: its cut is below 2^-60 of the result.
  return loom::where(a < const_as(a, 0.5), erf_series(x, 13),
                     loom::where(x < const_as(x, 0), -magnitude, magnitude));
}

Tensor Tensor::erf() const {
  return unary_float(*this, "erf", [](const UOpPtr& x) { return erf_of(x); });
}

// "none": x/2 (1 + erf(x/sqrt 2)); "tanh": x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor Tensor::gelu(std::string_view approximate) const {
  const UOpPtr& x = uop(*this, "gelu");
  require_float(x, "gelu");
  if (x->dtype.is_half()) return rounded_once(*this, [&](const Tensor& t) { return t.gelu(approximate); });
  if (approximate == "none")
    return make_tensor(x * const_as(x, 0.5) *
                       (const_as(x, 1) + erf_of(x * const_as(x, std::numbers::sqrt2 / 2))));
  if (approximate == "tanh") {
    const UOpPtr inner =
        const_as(x, std::sqrt(2 / std::numbers::pi)) * (x + const_as(x, 0.044715) * (x * x * x));
    return make_tensor(const_as(x, 0.5) * x * (const_as(x, 1) + tanh_of(inner)));
  }
  throw Error(fmt::format("gelu: unknown approximate \"{}\" (expected \"none\" or \"tanh\")", approximate));
}

Tensor Tensor::silu() const {
  const UOpPtr& x = uop(*this, "silu");
  require_float(x, "silu");
  if (x->dtype.is_half()) return rounded_once(*this, [&](const Tensor& t) { return t.silu(); });
  return make_tensor(x * sigmoid_of(x));
}

// x where beta x > threshold (PyTorch's rule), else log1p(exp(beta x)) / beta in the form that
// cannot overflow: (max(z, 0) + log1p(exp(-|z|))) / beta with z = beta x, so the branch not
// taken stays finite and its zero gradient stays zero (PyTorch's form overflows to inf for a
// threshold past 88 or 709; docs/semantics.md). log1p(e) = log(w) - ((w - 1) - e) / w with
// w = 1 + e: (w - 1) - e is w's rounding error exactly, so this keeps log1p's accuracy for tiny
// e, and its derivative is 1/w up to that error. The gradient is 1 above the threshold and
// sigmoid(beta x) at and below it, as PyTorch's (1/2 at z = 0: max and |z| split their ties).
Tensor Tensor::softplus(double beta, double threshold) const {
  const UOpPtr& x = uop(*this, "softplus");
  require_float(x, "softplus");
  if (x->dtype.is_half())
    return rounded_once(*this, [&](const Tensor& t) { return t.softplus(beta, threshold); });
  const UOpPtr z = x * const_as(x, beta), e = exp_of(-umax(z, -z)), w = const_as(e, 1) + e;
  const UOpPtr log1p = log_of(w) - ((w - const_as(w, 1)) - e) / w;
  return make_tensor(
      loom::where(const_as(z, threshold) < z, x, (umax(z, const_as(z, 0)) + log1p) / const_as(x, beta)));
}

// x where x > 0, else x * slope: PyTorch's gradient at 0 is the slope. A half x multiplies by
// the Float32 slope (src/half_compute.hpp), as PyTorch's kernel, not by the slope rounded.
Tensor Tensor::leaky_relu(double negative_slope) const {
  const UOpPtr& x = uop(*this, "leaky_relu");
  require_float(x, "leaky_relu");
  if (x->dtype.is_half())
    return rounded_once(*this, [&](const Tensor& t) { return t.leaky_relu(negative_slope); });
  return make_tensor(loom::where(const_as(x, 0) < x, x, x * const_as(x, negative_slope)));
}

}  // namespace loom
