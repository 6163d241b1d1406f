#include "schedule/stages.hpp"

#include "ir/range_split.hpp"
#include "ir/symbolic.hpp"
#include "schedule/buffer_removal.hpp"
#include "schedule/dead_axis.hpp"
#include "schedule/elementwise_outputs.hpp"
#include "schedule/guard_narrowing.hpp"
#include "schedule/load_collapse.hpp"
#include "schedule/masked_reads.hpp"
#include "schedule/multi_output.hpp"
#include "schedule/narrow_buffers.hpp"
#include "schedule/online_softmax.hpp"
#include "schedule/panel_packing.hpp"
#include "schedule/range_flatten.hpp"
#include "schedule/range_merge.hpp"
#include "schedule/range_split.hpp"
#include "schedule/reduce_collapse.hpp"
#include "schedule/reduce_unparented.hpp"
#include "schedule/row_padding.hpp"
#include "schedule/scatter_reduce.hpp"
#include "schedule/split_reduceop.hpp"
#include "schedule/stage.hpp"
#include "schedule/valid_index.hpp"

#include <algorithm>

namespace loom {

namespace {

// A realization point's value is wrapped in CONTIGUOUS so that no stage removes
// its buffer; kernel_split takes the value itself.
const PatternMatcher& drop_realize_markers() {
  static const PatternMatcher pm(
      "drop_realize_markers",
      {{UPat::op(Op::BUFFERIZE, {UPat::op(Op::CONTIGUOUS, {UPat::var("x")})}).allow_more_src(),
        [](const Match& m) {
          std::vector<UOpPtr> src = m.root()->src;
          src[0] = m["x"];
          return m.root()->with_src(std::move(src));
        }}});
  return pm;
}

// On rangeify's graph the simplifier touches index arithmetic and conditions
// only: float values are simplified per kernel, where the kernel checker sees it.
const Stage kIndexSimplifier{"symbolic", symbolic_index, false};
const Stage kSimplifier{"symbolic", symbolic, false};

// The stages LOOM_DISABLE switches off, each named once.
const Stage kSplitReduceop{"split_reduceop", split_reduceop};
const Stage kReduceCollapse{"reduce_collapse", reduce_collapse};
const Stage kReduceUnparented{"reduce_unparented", reduce_unparented};
const Stage kDeadAxis{"dead_axis", dead_axis};
const Stage kNarrowBuffers{"narrow_buffers", narrow_buffers};
// Off until its kernels are tiled: correct, but slower than the stored scores (docs/performance.md).
const Stage kOnlineSoftmax{"online_softmax", online_softmax, true, false};
const Stage kBufferRemoval{"buffer_removal", buffer_removal};
const Stage kPanelPacking{"panel_packing", panel_packing};
const Stage kMultiOutput{"multi_output", multi_output};
const Stage kElementwiseOutputs{"elementwise_outputs", elementwise_outputs};
const Stage kRowPadding{"row_padding", row_padding};
const Stage kMaskedReads{"masked_reads", masked_reads};
const Stage kScatterReduce{"scatter_reduce", scatter_reduce};
const Stage kLoadCollapse{"load_collapse", load_collapse};
const Stage kGuardNarrowing{"guard_narrowing", guard_narrowing};
const Stage kValidIndex{"valid_index", valid_index};
const Stage kRangeSplit{"range_split", range_split};
const Stage kRangeFlatten{"range_flatten", range_flatten};
const Stage kRangeMerge{"range_merge", range_merge};

// Every stage LOOM_DISABLE or LOOM_ENABLE may name, in pipeline order.
const std::vector<const Stage*>& named_stages() {
  static const std::vector<const Stage*> stages{
      &kSplitReduceop, &kReduceCollapse, &kReduceUnparented, &kDeadAxis,     &kNarrowBuffers,
      &kOnlineSoftmax, &kBufferRemoval,  &kPanelPacking,     &kMultiOutput,  &kElementwiseOutputs,
      &kRowPadding,    &kMaskedReads,    &kScatterReduce,    &kLoadCollapse, &kGuardNarrowing,
      &kValidIndex,    &kRangeSplit,     &kRangeFlatten,     &kRangeMerge};
  return stages;
}

}  // namespace

const std::vector<std::string_view>& rewrite_stage_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const Stage* s : named_stages()) out.push_back(s->name);
    return out;
  }();
  return names;
}

const std::vector<std::string_view>& off_by_default_stage_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const Stage* s : named_stages())
      if (!s->by_default) out.push_back(s->name);
    return out;
  }();
  return names;
}

