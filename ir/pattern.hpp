#pragma once
// UPat describes the shape of a node; a PatternMatcher is a table of
// (UPat, rewrite) rules indexed by op; graph_rewrite applies one to a fixpoint.
//
//   static const PatternMatcher pm("fold_identities", {
//     {UPat::var("x") + 0, [](const Match& m) { return m["x"]; }},
//     {UPat::var("x") * 1, [](const Match& m) { return m["x"]; }},
//   });
//
// Tables are built on first use (function-local statics), never at namespace scope.
#include "ir/uop.hpp"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom {

class UPat {
 public:
  UPat() = default;  // matches any node

  // Any node, captured as `name`; optionally restricted to dtypes.
  static UPat var(std::string name = "", std::vector<DType> dtypes = {});
  // A CONST, captured as `name`.
  static UPat cvar(std::string name = "", std::vector<DType> dtypes = {});
  // A CONST holding `v` (compared as a number, whatever the dtype).
  static UPat cnst(double v);
  // A node whose op is `op` with exactly these sources (in any order when op is commutative).
  static UPat op(Op op, std::vector<UPat> src = {}, std::string name = "");
  // A node whose op is one of `ops`; sources unconstrained.
  static UPat ops(std::vector<Op> ops, std::string name = "");

  UPat named(std::string name) const;
  UPat with_dtypes(std::vector<DType> dtypes) const;
  UPat with_arg(Arg arg) const;
  // Sources match as a prefix: extra sources are allowed (REDUCE, END, INDEX with valid).
  UPat allow_more_src() const;

  bool match(const UOpPtr& u, std::vector<std::pair<std::string_view, UOpPtr>>& caps) const;
  uint64_t op_mask() const { return op_mask_; }  // 0: any op
  // One bit per Op: a new op past the 64th needs a wider mask.
  static_assert(kNumOps <= 64, "UPat's op set is a 64-bit mask: widen op_mask_ before adding more ops");

 private:
  uint64_t op_mask_ = 0;
  std::vector<DType> dtypes_;
  std::shared_ptr<const std::vector<UPat>> src_;  // null: sources unconstrained
  bool any_order_ = false;
  bool allow_more_ = false;
  std::optional<Arg> arg_;
  std::optional<double> const_value_;
  std::string name_;
  // A cheap reference to "the rest of the match" (a callable taking the captures).
  struct Continuation {
    bool (*call)(void*, std::vector<std::pair<std::string_view, UOpPtr>>&);
    void* target;
    bool operator()(std::vector<std::pair<std::string_view, UOpPtr>>& caps) const {
      return call(target, caps);
    }
    template <class F>
    static Continuation of(F& f) {
      return {[](void* t, std::vector<std::pair<std::string_view, UOpPtr>>& caps) {
                return (*static_cast<F*>(t))(caps);
              },
              &f};
    }
  };
  bool match_then(const UOpPtr& u, std::vector<std::pair<std::string_view, UOpPtr>>& caps,
                  Continuation rest) const;
  bool match_src(const UOpPtr& u, const std::vector<UPat>& pats,
                 std::vector<std::pair<std::string_view, UOpPtr>>& caps, Continuation rest) const;
  static constexpr size_t kMaxSrc = 16;
  static bool match_from(const UOpPtr& u, const std::vector<UPat>& pats, const uint8_t* order, size_t i,
                         std::vector<std::pair<std::string_view, UOpPtr>>& caps, Continuation rest);
};

// DSL operators so rules read like the algebra. `/` is IDIV (index math); use
// UPat::op(Op::FDIV, ...) for float division.
UPat operator+(const UPat& a, const UPat& b);
UPat operator-(const UPat& a, const UPat& b);
UPat operator*(const UPat& a, const UPat& b);
UPat operator/(const UPat& a, const UPat& b);
UPat operator%(const UPat& a, const UPat& b);
UPat operator<(const UPat& a, const UPat& b);
UPat operator+(const UPat& a, double c);
UPat operator-(const UPat& a, double c);
UPat operator*(const UPat& a, double c);
UPat operator/(const UPat& a, double c);
UPat operator%(const UPat& a, double c);
UPat operator<(const UPat& a, double c);

