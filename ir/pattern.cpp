#include "ir/pattern.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <unordered_map>

namespace loom {

// ---- UPat ---------------------------------------------------------------------------
UPat UPat::var(std::string name, std::vector<DType> dtypes) {
  UPat p;
  p.name_ = std::move(name);
  p.dtypes_ = std::move(dtypes);
  return p;
}
UPat UPat::cvar(std::string name, std::vector<DType> dtypes) {
  UPat p = var(std::move(name), std::move(dtypes));
  p.op_mask_ = 1ULL << static_cast<int>(Op::CONST);
  return p;
}
UPat UPat::cnst(double v) {
  UPat p = cvar();
  p.const_value_ = v;
  return p;
}
UPat UPat::op(Op op, std::vector<UPat> src, std::string name) {
  UPat p;
  p.op_mask_ = 1ULL << static_cast<int>(op);
  p.any_order_ = is_commutative(op) && src.size() >= 2;
  p.src_ = std::make_shared<const std::vector<UPat>>(std::move(src));
  p.name_ = std::move(name);
  return p;
}
UPat UPat::ops(std::vector<Op> ops, std::string name) {
  UPat p;
  for (Op o : ops) p.op_mask_ |= 1ULL << static_cast<int>(o);
  p.name_ = std::move(name);
  return p;
}
UPat UPat::named(std::string name) const {
  UPat p = *this;
  p.name_ = std::move(name);
  return p;
}
UPat UPat::with_dtypes(std::vector<DType> dtypes) const {
  UPat p = *this;
  p.dtypes_ = std::move(dtypes);
  return p;
}
UPat UPat::with_arg(Arg arg) const {
  UPat p = *this;
  p.arg_ = std::move(arg);
  return p;
}
UPat UPat::allow_more_src() const {
  UPat p = *this;
  p.allow_more_ = true;
  return p;
}

using Captures = std::vector<std::pair<std::string_view, UOpPtr>>;

// Matching backtracks fully: every way a pattern can bind (each operand order
// of a commutative op, at every depth) is offered to a continuation, the rest
// of the match, until one succeeds. So (a*y)/y matches (y*a)/y: the inner MUL
// retries its other order when the outer `y` would not bind the same node.
bool UPat::match(const UOpPtr& u, Captures& caps) const {
  auto done = [](Captures&) { return true; };
  return match_then(u, caps, Continuation::of(done));
}

bool UPat::match_then(const UOpPtr& u, Captures& caps, Continuation rest) const {
  if (op_mask_ && !(op_mask_ & (1ULL << static_cast<int>(u->op)))) return false;
  if (!dtypes_.empty() && std::find(dtypes_.begin(), dtypes_.end(), u->dtype) == dtypes_.end()) return false;
  if (arg_ && !arg_equal(*arg_, u->arg)) return false;
  if (const_value_ && !(u->op == Op::CONST && u->const_value() == *const_value_)) return false;
  const size_t mark = caps.size();
  if (!name_.empty()) {
    auto it = std::find_if(caps.begin(), caps.end(), [&](const auto& c) { return c.first == name_; });
    if (it != caps.end()) {
      if (it->second != u) return false;  // a name used twice must bind the same node
    } else {
      caps.emplace_back(name_, u);
    }
  }
  if (src_ ? match_src(u, *src_, caps, rest) : rest(caps)) return true;
  caps.resize(mark);
  return false;
}

bool UPat::match_src(const UOpPtr& u, const std::vector<UPat>& pats, Captures& caps,
                     Continuation rest) const {
  if (allow_more_ ? u->src.size() < pats.size() : u->src.size() != pats.size()) return false;
  if (pats.size() > kMaxSrc) throw Error("UPat: a pattern may list at most 16 sources");
  std::array<uint8_t, kMaxSrc> order{};
  for (size_t i = 0; i < pats.size(); ++i) order[i] = static_cast<uint8_t>(i);
  do {
    if (match_from(u, pats, order.data(), 0, caps, rest)) return true;
  } while (any_order_ && std::next_permutation(order.begin(), order.begin() + pats.size()));
  return false;
}

// Sources order[i..] against pats[i..], then the rest of the match.
bool UPat::match_from(const UOpPtr& u, const std::vector<UPat>& pats, const uint8_t* order, size_t i,
                      Captures& caps, Continuation rest) {
  if (i == pats.size()) return rest(caps);
  auto next = [&](Captures& c) { return match_from(u, pats, order, i + 1, c, rest); };
  return pats[i].match_then(u->src[order[i]], caps, Continuation::of(next));
}

namespace {
UPat bin(Op op, const UPat& a, const UPat& b) { return UPat::op(op, {a, b}); }
}  // namespace
UPat operator+(const UPat& a, const UPat& b) { return bin(Op::ADD, a, b); }
UPat operator-(const UPat& a, const UPat& b) { return bin(Op::SUB, a, b); }
UPat operator*(const UPat& a, const UPat& b) { return bin(Op::MUL, a, b); }
UPat operator/(const UPat& a, const UPat& b) { return bin(Op::IDIV, a, b); }
UPat operator%(const UPat& a, const UPat& b) { return bin(Op::MOD, a, b); }
UPat operator<(const UPat& a, const UPat& b) { return bin(Op::CMPLT, a, b); }
UPat operator+(const UPat& a, double c) { return a + UPat::cnst(c); }
UPat operator-(const UPat& a, double c) { return a - UPat::cnst(c); }
UPat operator*(const UPat& a, double c) { return a * UPat::cnst(c); }
UPat operator/(const UPat& a, double c) { return a / UPat::cnst(c); }
UPat operator%(const UPat& a, double c) { return a % UPat::cnst(c); }
UPat operator<(const UPat& a, double c) { return a < UPat::cnst(c); }

// ---- Match ----------------------------------------------------------------------------
const UOpPtr& Match::operator[](std::string_view name) const {
  for (const auto& [n, u] : caps_)
    if (n == name) return u;
  throw Error("pattern rewrite asked for capture '" + std::string(name) + "' that the pattern does not bind");
}
bool Match::has(std::string_view name) const {
  return std::any_of(caps_.begin(), caps_.end(), [&](const auto& c) { return c.first == name; });
}

// ---- PatternMatcher -----------------------------------------------------------------------
PatternMatcher::PatternMatcher(std::string name, std::vector<Rule> rules)
    : name_(std::move(name)), rules_(std::move(rules)) {
  index();
}

void PatternMatcher::index() {
  by_op_.assign(kNumOps, {});
  for (uint32_t i = 0; i < rules_.size(); ++i) {
    uint64_t mask = rules_[i].first.op_mask();
    for (int op = 0; op < kNumOps; ++op)
      if (!mask || (mask & (1ULL << op))) by_op_[op].push_back(i);
  }
}

PatternMatcher PatternMatcher::operator+(const PatternMatcher& other) const {
  std::vector<Rule> rules = rules_;
  rules.insert(rules.end(), other.rules_.begin(), other.rules_.end());
  return PatternMatcher(name_ + "+" + other.name_, std::move(rules));
}

PatternMatcher PatternMatcher::restricted(std::string name, bool (*applies)(const UOp&)) const {
  std::vector<Rule> rules;
  for (const auto& [pat, fn] : rules_)
    rules.emplace_back(pat, [applies, fn](const Match& m) { return applies(*m.root()) ? fn(m) : nullptr; });
  return PatternMatcher(std::move(name), std::move(rules));
}

UOpPtr PatternMatcher::rewrite(const UOpPtr& u, void* ctx) const {
  Captures caps;
  for (uint32_t i : by_op_[static_cast<int>(u->op)]) {
    caps.clear();
    if (!rules_[i].first.match(u, caps)) continue;
    if (UOpPtr r = rules_[i].second(Match(u, caps, ctx)); r && r != u) return r;
  }
  return nullptr;
}

// ---- graph_rewrite ---------------------------------------------------------------------------
namespace {
// Iterative so deep graphs do not overflow the stack. Each frame is a node at a
// stage: 0 = visit (top-down rewrite, then push sources), 1 = rebuild on the
// rewritten sources (bottom-up rewrite), 2 = take the result of a follow-up.
struct Rewriter {
  const PatternMatcher& pm;
  void* ctx;
  bool top_down;
  std::optional<Op> boundary;  // nodes of this op are left as they are, sources and all
  // Keyed by address, so the key node is held too: a node that died mid-rewrite
  // could otherwise be reborn at the same address and hit a stale entry.
  struct Entry {
    UOpPtr key, result;
  };
  std::unordered_map<const UOp*, Entry> done;
  const UOpPtr& result_of(const UOp* n) const { return done.at(n).result; }
  // The bound is 10000 + 64 per node of the graph under the root. The graph is
  // counted only once 10000 rewrites have run: a rewrite that visits a small
  // part of a large graph (a kernel's body, which stops at the buffers it reads)
  // would otherwise pay a walk of the whole graph.
  static constexpr size_t kMinLimit = 10000;
  size_t steps = 0, limit = kMinLimit;
  UOpPtr root_node;
  bool counted = false;

