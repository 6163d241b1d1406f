// loom::Dim over the IR: a symbolic size is a simplified Int64 expression whose
// leaves are BIND(DEFINE_VAR, CONST) or DEFINE_VAR nodes, so equal sizes are one
// hash-consed node and their bounds come from range analysis (ir/bounds.cpp).
#include "ir/dim_expr.hpp"
#include "ir/symbolic.hpp"
#include "ir/uop.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <mutex>
#include <ostream>
#include <set>
#include <unordered_map>

namespace loom {

namespace {
// The value of `e` under its bindings; nullopt when a variable in it is not bound.
std::optional<int64_t> evaluate(const UOpPtr& e) {
  switch (e->op) {
    case Op::CONST: return e->const_int();
    case Op::BIND: return e->src[1]->const_int();
    case Op::DEFINE_VAR: return std::nullopt;
    default: break;
  }
  std::vector<UOpPtr> values;
  for (const auto& s : e->src) {
    const auto v = evaluate(s);
    if (!v) return std::nullopt;
    values.push_back(const_int(s->dtype, *v));
  }
  const auto folded = fold_constant(e->op, e->dtype, values);
  if (!folded) throw Error(fmt::format("symbolic size: cannot evaluate {} at its bindings", op_name(e->op)));
  return (*folded)->const_int();
}

void collect_vars(const UOpPtr& e, std::set<std::string>& names) {
  if (e->op == Op::DEFINE_VAR) names.insert(e->get<VarArg>().name);
  for (const auto& s : e->src) collect_vars(s, names);
}

// Infix text of an index expression: "T", "2*T+1", "(T+1)/2".
std::string text(const UOpPtr& e, int parent_precedence) {
  auto infix = [&](std::string_view sym, int prec) {
    std::string s = text(e->src[0], prec) + std::string(sym) + text(e->src[1], prec + 1);
    return prec < parent_precedence ? "(" + s + ")" : s;
  };
  switch (e->op) {
    case Op::CONST: return std::to_string(e->const_int());
    case Op::DEFINE_VAR: return e->get<VarArg>().name;
    case Op::BIND: return e->src[0]->get<VarArg>().name;
    case Op::ADD: return infix("+", 1);
    case Op::SUB: return infix("-", 1);
    case Op::MUL: return infix("*", 2);
    case Op::IDIV: return infix("/", 2);
    case Op::MOD: return infix("%", 2);
    case Op::MAX: return fmt::format("max({}, {})", text(e->src[0], 0), text(e->src[1], 0));
    case Op::NEG: return "-" + text(e->src[0], 3);
    default: return fmt::format("{}(...)", op_name(e->op));
  }
}

UOpPtr as_uop(const Dim& d) { return d.is_symbolic() ? d.expr() : const_int(DType::Int64, d.value()); }

// The sizes of a step over a symbolic batch are combined by the same few operations on
// the same operands at every step (a conv's windows, each reshape's element counts), and
// each combination runs the simplifier: a documented thread-safe cache of the results,
// keyed by the operation and its operands' nodes, which it holds (so no address is reused
// while its entry lives). Emptied whole when full, and by clear_dim_cache.
class DimCache {
 public:
  static DimCache& instance() {
    static auto* cache = new DimCache();  // never destroyed: sizes may be combined at exit
    return *cache;
  }
  // Keyed by the operands as they are, and on a miss by the operands without their
  // bindings, so a size combined at every token of a decode (T=17, then T=18, ...) is
  // simplified once: the simplifier takes a binding for its variable (its bounds, not its
  // value), and the result gets the bindings back.
  Dim combine(Op op, const UOpPtr& a, const UOpPtr& b) {
    if (auto hit = find(op, a, b)) return *hit;
    std::vector<std::pair<UOpPtr, UOpPtr>> bound;  // BIND -> its DEFINE_VAR
    if (!bindings(a, bound) || !bindings(b, bound)) return Dim(simplify(UOp::make(op, DType::Int64, {a, b})));
    if (bound.empty()) return keep(a, b, Dim(simplify(UOp::make(op, DType::Int64, {a, b}))), op);
    const UOpPtr free_a = replaced(a, bound), free_b = replaced(b, bound);
    std::optional<Dim> free = find(op, free_a, free_b);
    if (!free) free = keep(free_a, free_b, Dim(simplify(UOp::make(op, DType::Int64, {free_a, free_b}))), op);
    std::vector<std::pair<UOpPtr, UOpPtr>> rebind;
    for (const auto& [bind, var] : bound) rebind.emplace_back(var, bind);
    return keep(a, b, free->is_symbolic() ? Dim(replaced(free->expr(), rebind)) : *free, op);
  }
  void clear() {
    std::unordered_map<Key, Entry, KeyHash> dropped;
    {
      const std::lock_guard lock(mu_);
      dropped.swap(entries_);
    }
  }

