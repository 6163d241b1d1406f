#include "src/plan.hpp"

#include "src/memory_plan.hpp"
#include "src/offset_vars.hpp"

#include "codegen/codegen.hpp"
#include "ir/pattern.hpp"
#include "schedule/schedule.hpp"

#include <fmt/format.h>

namespace loom::detail {

namespace {
// Placeholders are BUFFER nodes without memory whose id is -(table index + 1):
// real buffers have positive ids, so the two never meet in the intern table.
UOpPtr placeholder(DType dtype, size_t index, int64_t size) {
  return UOp::make(Op::BUFFER, dtype, {}, std::vector<int64_t>{-static_cast<int64_t>(index) - 1, size});
}

uint32_t table_index(const UOpPtr& buffer) {
  const int64_t id = buffer->op == Op::BUFFER ? buffer->get<std::vector<int64_t>>().at(0) : 0;
  if (id >= 0)
    throw Error(fmt::format("engine: the schedule bound a {} node that is not a placeholder buffer",
                            op_name(buffer->op)));
  return static_cast<uint32_t>(-id - 1);
}
}  // namespace

Plan plan_schedule(const std::vector<UOpPtr>& targets, const GraphSignature& sig,
                   const std::vector<int64_t>& into) {
  Plan plan;
  plan.inputs = sig.inputs();
  std::vector<std::pair<UOpPtr, UOpPtr>> swaps;
  std::vector<UOpPtr> inputs;
  for (size_t p = 0; p < sig.inputs(); ++p) {
    const UOpPtr& buf = sig.buffer(p);
    inputs.push_back(placeholder(buf->dtype, p, buf->get<std::vector<int64_t>>().at(1)));
    swaps.emplace_back(buf, inputs.back());
  }
  const UOpPtr abstract = substitute(UOp::make(Op::SINK, DType::Bool, targets), swaps);
  std::vector<UOpPtr> abstract_into(into.size());
  for (size_t i = 0; i < into.size(); ++i)
    if (into[i] >= 0) abstract_into[i] = inputs.at(static_cast<size_t>(into[i]));

  auto make_buffer = [&plan](DType dtype, int64_t size) {
    plan.allocations.push_back({dtype, size});
    return placeholder(dtype, plan.inputs + plan.allocations.size() - 1, size);
  };
  // b of a matmul is packed in panels as wide as the tile codegen will give it.
  const std::shared_ptr<const Flags> f = flags();
  const ScheduleOptions options{matmul_panel_bytes(*f), matmul_panel_rows(*f), matmul_panel_depth(*f),
                                target_of(*f)};
  Schedule schedule = create_schedule(abstract->src, make_buffer, abstract_into, options);
  for (auto& k : schedule.kernels) {
    PlanKernel pk{std::move(k.ast), std::move(k.name), {}, k.outputs, 1, {}, {}};
    for (const auto& b : k.buffers) pk.args.push_back(table_index(b));
    plan.kernels.push_back(std::move(pk));
  }
  if (!flags()->disabled(kOffsetVarsPass)) share_offset_kernels(plan.kernels);
  for (const auto& r : schedule.results) {
    const bool view = r->op == Op::RESHAPE;
    plan.results.push_back({table_index(view ? r->src[0] : r), view ? r->shape() : std::nullopt});
  }
  share_dead_buffers(plan);
  return plan;
}

}  // namespace loom::detail
