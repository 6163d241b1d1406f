// Float32 transcendentals lowered to UOps (ir/float_math.hpp), so they
// vectorise with the rest of the kernel instead of calling libm once per lane.
//
//   Before:  EXP2(x)                       x: f32   (EXP, LOG2, SIN, COS, TANH, SIGMOID, ERF, POW alike)
//   After:   p(x - n) * 2^n                n = round(x), p a polynomial
//
// Float64 keeps LLVM's intrinsics (libm).
#include "codegen/codegen.hpp"
#include "ir/float_math.hpp"
#include "ir/pattern.hpp"

namespace loom {

namespace {

UOpPtr lower_f32(const Match& m, UOpPtr (*form)(const UOpPtr&)) {
  const UOpPtr& e = m["e"];
  return e->dtype == DType::Float32 ? form(e->src[0]) : nullptr;
}

const PatternMatcher& transcendental_rules() {
  static const PatternMatcher pm(
      "transcendental",
      {
          {UPat::ops({Op::EXP}, "e"), [](const Match& m) { return lower_f32(m, exp_f32); }},
          {UPat::ops({Op::EXP2}, "e"), [](const Match& m) { return lower_f32(m, exp2_f32); }},
          {UPat::ops({Op::LOG2}, "e"), [](const Match& m) { return lower_f32(m, log2_f32); }},
          {UPat::ops({Op::SIN}, "e"), [](const Match& m) { return lower_f32(m, sin_f32); }},
          {UPat::ops({Op::COS}, "e"), [](const Match& m) { return lower_f32(m, cos_f32); }},
          {UPat::ops({Op::TANH}, "e"), [](const Match& m) { return lower_f32(m, tanh_f32); }},
          {UPat::ops({Op::SIGMOID}, "e"), [](const Match& m) { return lower_f32(m, sigmoid_f32); }},
          {UPat::ops({Op::ERF}, "e"), [](const Match& m) { return lower_f32(m, erf_f32); }},
          {UPat::ops({Op::POW}, "e"),
           [](const Match& m) -> UOpPtr {
             const UOpPtr& e = m["e"];
             return e->dtype == DType::Float32 ? pow_f32(e->src[0], e->src[1]) : nullptr;
           }},
      });
  return pm;
}

}  // namespace

UOpPtr lower_transcendental(const UOpPtr& kernel) { return graph_rewrite(kernel, transcendental_rules()); }

}  // namespace loom
