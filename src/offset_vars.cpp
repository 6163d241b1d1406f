#include "src/offset_vars.hpp"

#include "ir/pattern.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace loom::detail {

namespace {

bool is_offset(const UOpPtr& u) { return u->op == Op::CONST && u->dtype == DType::Int64; }

// The nodes of the kernel's index arithmetic: what its INDEXes' addresses and
// validities compute from ranges and constants (integer and bool ALU ops), not
// the values it loads.
std::unordered_set<const UOp*> index_arithmetic(const std::vector<UOpPtr>& nodes) {
  std::unordered_set<const UOp*> region;
  std::vector<const UOp*> todo;
  for (const auto& n : nodes)
    if (n->op == Op::INDEX)
      for (size_t i = 1; i < n->src.size(); ++i) todo.push_back(n->src[i].get());
  while (!todo.empty()) {
    const UOp* u = todo.back();
    todo.pop_back();
    if (!is_alu(u->op) || u->dtype.lanes != 1 || !(u->dtype.is_int() || u->dtype.is_bool())) continue;
    if (!region.insert(u).second) continue;
    for (const auto& s : u->src) todo.push_back(s.get());
  }
  return region;
}

std::string var_name(size_t i) { return fmt::format("o{}", i); }

}  // namespace

OffsetPattern offset_pattern(const UOpPtr& kernel) {
  const std::vector<UOpPtr> nodes = toposort(kernel);
  const std::unordered_set<const UOp*> region = index_arithmetic(nodes);
  OffsetPattern out;
  std::unordered_map<const UOp*, UOpPtr> done;
  for (const auto& n : nodes) {
    // An offset: a constant added in index arithmetic, or an INDEX's constant address.
    const bool adds = n->op == Op::ADD && n->dtype == DType::Int64 && region.count(n.get());
    std::vector<UOpPtr> src;
    bool changed = false;
    for (size_t i = 0; i < n->src.size(); ++i) {
      const UOpPtr& s = n->src[i];
      if ((adds || (n->op == Op::INDEX && i >= 1)) && is_offset(s)) {
        src.push_back(make_var(var_name(out.values.size()), 0, 0));
        out.values.push_back(s->const_int());
      } else {
        src.push_back(done.at(s.get()));
      }
      changed |= src.back() != s;
    }
    done[n.get()] = changed ? n->with_src(std::move(src)) : n;
  }
  out.ast = done.at(kernel.get());
  return out;
}

void share_offset_kernels(std::vector<PlanKernel>& kernels) {
  struct Group {
    std::vector<size_t> members;
    std::vector<std::vector<int64_t>> values;  // per member
    std::unordered_set<const UOp*> asts;
  };
  std::unordered_map<const UOp*, Group> groups;  // by pattern; the patterns are held below
  std::vector<UOpPtr> patterns;
  std::unordered_map<const UOp*, OffsetPattern> seen;  // per distinct AST
  for (size_t i = 0; i < kernels.size(); ++i) {
    auto it = seen.find(kernels[i].ast.get());
    if (it == seen.end()) it = seen.emplace(kernels[i].ast.get(), offset_pattern(kernels[i].ast)).first;
    const OffsetPattern& p = it->second;
    if (p.values.empty()) continue;
    Group& g = groups[p.ast.get()];
    if (g.members.empty()) patterns.push_back(p.ast);
    g.members.push_back(i);
    g.values.push_back(p.values);
    g.asts.insert(kernels[i].ast.get());
  }
  for (const UOpPtr& pattern : patterns) {
    const Group& g = groups.at(pattern.get());
    if (g.asts.size() < 2) continue;  // one AST, compiled once already
    // Each offset becomes a variable over the values it takes, or stays the constant
    // every member has.
    std::vector<std::pair<UOpPtr, UOpPtr>> subs;
    std::vector<std::pair<std::string, size_t>> lifted;  // name, position
    const size_t n = g.values.front().size();
    for (size_t v = 0; v < n; ++v) {
      int64_t lo = g.values.front()[v], hi = lo;
      for (const auto& values : g.values) lo = std::min(lo, values[v]), hi = std::max(hi, values[v]);
      const UOpPtr placeholder = make_var(var_name(v), 0, 0);
      if (lo == hi) {
        subs.emplace_back(placeholder, const_int(DType::Int64, lo));
      } else {
        subs.emplace_back(placeholder, make_var(var_name(v), lo, hi));
        lifted.emplace_back(var_name(v), v);
      }
    }
    const UOpPtr shared = substitute(pattern, subs);
    for (size_t m = 0; m < g.members.size(); ++m) {
      PlanKernel& k = kernels[g.members[m]];
      k.ast = shared;
      for (const auto& [name, v] : lifted) k.bindings.emplace_back(name, g.values[m][v]);
    }
  }
}

}  // namespace loom::detail
