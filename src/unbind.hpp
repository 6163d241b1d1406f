#pragma once
// A graph over symbolic sizes with its bindings taken out. Every BIND(var, n) in
// a size (or among a node's sources) becomes `var`, and the values go beside the
// graph: the schedule and its kernels are then made for the variables, so they
// serve every binding, and each run passes the values (docs/symbolic.md).
//
//   Before:  RESHAPE(x, [4, T=17, 64])           (T=17 is BIND(DEFINE_VAR T, 17))
//   After:   RESHAPE(x, [4, T, 64])     values: T = 17
//
// One graph has one value per variable: two bindings of a variable, or two
// variables of one name, are a loom::Error naming it.
#include "ir/uop.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace loom::detail {

struct VariableValue {
  UOpPtr var;  // the DEFINE_VAR
  int64_t value = 0;
};

struct UnboundGraph {
  std::vector<UOpPtr> targets;        // the same graph over the unbound variables
  std::vector<VariableValue> values;  // one per variable, sorted by name
};

// `nodes` is a toposort of `targets` (GraphSignature::nodes); `what` names the
// caller in errors ("realize").
UnboundGraph unbind_graph(const std::vector<UOpPtr>& nodes, const std::vector<UOpPtr>& targets,
                          std::string_view what);

// unbind_graph's values alone, without rebuilding the graph: what a run of a
// cached plan needs.
std::vector<VariableValue> graph_values(const std::vector<UOpPtr>& nodes, std::string_view what);

// The variables of `values`, in order.
std::vector<UOpPtr> variables_of(const std::vector<VariableValue>& values);
// The values of `values`, in order.
std::vector<int64_t> numbers_of(const std::vector<VariableValue>& values);

// `d` with each of `variables` bound to the value at its position in `values`:
// the unbinding undone for one run.
Dim bind_values(const Dim& d, const std::vector<UOpPtr>& variables, const std::vector<int64_t>& values);

}  // namespace loom::detail
