// BFloat16 and Float16 compute in Float32 (docs/semantics.md, "Half-precision
// dtypes"): every op on a half widens its operands, computes in Float32 and rounds
// its result once, so after this pass a half appears only in loads, stores,
// constants, selects and CASTs to or from Float32, which the emitter converts.
//
//   Before:  ADD(a, b)                 bf16x8, a and b loaded bf16x8
//   After:   CAST<bf16x8>(ADD(CAST<f32x8>(a), CAST<f32x8>(b)))
//
//   Before:  REDUCE(x, r) ADD          f16 (a MAX of halves, say)
//   After:   CAST<f16>(REDUCE(CAST<f32>(x), r))   accumulates in Float32
//
//   Before:  CAST<bf16>(x)             x: i32 (or f64, or f16)
//   After:   CAST<bf16>(CAST<f32>(x))  as PyTorch's c10::BFloat16(float)
#include "codegen/codegen.hpp"

#include "ir/pattern.hpp"

namespace loom {

namespace {

DType f32_like(DType dt) { return DType::Float32.vec(dt.lanes); }

UOpPtr widen(const UOpPtr& x) {
  return x->dtype.is_half() ? UOp::make(Op::CAST, f32_like(x->dtype), {x}) : x;
}

// The op computed in Float32 from widened operands, its result rounded back when it is a half.
UOpPtr in_f32(const UOp& u) {
  std::vector<UOpPtr> src;
  for (const UOpPtr& s : u.src) src.push_back(widen(s));
  const DType dt = u.dtype.is_half() ? f32_like(u.dtype) : u.dtype;
  const UOpPtr r = UOp::make(u.op, dt, std::move(src), u.arg);
  return u.dtype.is_half() ? UOp::make(Op::CAST, u.dtype, {r}) : r;
}

bool touches_half(const UOp& u) {
  if (u.dtype.is_half()) return true;
  for (const UOpPtr& s : u.src)
    if (s->dtype.is_half()) return true;
  return false;
}

UOpPtr widen_op(const UOpPtr& u) {
  if (!touches_half(*u)) return nullptr;
  if (u->op == Op::CAST) {
    const DType from = u->src[0]->dtype, to = u->dtype;
    if (from.base() == DType::Float32 || to.base() == DType::Float32) return nullptr;  // the emitter's
    return UOp::make(Op::CAST, to, {UOp::make(Op::CAST, f32_like(to), {u->src[0]})});
  }
  if (u->op == Op::WHERE) return nullptr;  // selects 16-bit values exactly
  if (u->op == Op::REDUCE) {
    if (!u->dtype.is_half()) return nullptr;
    std::vector<UOpPtr> src = u->src;
    src[0] = widen(src[0]);
    return UOp::make(Op::CAST, u->dtype, {UOp::make(Op::REDUCE, f32_like(u->dtype), std::move(src), u->arg)});
  }
  return is_alu(u->op) ? in_f32(*u) : nullptr;
}

const PatternMatcher& half_rules() {
  static const PatternMatcher pm("half_widening",
                                 {{UPat::var("u"), [](const Match& m) { return widen_op(m["u"]); }}});
  return pm;
}

}  // namespace

UOpPtr widen_halves(const UOpPtr& kernel) { return graph_rewrite(kernel, half_rules()); }

}  // namespace loom
