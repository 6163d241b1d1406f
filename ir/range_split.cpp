#include "ir/range_split.hpp"

#include "ir/buffer_access.hpp"
#include "ir/symbolic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace loom {

int64_t next_axis_id(const UOpPtr& root) {
  int64_t next = 0;
  for (const auto& n : toposort(root))
    if (n->op == Op::RANGE) next = std::max(next, n->get<AxisArg>().id + 1);
  return next;
}

UOpPtr substitute_ranges(const UOpPtr& root, const std::vector<std::pair<UOpPtr, UOpPtr>>& ranges,
                         const UOpPtr& valid) {
  std::vector<const UOp*> keys;
  std::unordered_map<const UOp*, UOpPtr> done;
  for (const auto& [r, e] : ranges) {
    keys.push_back(r.get());
    done[r.get()] = e;
  }
  std::sort(keys.begin(), keys.end(), OpenRanges::before);
  const OpenRanges key_set(keys);
  auto untouched = [&](const UOp* n) { return !n->ranges().intersects(key_set); };
  // Iterative post-order over the nodes that depend on a key.
  std::vector<std::pair<const UOp*, size_t>> stack{{root.get(), 0}};
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    if (done.count(n) || untouched(n)) {
      if (!done.count(n)) done[n] = n->ptr();
      stack.pop_back();
      continue;
    }
    if (next < n->src.size()) {
      const UOp* s = n->src[next++].get();
      if (!done.count(s)) stack.emplace_back(s, 0);
      continue;
    }
    std::vector<UOpPtr> src;
    for (const auto& s : n->src) src.push_back(done.at(s.get()));
    UOpPtr rebuilt = n->with_src(std::move(src));
    if (valid && n->op == Op::INDEX)
      rebuilt = make_index(rebuilt->src[0], index_of(rebuilt), and_valid(valid_of(rebuilt), valid));
    done[n] = rebuilt;
    stack.pop_back();
  }
  return done.at(root.get());
}

namespace {

struct Parts {
  UOpPtr outer, inner, value;
};

Parts make_parts(const RangeSplit& s, int64_t& next_id) {
  const UOpPtr& r = s.range;
  if (!r || r->op != Op::RANGE) throw Error("split_ranges: expected a RANGE to split");
  const UOpPtr& end = r->src.at(0);
  const AxisArg axis = r->get<AxisArg>();
  const std::optional<UOpPtr> rest = exact_quotient(end, s.factor);
  if (!rest)
    throw Error(fmt::format(
        "split_ranges: range {} of end {} cannot be split by {}; expected an end that the factor divides",
        axis.id, end->is_const() ? std::to_string(end->const_int()) : "(symbolic)", s.factor));
  const UOpPtr factor = const_i64(s.factor);
  const UOpPtr outer_size = s.factor_outer ? factor : *rest, inner_size = s.factor_outer ? *rest : factor;
  const AxisKind outer_kind = s.factor_outer ? s.kind : axis.kind,
                 inner_kind = s.factor_outer ? axis.kind : s.kind;
  UOpPtr outer = make_range(outer_size, next_id++, outer_kind);
  UOpPtr inner = make_range(inner_size, next_id++, inner_kind);
  return {outer, inner, outer * inner_size + inner};
}

bool lists_ranges(Op op) { return op == Op::END || op == Op::REDUCE || op == Op::BUFFERIZE; }

}  // namespace

std::optional<UOpPtr> exact_quotient(const UOpPtr& end, int64_t factor) {
  if (factor < 1) return std::nullopt;
  if (end->is_const())
    return end->const_int() % factor == 0 ? std::optional(const_i64(end->const_int() / factor))
                                          : std::nullopt;
  const UOpPtr rest = simplify(end % factor);
  if (!rest->is_const() || rest->const_int() != 0) return std::nullopt;
  return simplify(end / factor);
}

SplitRanges split_ranges(const UOpPtr& root, const std::vector<RangeSplit>& splits, int64_t first_id) {
  int64_t next_id = first_id >= 0 ? first_id : next_axis_id(root);
  std::unordered_map<const UOp*, Parts> parts;
  SplitRanges out;
  for (const auto& s : splits) {
    if (parts.count(s.range.get()))
      throw Error(fmt::format("split_ranges: range {} is split twice", s.range->get<AxisArg>().id));
    Parts p = make_parts(s, next_id);
    out.parts.emplace_back(p.outer, p.inner);
    parts.emplace(s.range.get(), std::move(p));
  }
  std::unordered_map<const UOp*, UOpPtr> done;
  for (const auto& n : toposort(root)) {
    if (auto it = parts.find(n.get()); it != parts.end()) {
      done[n.get()] = it->second.value;
      continue;
    }
    std::vector<UOpPtr> src;
    bool changed = false;
    for (size_t i = 0; i < n->src.size(); ++i) {
      const UOpPtr& s = n->src[i];
      auto listed = i > 0 && lists_ranges(n->op) ? parts.find(s.get()) : parts.end();
      if (listed == parts.end()) {
        src.push_back(done.at(s.get()));
        changed |= src.back() != s;
        continue;
      }
      if (n->op == Op::BUFFERIZE)
        throw Error(
            fmt::format("split_ranges: range {} is an axis of a BUFFERIZE; split the buffer's shape instead",
                        s->get<AxisArg>().id));
      src.push_back(listed->second.outer);
      src.push_back(listed->second.inner);
      changed = true;
    }
    done[n.get()] = changed ? n->with_src(std::move(src)) : n;
  }
  out.root = done.at(root.get());
  return out;
}

}  // namespace loom
