// Property test of the simplifier and range analysis: random integer index
// expressions over bounded variables and ranges (fixed seed). For each one,
//  - the simplified expression has the original's value on every sampled
//    assignment (every corner of the leaves' bounds, plus random interior points),
//  - vmin <= value <= vmax for every node of both graphs,
//  - simplifying again changes nothing.
// Values come from a small evaluator written here, independent of the
// simplifier: two's-complement wrapping, truncating division, x/0 = x%0 = 0.
#include "ir/symbolic.hpp"
#include "ir/text.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <unordered_map>

using namespace loom;

namespace {

struct Rng {  // splitmix64: the same sequence on every platform
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int64_t in(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool chance(int percent) { return in(1, 100) <= percent; }
};

// ---- the evaluator ------------------------------------------------------------------
int64_t wrap(DType dt, int64_t v) {
  if (dt == DType::Int32) return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
  if (dt == DType::UInt8) return v & 0xff;
  if (dt == DType::Bool) return v != 0;
  return v;
}
int64_t add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
int64_t lowest(DType dt) { return dt == DType::Int32 ? INT32_MIN : INT64_MIN; }
int64_t divide(DType dt, Op op, int64_t x, int64_t y) {  // UInt8 values are 0..255: unsigned
  if (y == 0) return 0;
  if (y == -1) return op == Op::IDIV ? (x == lowest(dt) ? x : -x) : 0;
  return op == Op::IDIV ? x / y : x % y;
}

using Assignment = std::map<std::string, int64_t>;  // variable name or "r<axis>" -> value
using Values = std::unordered_map<const UOp*, int64_t>;

std::string leaf_key(const UOp& u) {
  return u.op == Op::RANGE ? "r" + std::to_string(u.get<AxisArg>().id) : u.get<VarArg>().name;
}

int64_t eval_node(const UOp& u, const Assignment& env, const Values& v) {
  auto s = [&](size_t i) { return v.at(u.src[i].get()); };
  const DType dt = u.dtype;
  switch (u.op) {
    case Op::CONST: return u.const_int();
    case Op::DEFINE_VAR:
    case Op::RANGE: return env.at(leaf_key(u));
    case Op::ADD: return wrap(dt, add(s(0), s(1)));
    case Op::SUB: return wrap(dt, add(s(0), mul(s(1), -1)));
    case Op::MUL: return wrap(dt, mul(s(0), s(1)));
    case Op::NEG: return wrap(dt, mul(s(0), -1));
    case Op::IDIV:
    case Op::MOD: return divide(dt, u.op, s(0), s(1));
    case Op::MAX: return std::max(s(0), s(1));
    case Op::CMPLT: return s(0) < s(1);
    case Op::CMPNE: return s(0) != s(1);
    case Op::CMPEQ: return s(0) == s(1);
    case Op::AND: return s(0) & s(1);
    case Op::OR: return s(0) | s(1);
    case Op::WHERE: return s(0) ? s(1) : s(2);
    case Op::CAST: return wrap(dt, s(0));
    default: FAIL("evaluator: unexpected op ", op_name(u.op)); return 0;
  }
}

Values eval_all(const std::vector<UOpPtr>& order, const Assignment& env) {
  Values v;
  for (const auto& n : order) v[n.get()] = eval_node(*n, env, v);
  return v;
}

// ---- the generator ----------------------------------------------------------------------
struct Leaves {
  std::vector<UOpPtr> vars = {make_var("a", -8, 8), make_var("b", -3, 5), make_var("c", 1, 6),
                              make_var("d", -7, -2), make_var("e", 0, 100)};
  UOpPtr c_end_range = UOp::make(Op::RANGE, DType::Int64, {vars[2]}, AxisArg{3, AxisKind::Loop});  // [0, c)
  std::vector<UOpPtr> ranges = {make_range(4, 0), make_range(12, 1), make_range(1, 2), c_end_range};
  // Int32 and UInt8 expressions see wide variables through a CAST, and large constants, so they wrap.
  std::vector<UOpPtr> wide = {make_var("p", -3000000000LL, 3000000000LL), make_var("q", 0, 2147483647)};
};

struct Generator {
  Rng& rng;
  const Leaves& leaves;
  DType dt;

