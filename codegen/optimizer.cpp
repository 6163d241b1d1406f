// The kernel optimiser: records its choices as RANGE kinds (docs/design.md §6).
// For now it picks the range the executor splits across threads; SIMD upcast,
// unroll and tiling come later (LLVM's loop vectoriser handles inner loops).
#include "codegen/codegen.hpp"
#include "ir/pattern.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace loom {

namespace {

// The range to run across threads: the outermost loop of the kernel's one END,
// if it has a constant trip count worth splitting. A kernel with several
// effects keeps running on one thread: an effect outside the parallel loop
// would run once per task.
UOpPtr parallel_candidate(const UOpPtr& kernel) {
  if (kernel->op != Op::SINK || kernel->src.size() != 1) return nullptr;
  const UOpPtr& end = kernel->src[0];
  if (end->op != Op::END || end->src.size() < 2) return nullptr;
  const UOpPtr& range = end->src[1];
  if (range->op != Op::RANGE || range->get<AxisArg>().kind != AxisKind::Loop) return nullptr;
  const UOpPtr& trip = range->src.at(0);
  if (!trip->is_const() || trip->const_int() < 2) return nullptr;
  return range;
}

UOpPtr with_kind(const UOpPtr& range, AxisKind kind) {
  return UOp::make(Op::RANGE, range->dtype, range->src, AxisArg{range->get<AxisArg>().id, kind});
}

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

UOpPtr optimize_kernel(const UOpPtr& kernel, const OptimizerOptions& options) {
  if (!options.enabled) return kernel;
  const UOpPtr range = parallel_candidate(kernel);
  if (!range) return kernel;
  return substitute(kernel, {{range, with_kind(range, AxisKind::Parallel)}});
}

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
