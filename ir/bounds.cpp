// Integer range analysis: [vmin, vmax] of every integer node, from RANGE and
// DEFINE_VAR bounds. Computed once per node when it is built, so the simplifier
// reads bounds in O(1). Any result that could overflow its dtype falls back to
// the dtype's full range: the hardware wraps, so a narrower claim would be false.
#include "ir/infer.hpp"

#include <algorithm>
#include <limits>

namespace loom {

namespace {
using Bounds = std::pair<int64_t, int64_t>;
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

Bounds dtype_range(DType dt) {
  switch (dt.scalar) {
  case Scalar::Bool: return {0, 1};
  case Scalar::UInt8: return {0, 255};
  case Scalar::Int32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  default: return {kMin, kMax};
  }
}

Bounds fit(DType dt, Bounds b) {
  Bounds r = dtype_range(dt);
  if (b.first < r.first || b.second > r.second || b.first > b.second) return r;
  return b;
}

// Min and max over the given candidate values; nullopt if any overflowed.
template <class F>
std::optional<Bounds> corners(const Bounds& a, const Bounds& b, F f) {
  int64_t lo = kMax, hi = kMin;
  for (int64_t x : {a.first, a.second})
    for (int64_t y : {b.first, b.second}) {
      int64_t v;
      if (f(x, y, &v)) return std::nullopt;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  return Bounds{lo, hi};
}

Bounds of(const UOpPtr& u) { return {u->vmin(), u->vmax()}; }

Bounds idiv_bounds(DType dt, Bounds a, Bounds b) {
  if (b.first <= 0 && b.second >= 0) return dtype_range(dt);  // divisor may be 0 (gives 0) or flip sign
  auto r = corners(a, b, [](int64_t x, int64_t y, int64_t* v) {
    if (x == kMin && y == -1) return true;
    *v = x / y;  // C++ truncates like LLVM's sdiv
    return false;
  });
  return r ? fit(dt, *r) : dtype_range(dt);
}

Bounds mod_bounds(DType dt, Bounds a, Bounds b) {
  if (b.first <= 0 && b.second >= 0) return dtype_range(dt);
  // |x % y| < |y| and the result takes the sign of x (truncating srem).
  int64_t m = std::max(b.first == kMin ? kMax : std::abs(b.first), b.second == kMin ? kMax : std::abs(b.second)) - 1;
  if (a.first >= 0) return {0, std::min(a.second, m)};
  if (a.second <= 0) return {std::max(a.first, -m), 0};
  return {std::max(a.first, -m), std::min(a.second, m)};
}

Bounds compare_bounds(Op op, Bounds a, Bounds b) {
  bool always = false, never = false;
  if (op == Op::CMPLT) {
    always = a.second < b.first;
    never = a.first >= b.second;
  } else {
    bool disjoint = a.second < b.first || b.second < a.first;
    bool same_const = a.first == a.second && b.first == b.second && a.first == b.first;
    always = op == Op::CMPNE ? disjoint : same_const;
    never = op == Op::CMPNE ? same_const : disjoint;
  }
  if (always) return {1, 1};
  if (never) return {0, 0};
  return {0, 1};
}
}  // namespace

std::pair<int64_t, int64_t> infer_bounds(Op op, DType dt, const std::vector<UOpPtr>& src, const Arg& arg) {
  if (dt.is_float() || dt.ptr) return {kMin, kMax};
  auto s = [&](size_t i) { return of(src.at(i)); };
  auto checked = [&](auto f) {
    auto r = corners(s(0), s(1), f);
    return r ? fit(dt, *r) : dtype_range(dt);
  };
  switch (op) {
  case Op::CONST: {
    int64_t v = std::holds_alternative<int64_t>(arg) ? std::get<int64_t>(arg) : 0;
    return {v, v};
  }
  case Op::DEFINE_VAR: {
    const auto& v = std::get<VarArg>(arg);
    return {v.min, v.max};
  }
  case Op::RANGE: return fit(dt, {0, std::max<int64_t>(0, src.at(0)->vmax() - 1)});
  case Op::ADD: return checked([](int64_t x, int64_t y, int64_t* v) { return __builtin_add_overflow(x, y, v); });
  case Op::SUB: return checked([](int64_t x, int64_t y, int64_t* v) { return __builtin_sub_overflow(x, y, v); });
  case Op::MUL: return checked([](int64_t x, int64_t y, int64_t* v) { return __builtin_mul_overflow(x, y, v); });
  case Op::NEG: return s(0).first == kMin ? dtype_range(dt) : fit(dt, {-s(0).second, -s(0).first});
  case Op::IDIV: return idiv_bounds(dt, s(0), s(1));
  case Op::MOD: return mod_bounds(dt, s(0), s(1));
  case Op::MAX: return {std::max(s(0).first, s(1).first), std::max(s(0).second, s(1).second)};
  case Op::CMPLT:
  case Op::CMPNE:
  case Op::CMPEQ: return src.at(0)->dtype.is_float() ? Bounds{0, 1} : compare_bounds(op, s(0), s(1));
  case Op::AND:
    if (dt.is_bool()) return {s(0).first & s(1).first, s(0).second & s(1).second};
    if (s(0).first >= 0 && s(1).first >= 0) return {0, std::min(s(0).second, s(1).second)};
    return dtype_range(dt);
  case Op::OR:
    if (dt.is_bool()) return {s(0).first | s(1).first, s(0).second | s(1).second};
    return dtype_range(dt);
  case Op::WHERE: {
    Bounds c = s(0);
    if (c.first == 1) return s(1);
    if (c.second == 0) return s(2);
    return {std::min(s(1).first, s(2).first), std::max(s(1).second, s(2).second)};
  }
  case Op::CAST:
    if (dt.is_bool()) return {0, 1};
    if (src.at(0)->dtype.is_float()) return dtype_range(dt);
    return fit(dt, s(0));
  default: return dtype_range(dt);
  }
}

}  // namespace loom