// What a rewrite function sees: the matched node, the captures, the context.
class Match {
 public:
  Match(const UOpPtr& root, const std::vector<std::pair<std::string_view, UOpPtr>>& caps, void* ctx)
      : root_(root), caps_(caps), ctx_(ctx) {}
  const UOpPtr& operator[](std::string_view name) const;
  bool has(std::string_view name) const;
  const UOpPtr& root() const { return root_; }
  template <class T>
  T& ctx() const {
    if (!ctx_) throw Error("pattern rewrite needs a context object but none was given");
    return *static_cast<T*>(ctx_);
  }

 private:
  const UOpPtr& root_;
  const std::vector<std::pair<std::string_view, UOpPtr>>& caps_;
  void* ctx_;
};

// Returns the replacement, or nullptr to decline (the guard refused).
using RewriteFn = std::function<UOpPtr(const Match&)>;
using Rule = std::pair<UPat, RewriteFn>;

class PatternMatcher {
 public:
  PatternMatcher(std::string name, std::vector<Rule> rules);
  // Union of two tables: rules of `this` are tried first.
  PatternMatcher operator+(const PatternMatcher& other) const;
  // The same rules, tried only on nodes for which `applies` holds.
  PatternMatcher restricted(std::string name, bool (*applies)(const UOp&)) const;

  // First matching rule's replacement for `u` itself, or nullptr.
  UOpPtr rewrite(const UOpPtr& u, void* ctx = nullptr) const;
  const std::string& name() const { return name_; }
  size_t size() const { return rules_.size(); }

 private:
  std::string name_;
  std::vector<Rule> rules_;
  std::vector<std::vector<uint32_t>> by_op_;  // op -> rule indices, in table order
  void index();
};

enum class RewriteOrder {
  BottomUp,  // sources first, then the node rebuilt on them; results rewritten again
  TopDown,   // the node first (to a fixpoint), then its sources
};

// Rewrites the graph under `root` to a fixpoint of `pm`. Memoised: each node is
// rewritten once. Throws loom::Error naming `pm` if no fixpoint is reached
// within a bound proportional to the graph.
UOpPtr graph_rewrite(const UOpPtr& root, const PatternMatcher& pm, void* ctx = nullptr,
                     RewriteOrder order = RewriteOrder::BottomUp);
template <class Ctx>
UOpPtr graph_rewrite(const UOpPtr& root, const PatternMatcher& pm, Ctx& ctx,
                     RewriteOrder order = RewriteOrder::BottomUp) {
  return graph_rewrite(root, pm, static_cast<void*>(&ctx), order);
}

// graph_rewrite that leaves each node of op `boundary` as it is, and does not
// enter it: a rewrite of one kernel's body (boundary BUFFERIZE) stops at the
// buffers it reads, whose values are other kernels, already rewritten.
UOpPtr graph_rewrite_within(const UOpPtr& root, const PatternMatcher& pm, Op boundary, void* ctx = nullptr,
                            RewriteOrder order = RewriteOrder::BottomUp);

// Replaces nodes by pointer (keys are original nodes), rebuilding their users.
UOpPtr substitute(const UOpPtr& root, const std::vector<std::pair<UOpPtr, UOpPtr>>& replacements);
// substitute that keeps each node of op `boundary` that is not a key, and does not
// enter it: the same result when no key lies under such a node, at the cost of
// the nodes above them (one kernel's index arithmetic, not the kernels it reads).
UOpPtr substitute_within(const UOpPtr& root, const std::vector<std::pair<UOpPtr, UOpPtr>>& replacements,
                         Op boundary);

}  // namespace loom
