// The kernel ABI's helpers (docs/kernel-ir.md): a kernel's variables in argument
// order, and the extent of its parallel range, which the executor splits.
#include "codegen/codegen.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace loom {

namespace {

// Value of an i64 index expression (a RANGE bound) for these variable values.
int64_t eval_index(const UOpPtr& u, const std::vector<UOpPtr>& vars, const std::vector<int64_t>& values) {
  auto arg = [&](size_t i) { return eval_index(u->src.at(i), vars, values); };
  switch (u->op) {
    case Op::CONST: return u->const_int();
    case Op::DEFINE_VAR: {
      const auto it = std::find(vars.begin(), vars.end(), u);
      return values.at(static_cast<size_t>(it - vars.begin()));
    }
    case Op::ADD: return static_cast<int64_t>(static_cast<uint64_t>(arg(0)) + static_cast<uint64_t>(arg(1)));
    case Op::SUB: return static_cast<int64_t>(static_cast<uint64_t>(arg(0)) - static_cast<uint64_t>(arg(1)));
    case Op::MUL: return static_cast<int64_t>(static_cast<uint64_t>(arg(0)) * static_cast<uint64_t>(arg(1)));
    case Op::MAX: return std::max(arg(0), arg(1));
    case Op::IDIV: {
      const int64_t d = arg(1);
      return d == 0 ? 0 : d == -1 ? static_cast<int64_t>(0 - static_cast<uint64_t>(arg(0))) : arg(0) / d;
    }
    case Op::MOD: {
      const int64_t d = arg(1);
      return d == 0 || d == -1 ? 0 : arg(0) % d;
    }
    default:
      throw Error(
          fmt::format("parallel_extent: the parallel range's bound uses {} {}; expected CONST, "
                      "DEFINE_VAR, ADD, SUB, MUL, MAX, IDIV or MOD",
                      op_name(u->op), to_string(u->dtype)));
  }
}

}  // namespace

std::vector<UOpPtr> kernel_vars(const UOpPtr& kernel) {
  std::vector<UOpPtr> vars;
  for (const auto& n : toposort(kernel))
    if (n->op == Op::DEFINE_VAR) vars.push_back(n);
  std::sort(vars.begin(), vars.end(),
            [](const UOpPtr& a, const UOpPtr& b) { return a->get<VarArg>().name < b->get<VarArg>().name; });
  for (size_t i = 1; i < vars.size(); ++i) {
    const VarArg &a = vars[i - 1]->get<VarArg>(), &b = vars[i]->get<VarArg>();
    if (a.name == b.name)  // one name, two slots of `vars`: the ABI could not tell them apart
      throw Error(fmt::format("kernel_vars: variable '{}' appears twice, with bounds [{}, {}] and [{}, {}]",
                              a.name, a.min, a.max, b.min, b.max));
  }
  return vars;
}

UOpPtr parallel_extent_graph(const UOpPtr& kernel) {
  std::vector<UOpPtr> kept;
  for (const auto& n : toposort(kernel))
    if (n->op == Op::RANGE && n->get<AxisArg>().kind == AxisKind::Parallel) {
      kept.push_back(n);
      break;
    }
  for (UOpPtr& var : kernel_vars(kernel)) kept.push_back(std::move(var));
  return UOp::make(Op::SINK, DType::Bool, std::move(kept));
}

int64_t parallel_extent(const UOpPtr& kernel, const std::vector<int64_t>& vars) {
  const std::vector<UOpPtr> defined = kernel_vars(kernel);
  if (vars.size() != defined.size())
    throw Error(fmt::format("parallel_extent: the kernel has {} variables but {} values were given",
                            defined.size(), vars.size()));
  for (const auto& n : toposort(kernel))
    if (n->op == Op::RANGE && n->get<AxisArg>().kind == AxisKind::Parallel)
      return std::max<int64_t>(0, eval_index(n->src.at(0), defined, vars));
  return 1;
}

}  // namespace loom
