#include "src/unbind.hpp"

#include "ir/dim_expr.hpp"
#include "ir/pattern.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace loom::detail {

namespace {

// Collects the graph's bindings and rewrites its sizes without them.
class Unbinder {
 public:
  explicit Unbinder(std::string_view what) : what_(what) {}

  // BIND(var, n) -> var, recording n.
  UOpPtr unbind_leaf(const UOpPtr& bind) {
    const UOpPtr& var = bind->src[0];
    record(var, bind->src[1]->const_int());
    return var;
  }

  // Records the bindings in d's expression.
  void collect(const Dim& d) {
    if (d.is_symbolic())
      for (const UOpPtr& n : toposort(d.expr()))
        if (n->op == Op::BIND) unbind_leaf(n);
  }

  Dim unbind(const Dim& d) {
    if (!d.is_symbolic()) return d;
    std::vector<std::pair<UOpPtr, UOpPtr>> swaps;
    for (const UOpPtr& n : toposort(d.expr()))
      if (n->op == Op::BIND) swaps.emplace_back(n, unbind_leaf(n));
    return swaps.empty() ? d : Dim(substitute(d.expr(), swaps));
  }

  std::vector<VariableValue> values() && {
    std::sort(values_.begin(), values_.end(), [](const VariableValue& a, const VariableValue& b) {
      return a.var->get<VarArg>().name < b.var->get<VarArg>().name;
    });
    return std::move(values_);
  }

 private:
  void record(const UOpPtr& var, int64_t value) {
    const VarArg& arg = var->get<VarArg>();
    for (const VariableValue& v : values_) {
      const VarArg& seen = v.var->get<VarArg>();
      if (seen.name != arg.name) continue;
      if (v.var != var)
        throw Error(
            fmt::format("{}: the graph has two variables named '{}' ([{}, {}] and [{}, {}]); a "
                        "variable's name identifies it, so they must be one Variable",
                        what_, arg.name, seen.min, seen.max, arg.min, arg.max));
      if (v.value != value)
        throw Error(
            fmt::format("{}: variable '{}' is bound to {} and to {} in one graph; a graph's "
                        "sizes take one value of each variable",
                        what_, arg.name, v.value, value));
      return;
    }
    values_.push_back({var, value});
  }

  std::string_view what_;
  std::vector<VariableValue> values_;
};

}  // namespace

UnboundGraph unbind_graph(const std::vector<UOpPtr>& nodes, const std::vector<UOpPtr>& targets,
                          std::string_view what) {
  Unbinder unbinder(what);
  std::unordered_map<const UOp*, UOpPtr> rebuilt;  // node -> the node without bindings, when it differs
  const auto after = [&](const UOpPtr& n) -> const UOpPtr& {
    const auto it = rebuilt.find(n.get());
    return it == rebuilt.end() ? n : it->second;
  };
  for (const UOpPtr& n : nodes) {
    if (n->op == Op::BIND) {
      rebuilt[n.get()] = unbinder.unbind_leaf(n);
      continue;
    }
    bool changed = false;
    std::vector<UOpPtr> src;
    src.reserve(n->src.size());
    for (const UOpPtr& s : n->src) {
      src.push_back(after(s));
      changed = changed || src.back() != s;
    }
    Arg arg = n->arg;
    if (Shape* sizes = std::get_if<Shape>(&arg))
      for (Dim& d : *sizes) {
        Dim free = unbinder.unbind(d);
        changed = changed || !(free == d);
        d = std::move(free);
      }
    if (changed) rebuilt[n.get()] = UOp::make(n->op, n->dtype, std::move(src), std::move(arg));
  }
  UnboundGraph out;
  for (const UOpPtr& t : targets) out.targets.push_back(after(t));
  out.values = std::move(unbinder).values();
  return out;
}

std::vector<VariableValue> graph_values(const std::vector<UOpPtr>& nodes, std::string_view what) {
  Unbinder unbinder(what);
  for (const UOpPtr& n : nodes) {
    if (n->op == Op::BIND) unbinder.unbind_leaf(n);
    if (const Shape* sizes = std::get_if<Shape>(&n->arg))
      for (const Dim& d : *sizes) unbinder.collect(d);
  }
  return std::move(unbinder).values();
}

std::vector<UOpPtr> variables_of(const std::vector<VariableValue>& values) {
  std::vector<UOpPtr> out;
  for (const VariableValue& v : values) out.push_back(v.var);
  return out;
}

std::vector<int64_t> numbers_of(const std::vector<VariableValue>& values) {
  std::vector<int64_t> out;
  for (const VariableValue& v : values) out.push_back(v.value);
  return out;
}

Dim bind_values(const Dim& d, const std::vector<UOpPtr>& variables, const std::vector<int64_t>& values) {
  if (!d.is_symbolic()) return d;
  std::vector<std::pair<UOpPtr, UOpPtr>> swaps;
  for (size_t i = 0; i < variables.size(); ++i)
    swaps.emplace_back(variables[i], bind_var(variables[i], values.at(i)));
  return Dim(substitute(d.expr(), swaps));
}

}  // namespace loom::detail
