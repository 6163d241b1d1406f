// Float32 exp2 from UOps: range reduction and a polynomial, so it vectorises
// with the rest of the kernel instead of calling libm's exp2f once per lane.
//
//   Before:  EXP2(x)                                   x: f32
//   After:   p(r) * 2^n1 * 2^(n - n1)    n = floor(x + 0.5), r = x - n, n1 = floor(n / 2)
//
// |r| <= 1/2 and r is exact; p is 2^r's Taylor polynomial of degree 7 (truncation
// below 0.1 ulp), so the result stays within the 1 ulp that docs/api.md states.
// 2^n is applied as two exact halves, so results near overflow and in the
// subnormal range round once; x is clamped past both ends of the range first
// (NaN stays NaN). Float64 keeps LLVM's intrinsic.
#include "codegen/codegen.hpp"
#include "ir/pattern.hpp"

#include <cmath>
#include <numbers>

namespace loom {

namespace {

UOpPtr c(const UOpPtr& like, double v) { return const_float(like->dtype, v); }

UOpPtr floor_of(const UOpPtr& x) {
  const UOpPtr t = alu(Op::TRUNC, {x});
  return where(x < t, t - c(x, 1), t);
}

// 2^n for an integral float32 n in [-126, 127], exactly: the biased exponent in place.
UOpPtr pow2(const UOpPtr& n) {
  const UOpPtr i = cast(n, DType::Int32);
  const UOpPtr biased = i + const_int(DType::Int32, 127);
  return UOp::make(Op::BITCAST, n->dtype, {alu(Op::SHL, {biased, const_int(DType::Int32, 23)})});
}

UOpPtr exp2_f32(const UOpPtr& x) {
  const UOpPtr xc = umax(-umax(-x, c(x, -160)), c(x, -160));  // llvm.maximum keeps NaN
  const UOpPtr n = floor_of(xc + c(x, 0.5));
  const UOpPtr r = xc - n;
  UOpPtr p = c(x, std::pow(std::numbers::ln2, 7) / 5040);
  double factorial = 720;
  for (int k = 6; k >= 0; --k) {
    p = p * r + c(x, std::pow(std::numbers::ln2, k) / factorial);
    factorial /= k > 0 ? k : 1;
  }
  const UOpPtr n1 = floor_of(n * c(x, 0.5));
  return (p * pow2(n1)) * pow2(n - n1);
}

const PatternMatcher& transcendental_rules() {
  static const PatternMatcher pm("transcendental", {
                                                       {UPat::ops({Op::EXP2}, "e"),
                                                        [](const Match& m) -> UOpPtr {
                                                          const UOpPtr& e = m["e"];
                                                          if (!(e->dtype == DType::Float32)) return nullptr;
                                                          return exp2_f32(e->src[0]);
                                                        }},
                                                   });
  return pm;
}

}  // namespace

UOpPtr lower_transcendental(const UOpPtr& kernel) { return graph_rewrite(kernel, transcendental_rules()); }

}  // namespace loom
