#include "schedule/load_collapse.hpp"

#include "ir/symbolic.hpp"
#include "schedule/reduce_collapse.hpp"
#include "schedule/reduce_unparented.hpp"

#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>

namespace loom {

namespace {

const PatternMatcher& load_attempt_rules() {
  static const PatternMatcher pm = symbolic() + reduce_unparented() + reduce_closed_forms();
  return pm;
}

// The body over r with each source that does not depend on r (and is not a
// constant, a range, or r's own bound) replaced by a variable of its dtype and bounds.
// A source reading a range the body closes itself (an inner REDUCE's) is no constant
// of the sum either: as a variable it would make that inner reduce look unparented.
bool open_in(const UOpPtr& s, const UOpPtr& body) {
  for (const UOp* range : s->ranges())
    if (!body->ranges().contains(range)) return false;
  return true;
}

struct Abstracted {
  UOpPtr body;
  std::vector<std::pair<UOpPtr, UOpPtr>> back;  // variable -> what it stands for
};

Abstracted abstract(const UOpPtr& body, const UOpPtr& r) {
  std::unordered_map<const UOp*, UOpPtr> var_of;
  Abstracted out;
  auto var = [&](const UOpPtr& s) {
    auto [it, fresh] = var_of.try_emplace(s.get(), nullptr);
    if (fresh) {
      it->second =
          UOp::make(Op::DEFINE_VAR, s->dtype, {},
                    VarArg{fmt::format("load_collapse_in{}", var_of.size() - 1), s->vmin(), s->vmax()});
      out.back.emplace_back(it->second, s);
    }
    return it->second;
  };
  std::vector<std::pair<UOpPtr, UOpPtr>> subs;
  std::unordered_set<const UOp*> seen;
  std::vector<UOpPtr> stack{body};
  while (!stack.empty()) {
    const UOpPtr n = stack.back();
    stack.pop_back();
    if (!seen.insert(n.get()).second) continue;
    for (const auto& s : n->src) {
      if (s->ranges().contains(r) || !open_in(s, body))
        stack.push_back(s);
      else if (s->op != Op::CONST && s->op != Op::RANGE && n->op != Op::RANGE)
        subs.emplace_back(s, var(s));  // ranges stay: a REDUCE or END lists them as loops
    }
  }
  // Ranges are kept whole: a symbolic range's end (T) may also be a source the body
  // reads, and the range with a variable for its end would be another loop.
  out.body = body->ranges().contains(r) ? substitute_within(body, subs, Op::RANGE) : var(body);
  return out;
}

UOpPtr collapse_load(const Match& m) {
  const UOpPtr& red = m.root();
  if (red->get<ReduceArg>().op != Op::ADD) return nullptr;
  UOpPtr body = red->src[0];
  std::vector<UOpPtr> left{nullptr};
  for (size_t i = 1; i < red->src.size(); ++i) {
    const UOpPtr& r = red->src[i];
    const Abstracted a = abstract(body, r);
    const UOpPtr sum = UOp::make(Op::REDUCE, body->dtype, {a.body, r}, ReduceArg{Op::ADD, {}});
    const UOpPtr attempt = graph_rewrite(sum, load_attempt_rules());
    if (mentions_range(attempt, r))
      left.push_back(r);
    else
      body = substitute(attempt, a.back);
  }
  if (left.size() == red->src.size()) return nullptr;
  if (left.size() == 1) return body;
  left[0] = body;
  return red->with_src(std::move(left));
}

}  // namespace

const PatternMatcher& load_collapse() {
  static const PatternMatcher pm("load_collapse", {{UPat::ops({Op::REDUCE}), collapse_load}});
  return pm;
}

}  // namespace loom
