// Integer range analysis: [vmin, vmax] of every integer node, from RANGE and
// DEFINE_VAR bounds. Computed once per node when it is built, so the simplifier
// reads bounds in O(1). Any result that could overflow its dtype falls back to
// the dtype's full range: the hardware wraps, so a narrower claim would be false.
#include "ir/infer.hpp"
#include "ir/int_arith.hpp"

#include <algorithm>
#include <bit>
#include <initializer_list>
#include <optional>

namespace loom {

namespace {
using Bounds = std::pair<int64_t, int64_t>;

Bounds fit(DType dt, Wide lo, Wide hi) {
  if (lo > hi || !fits(dt, lo) || !fits(dt, hi)) return int_range(dt);
  return {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}
Bounds fit(DType dt, Bounds b) { return fit(dt, b.first, b.second); }

Bounds hull(Bounds a, Bounds b) { return {std::min(a.first, b.first), std::max(a.second, b.second)}; }

// Exact min and max of f over the corners of the box a x b. Right for every op
// here because each is monotone in each argument while the other is fixed.
template <class F>
std::pair<Wide, Wide> corners(const Bounds& a, const Bounds& b, F f) {
  Wide lo = 0, hi = 0;
  bool first = true;
  for (int64_t x : {a.first, a.second})
    for (int64_t y : {b.first, b.second}) {
      const Wide v = f(Wide{x}, Wide{y});
      lo = first ? v : std::min(lo, v);
      hi = first ? v : std::max(hi, v);
      first = false;
    }
  return {lo, hi};
}

Bounds of(const UOpPtr& u) { return {u->vmin(), u->vmax()}; }

// Truncating division (sdiv). The divisor's range splits into its negative and
// positive parts, each monotone; a zero divisor gives 0 (docs/kernel-ir.md).
// A divisor that is certainly 0 claims nothing, so no fold rests on it.
Bounds idiv_bounds(DType dt, Bounds a, Bounds b) {
  if (b == Bounds{0, 0}) return int_range(dt);
  std::optional<Bounds> out;
  auto join = [&](Bounds part) {
    auto [lo, hi] = corners(a, part, [](Wide x, Wide y) { return x / y; });
    const Bounds r = fit(dt, lo, hi);  // kMin / -1 = 2^63 does not fit: full range, sound
    out = out ? hull(*out, r) : r;
  };
  if (b.first <= -1) join({b.first, std::min<int64_t>(b.second, -1)});
  if (b.second >= 1) join({std::max<int64_t>(b.first, 1), b.second});
  if (b.first <= 0 && b.second >= 0) out = out ? hull(*out, {0, 0}) : Bounds{0, 0};
  return *out;
}

// Truncating remainder (srem): the sign of the dividend, |r| < |divisor|, and 0
// for a zero divisor (but a divisor certainly 0 claims nothing, as for IDIV).
// Within one period of a constant divisor it is monotone.
Bounds mod_bounds(DType dt, Bounds a, Bounds b) {
  if (b == Bounds{0, 0}) return int_range(dt);
  const Wide m = std::max(-Wide{b.first}, Wide{b.second}) - 1;  // largest |r|
  if (b.first == b.second && a.first / (m + 1) == a.second / (m + 1) && (a.first >= 0 || a.second <= 0))
    return {static_cast<int64_t>(a.first % (m + 1)), static_cast<int64_t>(a.second % (m + 1))};
  const int64_t lo = a.first >= 0 ? 0 : static_cast<int64_t>(std::max<Wide>(a.first, -m));
  const int64_t hi = a.second <= 0 ? 0 : static_cast<int64_t>(std::min<Wide>(a.second, m));
  return {lo, hi};
}

Bounds compare_bounds(Op op, Bounds a, Bounds b) {
  bool always = false, never = false;
  if (op == Op::CMPLT) {
    always = a.second < b.first;
    never = a.first >= b.second;
  } else {
    const bool disjoint = a.second < b.first || b.second < a.first;
    const bool same_const = a.first == a.second && b.first == b.second && a.first == b.first;
    always = op == Op::CMPNE ? disjoint : same_const;
    never = op == Op::CMPNE ? same_const : disjoint;
  }
  if (always) return {1, 1};
  if (never) return {0, 0};
  return {0, 1};
}

// Smallest 2^k - 1 >= v, for v >= 0: a bound on OR and XOR of non-negative values.
int64_t all_ones_above(int64_t v) {
  return v == 0 ? 0 : static_cast<int64_t>((~uint64_t{0}) >> std::countl_zero(static_cast<uint64_t>(v)));
}

Bounds bitwise_bounds(Op op, DType dt, Bounds a, Bounds b) {
  if (dt.is_bool()) {  // bools are 0/1 and AND/OR are monotone in both
    if (op == Op::AND) return {a.first & b.first, a.second & b.second};
    if (op == Op::OR) return {a.first | b.first, a.second | b.second};
    return int_range(dt);
  }
  const bool a_pos = a.first >= 0, b_pos = b.first >= 0;
  if (op == Op::AND && (a_pos || b_pos))  // x & m with m >= 0 lies in [0, m]
    return {0, a_pos && b_pos ? std::min(a.second, b.second) : a_pos ? a.second : b.second};
  if (!a_pos || !b_pos) return int_range(dt);
  const int64_t ones = all_ones_above(std::max(a.second, b.second));
  if (op == Op::OR) return {std::max(a.first, b.first), ones};
  return {0, ones};  // XOR
}

// Shifts by a count outside [0, bits) give 0; inside, x << k = x * 2^k (wrapping)
// and x >> k is monotone in x and in k. A count certainly outside claims nothing.
Bounds shift_bounds(Op op, DType dt, Bounds a, Bounds k) {
  const bool some_outside = k.first < 0 || k.second >= dt.bits();
  const Bounds in{std::max<int64_t>(k.first, 0), std::min<int64_t>(k.second, dt.bits() - 1)};
  if (in.first > in.second) return int_range(dt);
  auto [lo, hi] = corners(a, in, [op](Wide x, Wide s) {
    return op == Op::SHL ? x * (Wide{1} << static_cast<int>(s)) : x >> static_cast<int>(s);
  });
  const Bounds r = fit(dt, lo, hi);
  return some_outside ? hull(r, {0, 0}) : r;
}

Bounds cast_bounds(DType dt, const UOpPtr& x) {
  const Bounds s = of(x);
  if (x->dtype.is_float()) return dt.is_bool() ? Bounds{0, 1} : int_range(dt);  // saturates: no tighter claim
  if (dt.is_bool())
    return s.first > 0 || s.second < 0 ? Bounds{1, 1} : s == Bounds{0, 0} ? Bounds{0, 0} : Bounds{0, 1};
  return fit(dt, s);  // narrowing that could wrap falls back to the full range
}

Bounds where_bounds(Bounds c, Bounds a, Bounds b) {
  if (c.first == 1) return a;
  if (c.second == 0) return b;
  return hull(a, b);
}

Bounds const_bounds(const Arg& arg) {
  if (const auto* i = std::get_if<int64_t>(&arg)) return {*i, *i};
  return {static_cast<int64_t>(std::get<double>(arg)), static_cast<int64_t>(std::get<double>(arg))};
}
}  // namespace

std::pair<int64_t, int64_t> infer_bounds(Op op, DType dt, const std::vector<UOpPtr>& src, const Arg& arg) {
  if (dt.is_float() || dt.ptr) return int_range(DType::Int64);  // unknown
  auto s = [&](size_t i) { return of(src.at(i)); };
  auto exact = [&](auto f) {
    auto [lo, hi] = corners(s(0), s(1), f);
    return fit(dt, lo, hi);
  };
  switch (op) {
    case Op::CONST: return const_bounds(arg);
    case Op::DEFINE_VAR: return {std::get<VarArg>(arg).min, std::get<VarArg>(arg).max};
    case Op::BIND: return s(0);  // every value the variable may take: the binding is not the kernel's
    case Op::RANGE: return fit(dt, {0, std::max<int64_t>(0, src.at(0)->vmax() - 1)});
    case Op::ADD: return exact([](Wide x, Wide y) { return x + y; });
    case Op::SUB: return exact([](Wide x, Wide y) { return x - y; });
    case Op::MUL: return exact([](Wide x, Wide y) { return x * y; });
    case Op::NEG: return fit(dt, -Wide{s(0).second}, -Wide{s(0).first});
    case Op::MULACC: {
      auto [lo, hi] = corners(s(0), s(1), [](Wide x, Wide y) { return x * y; });
      return fit(dt, lo + s(2).first, hi + s(2).second);
    }
    case Op::IDIV: return idiv_bounds(dt, s(0), s(1));
    case Op::MOD: return mod_bounds(dt, s(0), s(1));
    case Op::MAX: return {std::max(s(0).first, s(1).first), std::max(s(0).second, s(1).second)};
    case Op::CMPLT:
    case Op::CMPNE:
    case Op::CMPEQ: return src.at(0)->dtype.is_float() ? Bounds{0, 1} : compare_bounds(op, s(0), s(1));
    case Op::AND:
    case Op::OR:
    case Op::XOR: return bitwise_bounds(op, dt, s(0), s(1));
    case Op::SHL:
    case Op::SHR: return shift_bounds(op, dt, s(0), s(1));
    case Op::WHERE: return where_bounds(s(0), s(1), s(2));
    case Op::CAST: return cast_bounds(dt, src.at(0));
    case Op::GEP: return s(0);  // a vector's bounds hold for every lane
    case Op::VECTORIZE: {
      Bounds b = s(0);
      for (size_t i = 1; i < src.size(); ++i) b = hull(b, s(i));
      return b;
    }
    default: return int_range(dt);
  }
}

}  // namespace loom
