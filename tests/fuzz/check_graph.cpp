// One program, checked: the reference interpreter's values (taken before
// realize, which may write into input buffers), then loom's, compared per
// output with the tolerance of its dtype and op class; for a gradient program,
// loom's gradients of output 0 against finite differences (fuzz/gradient_check).
#include "fuzz/compare.hpp"
#include "fuzz/fuzz.hpp"
#include "fuzz/gradient_check.hpp"
#include "fuzz/kernel_checker.hpp"
#include "fuzz/op_class.hpp"
#include "ir/target.hpp"
#include "schedule/schedule.hpp"
#include "src/engine.hpp"
#include "src/graph_key.hpp"
#include "src/plan.hpp"
#include "src/schedule_cache.hpp"
#include "support/reference_interpreter.hpp"

#include <loom/loom.hpp>

#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <set>
#include <unordered_map>

namespace loom::fuzz {

namespace {

struct Expected {
  ref::RefTensor value;
  Tolerance tolerance;  // its scale: the largest finite float magnitude upstream
};

// Did the float MUL `node` make an infinity from two finite operands (an overflow)?
// Its sources' values are in `seen` (tensor-level MUL sources share its shape).
bool product_overflowed(const UOpPtr& node, const ref::RefTensor& v,
                        const std::unordered_map<const UOp*, ref::RefTensor>& seen) {
  if (node->op != Op::MUL || !v.dtype.is_float() || node->src.size() != 2) return false;
  const auto a = seen.find(node->src[0].get()), b = seen.find(node->src[1].get());
  if (a == seen.end() || b == seen.end() || a->second.f.size() != v.f.size() ||
      b->second.f.size() != v.f.size())
    return false;
  for (size_t e = 0; e < v.f.size(); ++e)
    if (std::isinf(v.f[e]) && std::isfinite(a->second.f[e]) && std::isfinite(b->second.f[e])) return true;
  return false;
}

Expected reference(const Tensor& t) {
  Expected e;
  const UOpPtr& root = t.node()->uop;
  std::unordered_map<const UOp*, ref::RefTensor> seen;  // float values, for product_overflowed
  e.value = ref::evaluate(
      root, [](const UOpPtr& b) -> const void* { return detail::buffer_data(b); }, {},
      [&](const UOpPtr& node, const ref::RefTensor& v) {
        e.tolerance.scale = std::max(e.tolerance.scale, magnitude(v));
        e.tolerance.product_overflowed |= product_overflowed(node, v, seen);
        if (v.dtype.is_float()) seen.emplace(node.get(), v);
      });
  e.tolerance.approximate = is_approximate(root);
  e.tolerance.precision = tolerance_dtype(root);
  return e;
}

// The schedule's cost against the graph's with every op realized (src/plan.hpp), for
// the Target the program compiles for. Scheduled apart from the realize: its
// stages are not the kernel checker's to see twice.
double recompute_ratio(const std::vector<UOpPtr>& roots, const std::string& target) {
  std::unique_ptr<Context> compile_for;
  if (!target.empty())
    compile_for = std::make_unique<Context>(
        std::initializer_list<std::pair<std::string, Context::Value>>{{"TARGET", target}});
  const detail::GraphSignature sig = detail::sign_graph(roots);
  const detail::Plan plan = detail::plan_schedule(roots, sig, std::vector<int64_t>(roots.size(), -1));
  return detail::plan_cost(plan, sig, roots).recompute_ratio();
}

std::string ratio_bucket(double ratio) {
  if (ratio <= 1.0) return "<=1";
  if (ratio <= 1.1) return "<=1.1";
  if (ratio <= 1.25) return "<=1.25";
  return ">1.25";
}

void count_coverage(const std::vector<Tensor>& outputs, Coverage& c) {
  std::vector<UOpPtr> roots;
  for (const auto& t : outputs) roots.push_back(t.node()->uop);
  std::set<std::string> ops, dtypes, ranks;
  for (const auto& n : toposort(roots)) {
    ops.insert(std::string(op_name(n->op)));
    dtypes.insert(to_string(n->dtype));
    if (n->shape()) ranks.insert(fmt::format("{}", n->shape()->size()));
  }
  for (const auto& o : ops) ++c.uops[o];
  for (const auto& d : dtypes) ++c.dtypes[d];
  for (const auto& r : ranks) ++c.ranks[r];
}

}  // namespace

Outcome check_graph(const std::string& graph_text, const CheckOptions& options, Coverage* coverage) {
  std::vector<Tensor> outputs;
  std::vector<Expected> want;
  try {
    outputs = graph_from_text(graph_text);
    for (const auto& t : outputs) want.push_back(reference(t));
  } catch (const Error& e) {
    return Outcome{false, e.what(), std::nullopt};
  }
  const bool gradient_program = options.gradients && is_gradient_program(graph_text);
  if (gradient_program)
    if (std::string why = loss_problem(outputs); !why.empty()) return Outcome{false, why, std::nullopt};
  if (coverage) {
    ++coverage->programs;
    count_coverage(outputs, *coverage);
  }
  Outcome out;
  std::optional<GradientCheck> gradient;
  std::vector<Expected> want_gradients;  // loom's gradient graphs by the reference, before realize writes
  try {
    if (gradient_program) gradient.emplace(outputs[0]);
    if (gradient)
      for (const auto& g : gradient->gradients()) want_gradients.push_back(reference(g));
  } catch (const Error& e) {
    out.failure = Failure{"error", fmt::format("gradient threw: {}", e.what())};
    return out;
  }
  std::vector<UOpPtr> roots;  // the graph as built: realize turns the tensors into buffers
  auto add_root = [&](const Tensor& t) {
    if (!is_buffer_view(t.node()->uop)) roots.push_back(t.node()->uop);
  };
  for (const auto& t : outputs) add_root(t);
  if (gradient)
    for (const auto& g : gradient->gradients()) add_root(g);
  Coverage local;
  {
    KernelChecker checker(options.kernel_checker, &local);
    std::unique_ptr<Context> bounds, target;
    if (options.check_bounds)
      bounds = std::make_unique<Context>(
          std::initializer_list<std::pair<std::string, Context::Value>>{{"CHECK_BOUNDS", true}});
    if (!options.target.empty())
      target = std::make_unique<Context>(
          std::initializer_list<std::pair<std::string, Context::Value>>{{"TARGET", options.target}});
    ++local.targets[current_target().name];
    // A schedule cache hit skips every stage and pass: the kernel checker would
    // see nothing, and a failure would change kind between runs of one program.
    detail::schedule_cache().clear();
    const auto kernels_before = counters().kernels_executed;
    try {
      std::vector<Tensor> all = outputs;  // the gradients in the same schedule, as backward() does
      if (gradient) all.insert(all.end(), gradient->gradients().begin(), gradient->gradients().end());
      realize(all);
    } catch (const Error& e) {
      out.failure = Failure{"error", fmt::format("realize threw: {}", e.what())};
    } catch (const std::exception& e) {  // anything but a loom::Error is a bug
      out.failure = Failure{"error", fmt::format("realize threw a non-loom error: {}", e.what())};
    }
    local.kernels += static_cast<int64_t>(counters().kernels_executed - kernels_before);
    local.bounds_checked += options.check_bounds;
    if (auto f = checker.failure()) out.failure = f;  // the kernel checker pins the pass: it wins
  }
  if (coverage) coverage->merge(local);
  if (out.failure) return out;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string diff = compare_values(realized(outputs[i]), want[i].value, want[i].tolerance);
    if (!diff.empty()) {
      out.failure = Failure{"mismatch", fmt::format("output {}: {}", i, diff)};
      return out;
    }
  }
  // The compiled gradients against the reference on the same graphs: this catches wrong
  // code where finite differences cannot look (a loss that is not finite, a kink).
  for (size_t i = 0; i < want_gradients.size(); ++i) {
    const std::string diff = compare_values(realized(gradient->gradients()[i]), want_gradients[i].value,
                                            want_gradients[i].tolerance);
    if (!diff.empty()) {
      out.failure = Failure{"mismatch", fmt::format("gradient {}: {}", i, diff)};
      return out;
    }
  }
  if (gradient) {
    Coverage grad_coverage;
    out.failure = gradient->check(&grad_coverage);
    if (coverage) coverage->merge(grad_coverage);
    if (out.failure) return out;
  }
  if (options.recompute_bound > 0 && !roots.empty()) {
    try {
      out.recompute_ratio = recompute_ratio(roots, options.target);
    } catch (const std::exception& e) {
      out.failure = Failure{"error", fmt::format("scheduling the graph as built threw: {}", e.what())};
      return out;
    }
    if (coverage) {
      ++coverage->recompute[ratio_bucket(out.recompute_ratio)];
      coverage->max_recompute = std::max(coverage->max_recompute, out.recompute_ratio);
    }
    if (out.recompute_ratio > options.recompute_bound)
      out.failure =
          Failure{"recompute", fmt::format("the schedule costs {:.3f} times its graph with every op "
                                           "realized, above the bound of {}",
                                           out.recompute_ratio, options.recompute_bound)};
  }
  return out;
}

}  // namespace loom::fuzz