 private:
  // The BIND nodes of `e` added to `bound`; false when one binds a variable `bound` has
  // bound to another value (the operands disagree: simplified as they are, uncached).
  static bool bindings(const UOpPtr& e, std::vector<std::pair<UOpPtr, UOpPtr>>& bound) {
    if (e->op == Op::BIND) {
      for (const auto& [bind, var] : bound)
        if (var == e->src[0]) return bind == e;
      bound.emplace_back(e, e->src[0]);
      return true;
    }
    return std::all_of(e->src.begin(), e->src.end(), [&](const UOpPtr& s) { return bindings(s, bound); });
  }
  // `e` with each `from` node replaced by its `to`: a size's few nodes, rebuilt directly
  // (substitute's general rewrite cost more than the simplifier it saves, at every token).
  static UOpPtr replaced(const UOpPtr& e, const std::vector<std::pair<UOpPtr, UOpPtr>>& map) {
    for (const auto& [from, to] : map)
      if (e == from) return to;
    if (e->src.empty()) return e;
    std::vector<UOpPtr> src;
    bool changed = false;
    for (const auto& x : e->src) {
      src.push_back(replaced(x, map));
      changed |= src.back() != x;
    }
    return changed ? e->with_src(std::move(src)) : e;
  }
  std::optional<Dim> find(Op op, const UOpPtr& a, const UOpPtr& b) {
    const std::lock_guard lock(mu_);
    if (const auto it = entries_.find(Key{op, a.get(), b.get()}); it != entries_.end())
      return it->second.result;
    return std::nullopt;
  }
  Dim keep(const UOpPtr& a, const UOpPtr& b, Dim result, Op op) {
    const std::lock_guard lock(mu_);
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_.emplace(Key{op, a.get(), b.get()}, Entry{a, b, result});
    return result;
  }

  static constexpr size_t kMaxEntries = 4096;
  struct Key {
    Op op;
    const UOp *a, *b;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      const size_t h = std::hash<const UOp*>()(k.a) * 31 + std::hash<const UOp*>()(k.b);
      return h * 31 + static_cast<size_t>(k.op);
    }
  };
  struct Entry {
    UOpPtr a, b;  // held: the key's addresses stay theirs
    Dim result;
  };
  std::mutex mu_;
  std::unordered_map<Key, Entry, KeyHash> entries_;
};

Dim combine(Op op, const Dim& a, const Dim& b) {
  return DimCache::instance().combine(op, as_uop(a), as_uop(b));
}
}  // namespace

void clear_dim_cache() { DimCache::instance().clear(); }

Dim::Dim(std::shared_ptr<const UOp> expr) {
  if (!expr || expr->dtype != DType::Int64)
    throw Error("Dim: a symbolic size is an Int64 expression over variables");
  if (expr->op == Op::CONST) {
    value_ = expr->const_int();
    return;
  }
  const auto v = evaluate(expr);
  value_ = v.value_or(0);
  bound_ = v.has_value();
  expr_ = std::move(expr);
}

int64_t Dim::value() const {
  if (!expr_) return value_;
  if (!bound_)
    throw Error(fmt::format("the size {} has a variable that is not bound (use Variable::bind)", str()));
  return value_;
}
int64_t Dim::min() const { return expr_ ? expr_->vmin() : value_; }
int64_t Dim::max() const { return expr_ ? expr_->vmax() : value_; }

