#include "schedule/schedule.hpp"

#include "ir/pass_observer.hpp"
#include "ir/profile.hpp"
#include "schedule/kernel_split.hpp"
#include "schedule/rangeify.hpp"

namespace loom {

bool is_buffer_view(const UOpPtr& u) {
  return u->op == Op::BUFFER || (u->op == Op::RESHAPE && u->src[0]->op == Op::BUFFER);
}

// The rewrite stages slot in here, in the order of docs/design.md §5: split
// reduceop before rangeify; reduce collapse, buffer removal and friends on the
// BUFFERIZE graph; load collapse and range split/merge per kernel.
Schedule create_schedule(const std::vector<UOpPtr>& targets, const BufferFactory& make_buffer,
                         const std::vector<UOpPtr>& into) {
  UOpPtr ranged;
  {
    ProfileSpan span("stage", "rangeify");
    ranged = rangeify(targets);
  }
  if (pass_observed())
    notify_pass({PassLevel::Graph, "rangeify", "", UOp::make(Op::SINK, DType::Bool, targets), ranged});
  ProfileSpan span("stage", "kernel_split");
  return split_kernels(ranged, make_buffer, into);
}

}  // namespace loom