  UOpPtr k(int64_t v) { return const_int(dt, wrap(dt, v)); }  // UInt8: -1 is 255
  UOpPtr constant() {
    static const int64_t small[] = {-13, -8, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24};
    static const int64_t big[] = {65536, 1 << 30, 2147483647, -2147483647 - 1, 1000000007, -46341, 46341};
    if (dt == DType::Int32 && rng.chance(30)) return k(big[rng.in(0, 6)]);
    if (dt == DType::UInt8 && rng.chance(30)) return k(rng.in(100, 255));
    return k(rng.chance(70) ? small[rng.in(0, 18)] : rng.in(-30, 30));
  }
  UOpPtr leaf() {
    const int n = static_cast<int>(rng.in(0, 9));
    if (dt != DType::Int64) {
      if (n < 3) return cast(leaves.wide[rng.in(0, 1)], dt);
      if (n < 7) return cast(n < 5 ? leaves.vars[rng.in(0, 4)] : leaves.ranges[rng.in(0, 3)], dt);
      return constant();
    }
    if (n < 4) return leaves.vars[rng.in(0, 4)];
    if (n < 7) return leaves.ranges[rng.in(0, 3)];
    return constant();
  }
  UOpPtr divisor(int depth) {
    if (rng.chance(75)) {
      UOpPtr c = constant();
      return c->const_int() == 0 ? k(4) : c;
    }
    return expr(depth - 1);  // may be zero: x/0 and x%0 give 0
  }
  UOpPtr condition(int depth) {
    const int n = static_cast<int>(rng.in(0, 5));
    UOpPtr a = expr(depth - 1), b = rng.chance(60) ? constant() : expr(depth - 1);
    if (n == 0) return ne(a, b);
    if (n == 1) return eq(a, b);
    if (n == 2) return land(a < b, condition(depth - 1));
    if (n == 3) return ne(a < b, const_int(DType::Bool, 1));  // a >= b
    return rng.chance(50) ? a < b : b < a;
  }
  // Index arithmetic as rangeify builds it: sums of scaled terms whose
  // coefficients share factors with the divisors, then divided or reduced.
  UOpPtr index_like(int depth) {
    static const int64_t coefs[] = {1, 1, 2, 3, 4, 4, 6, 8, 12, 16, -1, -4, -12};
    static const int64_t divisors[] = {2, 3, 4, 4, 6, 8, 12, 16, 24, -4};
    UOpPtr sum = k(rng.chance(50) ? 0 : rng.in(-12, 30));
    for (int64_t i = rng.in(1, 3); i > 0; --i) {
      const UOpPtr term = depth > 1 && rng.chance(40) ? index_like(depth - 1) : leaf();
      sum = sum + term * k(coefs[rng.in(0, 12)]);
    }
    if (rng.chance(30)) return sum;
    const UOpPtr d = k(divisors[rng.in(0, 9)]);
    return rng.chance(50) ? sum / d : sum % d;
  }
  // (e/c)*c + e%c and ((e/c)%d)*c + e%c: the shapes a reshape round trip leaves.
  UOpPtr recombined(int depth) {
    const UOpPtr e = index_like(depth - 1);
    const int64_t c = rng.in(2, 6), d = rng.in(2, 4);
    const UOpPtr cc = k(c), low = e % cc;
    const UOpPtr high = rng.chance(50) ? e / cc : (e / cc) % k(d);
    return high * cc + low + (rng.chance(50) ? k(0) : leaf());
  }
  UOpPtr expr(int depth) {
    if (depth <= 0 || rng.chance(20)) return leaf();
    switch (rng.in(0, 13)) {
      case 11:
      case 12: return index_like(depth);
      case 13: return recombined(depth);
      case 0:
      case 1: return expr(depth - 1) + expr(depth - 1);
      case 2: return expr(depth - 1) - expr(depth - 1);
      case 3:
      case 4: return expr(depth - 1) * (rng.chance(70) ? constant() : expr(depth - 1));
      case 5: return expr(depth - 1) / divisor(depth);
      case 6: return expr(depth - 1) % divisor(depth);
      case 7: return umax(expr(depth - 1), expr(depth - 1));
      case 8: return -expr(depth - 1);
      case 9: return where(condition(depth), expr(depth - 1), expr(depth - 1));
      default: return cast(condition(depth), dt);
    }
  }
};

// ---- sampling -------------------------------------------------------------------------------
std::vector<UOpPtr> leaves_of(const UOpPtr& root) {
  std::vector<UOpPtr> out;
  for (const auto& n : toposort(root))
    if (n->op == Op::DEFINE_VAR || n->op == Op::RANGE) out.push_back(n);
  return out;
}

// Every combination of each leaf at its lowest or highest value, then random
// points. A range's end may be a variable, so leaves are drawn sources first.
std::vector<Assignment> samples(const std::vector<UOpPtr>& leaves, Rng& rng, int random_points) {
  std::vector<Assignment> out;
  auto pick = [&](const UOpPtr& leaf, const Assignment& env, int mode) -> int64_t {
    int64_t lo = 0, hi = 0;
    if (leaf->op == Op::DEFINE_VAR) {
      lo = leaf->get<VarArg>().min;
      hi = leaf->get<VarArg>().max;
    } else {
      const UOpPtr& end = leaf->src[0];
      hi = (end->op == Op::CONST ? end->const_int() : env.at(leaf_key(*end))) - 1;
    }
    return mode == 0 ? lo : mode == 1 ? hi : rng.in(lo, hi);
  };
  const size_t n = leaves.size();
  const uint64_t all = (uint64_t{1} << n) - 1;
  const bool every_corner = n <= 6;  // else all-low, all-high and 62 random corners
  for (uint64_t k = 0; k < (every_corner ? all + 1 : 64); ++k) {
    const uint64_t mask = every_corner || k == 0 ? k : k == 1 ? all : rng.next() & all;
    Assignment env;
    for (size_t i = 0; i < n; ++i) env[leaf_key(*leaves[i])] = pick(leaves[i], env, (mask >> i) & 1);
    out.push_back(env);
  }
  for (int k = 0; k < random_points; ++k) {
    Assignment env;
    for (const auto& leaf : leaves) env[leaf_key(*leaf)] = pick(leaf, env, 2);
    out.push_back(env);
  }
  return out;
}

bool in_bounds(const UOpPtr& n, int64_t v) { return n->vmin() <= v && v <= n->vmax(); }

int check_expression(const UOpPtr& e, Rng& rng) {
  const UOpPtr s = simplify(e);
  INFO("original:\n", to_text(e), "simplified:\n", to_text(s));
  CHECK(simplify(s) == s);
  const auto e_order = toposort(e), s_order = toposort(s);
  int checks = 0;
  for (const auto& env : samples(leaves_of(e), rng, 8)) {
    const Values ve = eval_all(e_order, env), vs = eval_all(s_order, env);
    if (ve.at(e.get()) != vs.at(s.get())) {
      std::string where;
      for (const auto& [k, v] : env) where += k + "=" + std::to_string(v) + " ";
      FAIL_CHECK("value differs at ", where, ": ", ve.at(e.get()), " vs ", vs.at(s.get()));
      return checks;
    }
    for (const auto* order : {&e_order, &s_order})
      for (const auto& n : *order) {
        const int64_t v = (order == &e_order ? ve : vs).at(n.get());
        if (!in_bounds(n, v)) {
          FAIL_CHECK("bounds [", n->vmin(), ", ", n->vmax(), "] miss value ", v, " of\n", to_text(n));
          return checks;
        }
      }
    ++checks;
  }
  return checks;
}

int run(DType dt, uint64_t seed, int count, int depth) {
  Rng rng{seed};
  const Leaves leaves;
  Generator gen{rng, leaves, dt};
  int checks = 0;
  for (int i = 0; i < count; ++i) checks += check_expression(gen.expr(depth), rng);
  return checks;
}

}  // namespace

TEST_CASE("property: simplified Int64 index expressions keep their value and bounds") {
  CHECK(run(DType::Int64, 20240601, 3000, 4) > 3000 * 4);
}

TEST_CASE("property: simplified Int32 expressions keep their value where arithmetic wraps") {
  CHECK(run(DType::Int32, 77, 1500, 3) > 1500 * 4);
}

TEST_CASE("property: simplified UInt8 expressions keep their value (8-bit wrapping, unsigned division)") {
  CHECK(run(DType::UInt8, 5, 800, 3) > 800 * 4);
}