std::vector<UOpPtr> tensor_stages(const std::vector<UOpPtr>& targets, const Flags& flags,
                                  const std::optional<Target>& target) {
  StageContext ctx{flags, {}};
  if (target) ctx.target = *target;
  const UOpPtr sink = UOp::make(Op::SINK, DType::Bool, targets);
  const UOpPtr out = run_stages("split_reduceop", {kSplitReduceop}, sink, ctx, notify_graph_stage);
  return out->src;
}

UOpPtr buffer_stages(const UOpPtr& sink, const Flags& flags, int64_t panel_bytes, int64_t panel_rows,
                     const std::vector<bool>& in_place_roots, int64_t panel_depth,
                     const std::optional<Target>& target) {
  StageContext ctx{flags, {}, panel_bytes, panel_rows, panel_depth};
  if (target) ctx.target = *target;
  ctx.in_place_roots = in_place_roots;
  UOpPtr online = sink;
  if (stage_on(kOnlineSoftmax, flags)) {
    count_buffer_readers(sink, ctx);
    // First: buffer_removal would keep the scores it inlines, and the sums must see the weights' buffer.
    online = run_stages("online_softmax", {kOnlineSoftmax}, sink, ctx, notify_graph_stage);
  }
  place_ranges(online, ctx);
  const UOpPtr out = run_stages(
      "buffer_stages",
      {kIndexSimplifier, kReduceCollapse, kReduceUnparented, kDeadAxis, kNarrowBuffers, kBufferRemoval},
      online, ctx, notify_graph_stage);
  // Apart: its copies are realization points no other stage of the group may undo.
  // Its copies' new ranges take ids no range of the whole graph has: two products' copies made
  // with the same ids and extents would be one RANGE node, and kernel_split one kernel of both.
  ctx.next_axis = next_axis_id(out);
  const UOpPtr packed = run_stages("panel_packing", {kPanelPacking}, out, ctx, notify_graph_stage);
  // After packing: the product's value is final, and its reads are what the sum must share.
  const UOpPtr fused = run_stages("multi_output", {kMultiOutput}, packed, ctx, notify_graph_stage);
  // After multi_output: a sum it fused shares its product's ranges and stays out.
  const UOpPtr joined =
      run_stages("elementwise_outputs", {kElementwiseOutputs}, fused, ctx, notify_graph_stage);
  // Last: every buffer the stages keep is known, and none of them reads a layout.
  const UOpPtr padded = run_stages("row_padding", {kRowPadding}, joined, ctx, notify_graph_stage);
  // After every stage that keeps or removes a buffer: a read it masks is a kernel's.
  const UOpPtr masked = run_stages("masked_reads", {kMaskedReads}, padded, ctx, notify_graph_stage);
  return graph_rewrite(masked, drop_realize_markers());
}

UOpPtr kernel_stages(const UOpPtr& kernel, const Flags& flags, std::vector<KernelPassRun>& ran) {
  StageContext ctx{flags, {}};
  const StageReport record = [&](std::string_view group, const UOpPtr& before, const UOpPtr& after) {
    ran.push_back({std::string(group), before, after});
  };
  // scatter_reduce first: range_merge would fold the selected row into a merged range.
  UOpPtr k = run_stages("scatter_reduce", {kScatterReduce}, kernel, ctx, record);
  k = run_stages("load_collapse", {kLoadCollapse}, k, ctx, record);
  // Before valid_index and range_split: they see the loop's narrowed extent.
  k = run_stages("guard_narrowing", {kGuardNarrowing}, k, ctx, record);
  // Before range_split: the addresses it finds strides in are the ones simplified under their guards.
  k = run_stages("valid_index", {kValidIndex}, k, ctx, record);
  k = run_stages("range_split", {kRangeSplit, kRangeFlatten}, k, ctx, record);
  k = run_stages("range_simplify", {kSimplifier, kRangeFlatten}, k, ctx, record);
  for (const auto& r : ranges_of(k))
    if (std::count_if(k->src.begin(), k->src.end(), [&](const UOpPtr& e) {
          return e->op == Op::END && std::find(e->src.begin() + 1, e->src.end(), r) != e->src.end();
        }) > 1)
      ctx.shared_loops.insert(r.get());
  k = run_stages("range_merge", {kRangeMerge}, k, ctx, record);
  const UOpPtr renumbered = renumber_ranges(k);  // equal kernels hash-cons whatever ids the stages chose
  if (renumbered != k) ran.back().after = renumbered;
  return renumbered;
}

}  // namespace loom
