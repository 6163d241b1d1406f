#include "schedule/schedule.hpp"

#include "ir/pass_observer.hpp"
#include "ir/profile.hpp"
#include "schedule/kernel_split.hpp"
#include "schedule/rangeify.hpp"
#include "schedule/stages.hpp"

namespace loom {

bool is_buffer_view(const UOpPtr& u) {
  return u->op == Op::BUFFER || (u->op == Op::RESHAPE && u->src[0]->op == Op::BUFFER);
}

// The pipeline of docs/pipeline.md: the tensor-level stages, rangeify, the
// stages on its BUFFERIZE graph, kernel split, then the per-kernel stages.
Schedule create_schedule(const std::vector<UOpPtr>& targets, const BufferFactory& make_buffer,
                         const std::vector<UOpPtr>& into, const ScheduleOptions& options) {
  const std::shared_ptr<const Flags> flags = loom::flags();
  const std::vector<UOpPtr> staged = tensor_stages(targets, *flags, options.target);
  UOpPtr ranged;
  {
    ProfileSpan span("stage", "rangeify");
    ranged = rangeify(staged);
  }
  if (pass_observed())
    notify_pass({PassLevel::Graph, "rangeify", "", UOp::make(Op::SINK, DType::Bool, staged), ranged});
  std::vector<bool> in_place(into.size());
  for (size_t i = 0; i < into.size(); ++i) in_place[i] = into[i] != nullptr;
  const UOpPtr staged_buffers = buffer_stages(ranged, *flags, options.panel_bytes, options.panel_rows,
                                              in_place, options.panel_depth, options.target);
  ProfileSpan span("stage", "kernel_split");
  return split_kernels(
      staged_buffers, make_buffer, into,
      [&](const UOpPtr& ast, std::vector<KernelPassRun>& ran) { return kernel_stages(ast, *flags, ran); });
}

}  // namespace loom
