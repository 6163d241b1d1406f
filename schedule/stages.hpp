#pragma once
// The order of the rewrite stages (docs/pipeline.md): which stages run where,
// grouped into fixpoints.
//  - on the tensor graph, before rangeify: split_reduceop;
//  - on rangeify's graph, one fixpoint with the simplifier: reduce_collapse,
//    reduce_unparented, dead_axis and buffer_removal; then panel_packing; then
//    multi_output;
//  - per kernel, before the optimiser: load_collapse, then range_split with
//    range_flatten, then the simplifier with range_flatten, then range_merge.
#include "ir/flags.hpp"
#include "ir/target.hpp"
#include "ir/uop.hpp"
#include "schedule/kernel_split.hpp"

#include <optional>
#include <string_view>
#include <vector>

namespace loom {

// The names of the stages LOOM_DISABLE may switch off, in pipeline order.
const std::vector<std::string_view>& rewrite_stage_names();
// The stages that are off unless LOOM_ENABLE names them.
const std::vector<std::string_view>& off_by_default_stage_names();

// The tensor-level stages: `targets` rewritten (same order).
// `target` (default: the flags' LOOM_TARGET) sizes split_reduceop's blocks.
std::vector<UOpPtr> tensor_stages(const std::vector<UOpPtr>& targets, const Flags& flags,
                                  const std::optional<Target>& target = std::nullopt);

// The stages on rangeify's SINK of BUFFERIZEs, then panel_packing (with
// column panels of `panel_bytes`, 0: none, and row panels of `panel_rows`, 0:
// none; a tile sums `panel_depth` rows of a panel per block of k), then
// multi_output (which leaves the roots `in_place_roots` marks alone), and then the
// realization markers dropped: what kernel_split takes. `target` (default: the
// flags' LOOM_TARGET) sizes panel_packing's thresholds.
UOpPtr buffer_stages(const UOpPtr& sink, const Flags& flags, int64_t panel_bytes = 0, int64_t panel_rows = 0,
                     const std::vector<bool>& in_place_roots = {}, int64_t panel_depth = 0,
                     const std::optional<Target>& target = std::nullopt);

// The per-kernel stages on one kernel's AST (docs/kernel-ir.md), its ranges
// renumbered after; each group's run is appended to `ran` (kernel_split
// announces them once the kernels are named).
UOpPtr kernel_stages(const UOpPtr& kernel, const Flags& flags, std::vector<KernelPassRun>& ran);

}  // namespace loom
