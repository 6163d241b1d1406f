#pragma once
// A rewrite stage is a name and one pattern set; stages run in groups, each
// group one fixpoint of its stages' rules (docs/pipeline.md gives the groups,
// their order and what each stage matches). LOOM_DISABLE=name takes that
// stage's rules out of its group, so any stage can be switched off alone.
// After each group the pass observers (ir/pass_observer.hpp) see the graph
// before and after it: LOOM_DEBUG=5, dump files and the tests' checkers.
#include "ir/flags.hpp"
#include "ir/pass_observer.hpp"
#include "ir/pattern.hpp"
#include "ir/target.hpp"

#include <functional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace loom {

struct Stage {
  std::string_view name;  // as LOOM_DISABLE and docs/pipeline.md spell it
  const PatternMatcher& (*rules)();
  bool optional = true;    // false: the simplifier, which LOOM_DISABLE does not switch off
  bool by_default = true;  // false: off unless LOOM_ENABLE names it
};

// Does `stage` run under `flags` (LOOM_DISABLE, LOOM_ENABLE)?
bool stage_on(const Stage& stage, const Flags& flags);

// What the stages' rewrite functions may read: the flags of this realize, and
// the RangeSplits that range_split collects until it reaches the SINK.
// Where a RANGE stands among the ranges of the buffer it loops over (buffer_removal):
// its position (0 is the outermost), how many ranges the buffer has, and how many of
// its leading ranges the reduces in its value run under (a matmul's sum: all of them).
struct RangePlace {
  const UOp* buffer = nullptr;
  size_t position = 0, count = 0, reduce_reach = 0;
  size_t reads = 0;  // the distinct indices (INDEX nodes) the buffer is read at
};

struct StageContext {
  const Flags& flags;
  std::vector<std::pair<UOpPtr, int64_t>> pending_splits;  // range_split: (RANGE, factor)
  int64_t panel_bytes = 0;  // panel_packing: the register tile's width in bytes (0: no packing)
  int64_t panel_rows = 0;   // panel_packing: the register tile's rows (0: a is not packed)
  int64_t panel_depth = 0;  // panel_packing: the rows of k a tile sums per block of its panel (kc)
  int64_t next_axis = 0;    // panel_packing: the next axis id no range of the graph has
  // buffer_removal: the place of each BUFFERIZE's ranges (`held` keeps the keys alive).
  std::unordered_map<const UOp*, RangePlace> range_places = {};
  std::vector<UOpPtr> held = {};
  // online_softmax: how many distinct reads (INDEX nodes) of each BUFFERIZE the graph has.
  std::unordered_map<const UOp*, int> buffer_readers = {};
  // multi_output: per root of the graph, whether it is written in place (an assign).
  std::vector<bool> in_place_roots = {};
  // range_merge: the loops more than one END of the kernel lists (several outputs).
  std::unordered_set<const UOp*> shared_loops = {};
  // The machine the kernels are for (LOOM_TARGET): its caches size split_reduceop's
  // blocks and panel_packing's thresholds.
  Target target = target_of(flags);
};

// How many distinct reads (INDEX nodes) of each BUFFERIZE the graph `nodes` (a toposort) has:
// what buffer_removal's range places and online_softmax's weights count.
std::unordered_map<const UOp*, int> buffer_reads(const std::vector<UOpPtr>& nodes);

// Told what a group made of the graph: (group, before, after).
using StageReport = std::function<void(std::string_view group, const UOpPtr& before, const UOpPtr& after)>;
// The report for a schedule-wide graph: a Graph-level pass event at once.
void notify_graph_stage(std::string_view group, const UOpPtr& before, const UOpPtr& after);

// Rewrites `root` to a fixpoint of the enabled stages' rules as the group
// `group` (a span of LOOM_PROFILE), then reports it.
UOpPtr run_stages(std::string_view group, const std::vector<Stage>& stages, const UOpPtr& root,
                  StageContext& ctx, const StageReport& report);

}  // namespace loom