  struct Frame {
    UOpPtr n;
    int stage;
    UOpPtr cur;
  };
  std::vector<Frame> stack;

  void count() {
    if (++steps > limit && !counted) {
      counted = true;
      limit = kMinLimit + 64 * toposort(root_node).size();
    }
    if (steps > limit)
      throw Error("graph_rewrite: pattern set '" + pm.name() + "' did not reach a fixpoint within " +
                  std::to_string(limit) + " rewrites");
  }
  void finish(const UOpPtr& n, UOpPtr result) {  // by value: may alias an entry
    done[n.get()] = Entry{n, result};
    done.emplace(result.get(), Entry{result, result});  // a result is itself a fixpoint
  }

  UOpPtr run(const UOpPtr& root) {
    root_node = root;
    stack.push_back({root, 0, root});
    while (!stack.empty()) {
      Frame f = std::move(stack.back());
      stack.pop_back();
      if (f.stage != 2 && done.count(f.n.get())) continue;
      if (f.stage == 0)
        visit(f);
      else if (f.stage == 1)
        rebuild(f);
      else
        finish(f.n, result_of(f.cur.get()));
    }
    return result_of(root.get());
  }

  void visit(Frame& f) {
    if (boundary && f.n->op == *boundary) return finish(f.n, f.n);
    UOpPtr cur = f.n;
    if (top_down)
      while (UOpPtr r = pm.rewrite(cur, ctx)) {
        count();
        cur = r;
      }
    stack.push_back({f.n, 1, cur});
    for (auto it = cur->src.rbegin(); it != cur->src.rend(); ++it)
      if (!done.count(it->get())) stack.push_back({*it, 0, *it});
  }