int64_t Dim::concrete(std::string_view what) const {
  if (!expr_) return value_;
  const auto names = variables(*this);
  throw Error(fmt::format("{}{}the size {} is symbolic (variable {}), but a concrete size is required here",
                          what, what.empty() ? "" : ": ", str(), fmt::join(names, ", ")));
}

std::string Dim::str() const {
  if (!expr_) return std::to_string(value_);
  const std::string t = text(expr_, 0);
  return bound_ ? fmt::format("{}={}", t, value_) : t;
}

bool operator==(const Dim& a, const Dim& b) {
  return a.is_symbolic() || b.is_symbolic() ? a.expr_ == b.expr_ : a.value_ == b.value_;
}

Dim operator+(const Dim& a, const Dim& b) {
  return a.is_symbolic() || b.is_symbolic() ? combine(Op::ADD, a, b) : Dim(a.value() + b.value());
}
Dim operator-(const Dim& a, const Dim& b) {
  return a.is_symbolic() || b.is_symbolic() ? combine(Op::SUB, a, b) : Dim(a.value() - b.value());
}
Dim operator*(const Dim& a, const Dim& b) {
  return a.is_symbolic() || b.is_symbolic() ? combine(Op::MUL, a, b) : Dim(a.value() * b.value());
}
Dim operator/(const Dim& a, const Dim& b) {
  if (!b.is_symbolic() && b.value() == 0) throw Error(fmt::format("size {} divided by zero", a.str()));
  return a.is_symbolic() || b.is_symbolic() ? combine(Op::IDIV, a, b) : Dim(a.value() / b.value());
}
Dim operator%(const Dim& a, const Dim& b) {
  if (!b.is_symbolic() && b.value() == 0) throw Error(fmt::format("size {} modulo zero", a.str()));
  return a.is_symbolic() || b.is_symbolic() ? combine(Op::MOD, a, b) : Dim(a.value() % b.value());
}
Dim max(const Dim& a, const Dim& b) {
  return a.is_symbolic() || b.is_symbolic() ? combine(Op::MAX, a, b) : Dim(std::max(a.value(), b.value()));
}
Dim min(const Dim& a, const Dim& b) {
  return a.is_symbolic() || b.is_symbolic() ? Dim(0) - max(Dim(0) - a, Dim(0) - b)
                                            : Dim(std::min(a.value(), b.value()));
}

bool operator<(const Dim& a, const Dim& b) {
  if (!a.is_symbolic() && !b.is_symbolic()) return a.value() < b.value();
  const Dim d = b - a;  // a < b for every value exactly when d > 0 for every value
  if (d.min() > 0) return true;
  if (d.max() <= 0) return false;
  const auto names = variables(d);
  throw Error(fmt::format(
      "whether {} < {} depends on the value of {} (bounds [{}, {}] of their difference); loom decides sizes "
      "for every value a variable may take",
      a.str(), b.str(), fmt::join(names, ", "), d.min(), d.max()));
}

Shape::operator std::vector<int64_t>() const { return concrete(*this); }
std::ostream& operator<<(std::ostream& os, const Dim& d) { return os << d.str(); }
std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << str(s); }

std::vector<int64_t> concrete(const Shape& shape, std::string_view what) {
  std::vector<int64_t> out;
  out.reserve(shape.size());
  for (const Dim& d : shape) out.push_back(d.concrete(what));
  return out;
}
Shape to_shape(const std::vector<int64_t>& sizes) { return Shape(sizes.begin(), sizes.end()); }
bool is_symbolic(const Shape& shape) {
  return std::any_of(shape.begin(), shape.end(), [](const Dim& d) { return d.is_symbolic(); });
}
std::string str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + shape[i].str();
  return s + "]";
}

// ---- ir/dim_expr.hpp ----------------------------------------------------------------------------
std::vector<std::string> variables(const Dim& d) {
  std::set<std::string> names;
  if (d.is_symbolic()) collect_vars(d.expr(), names);
  return {names.begin(), names.end()};
}

UOpPtr dim_uop(const Dim& d) { return as_uop(d); }

UOpPtr bind_var(const UOpPtr& var, int64_t value) {
  return UOp::make(Op::BIND, DType::Int64, {var, const_int(DType::Int64, value)});
}

}  // namespace loom