  void rebuild(Frame& f) {
    std::vector<UOpPtr> src;
    src.reserve(f.cur->src.size());
    bool changed = false;
    for (const auto& s : f.cur->src) {
      src.push_back(result_of(s.get()));
      changed |= src.back() != s;
    }
    UOpPtr next = changed ? f.cur->with_src(std::move(src)) : nullptr;
    if (!next && !top_down) next = pm.rewrite(f.cur, ctx);
    if (!next) return finish(f.n, f.cur);
    count();
    stack.push_back({f.n, 2, next});
    stack.push_back({next, 0, next});
  }
};
}  // namespace

UOpPtr graph_rewrite(const UOpPtr& root, const PatternMatcher& pm, void* ctx, RewriteOrder order) {
  Rewriter rw{pm,    ctx, order == RewriteOrder::TopDown, std::nullopt, {}, 0, Rewriter::kMinLimit, nullptr,
              false, {}};
  return rw.run(root);
}

UOpPtr graph_rewrite_within(const UOpPtr& root, const PatternMatcher& pm, Op boundary, void* ctx,
                            RewriteOrder order) {
  Rewriter rw{pm,    ctx, order == RewriteOrder::TopDown, boundary, {}, 0, Rewriter::kMinLimit, nullptr,
              false, {}};
  return rw.run(root);
}

namespace {
// `n` over its sources' substitutes in `done` (every source is there): `n` itself when none changed.
UOpPtr with_substituted_src(const UOp& n, const std::unordered_map<const UOp*, UOpPtr>& done) {
  std::vector<UOpPtr> src;
  bool changed = false;
  for (const auto& s : n.src) {
    src.push_back(done.at(s.get()));
    changed |= src.back() != s;
  }
  return changed ? n.with_src(std::move(src)) : n.ptr();
}
}  // namespace

UOpPtr substitute(const UOpPtr& root, const std::vector<std::pair<UOpPtr, UOpPtr>>& replacements) {
  std::unordered_map<const UOp*, UOpPtr> map;
  for (const auto& [from, to] : replacements) map[from.get()] = to;
  std::unordered_map<const UOp*, UOpPtr> done;
  for (const auto& n : toposort(root)) {
    if (auto it = map.find(n.get()); it != map.end()) {
      done[n.get()] = it->second;
      continue;
    }
    done[n.get()] = with_substituted_src(*n, done);
  }
  return done.at(root.get());
}

UOpPtr substitute_within(const UOpPtr& root, const std::vector<std::pair<UOpPtr, UOpPtr>>& replacements,
                         Op boundary) {
  std::unordered_map<const UOp*, UOpPtr> done;
  for (const auto& [from, to] : replacements) done[from.get()] = to;
  std::vector<std::pair<const UOp*, size_t>> stack{{root.get(), 0}};  // node, next source to visit
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    if (done.count(n) || n->op == boundary) {
      done.emplace(n, n->ptr());
      stack.pop_back();
      continue;
    }
    if (next < n->src.size()) {
      const UOp* s = n->src[next++].get();
      if (!done.count(s)) stack.emplace_back(s, 0);
      continue;
    }
    done[n] = with_substituted_src(*n, done);
    stack.pop_back();
  }
  return done.at(root.get());
}

}  // namespace loom
