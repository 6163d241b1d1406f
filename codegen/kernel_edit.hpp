#pragma once
// The edits the optimiser's Opts and recipes are made of (codegen/opt.cpp,
// codegen/recipes.cpp, codegen/heuristic.cpp), all by range splitting and
// substitution over one kernel. Private to the optimiser: not codegen's interface.
#include "ir/uop.hpp"

#include <cstdint>
#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

namespace loom::kopt {

// A float sum adds at most this many values into one accumulator before the partial
// sum moves to the next level: ~u*sqrt(kBlock) relative error per level (u = 2^-24).
inline constexpr int64_t kBlock = 256;
// Lanes the optimiser's vectors take at most, the bound its choices were measured under
// (codegen/register_tile.cpp's kMaxLanes); a matmul tile one wide across a narrow product's
// columns may take up to DType::kMaxLanes, what a vector dtype holds.
inline constexpr int64_t kMaxVectorLanes = 255;

AxisKind kind(const UOpPtr& range);
UOpPtr with_kind(const UOpPtr& range, AxisKind k);
// The range of axis `id` in the kernel, or null.
UOpPtr find_range(const UOpPtr& kernel, int64_t id);
// The REDUCEs that close `range` (a kernel may hold several over one range).
std::vector<UOpPtr> reduces_of(const UOpPtr& kernel, const UOpPtr& range);
// The first of them, if any.
UOpPtr reduce_of(const UOpPtr& kernel, const UOpPtr& range);
bool is_float_sum(const UOpPtr& red);
// The sums of `k` with a REDUCE[MAX] nested in them over their very own ranges (the max
// of the whole row, which lower_reduce folds into the sum's loop, docs/kernel-ir.md):
// (sum, max) pairs, a sum once per such max.
std::vector<std::pair<UOpPtr, UOpPtr>> running_max_sums(const UOpPtr& k);
// The ranges of the sums of `k` that fold a running max: their loops run one step at a
// time, in order, so no Opt splits them.
std::unordered_set<const UOp*> running_max_ranges(const UOpPtr& k);

// `range` runs to `end` instead: the iterations past its old end touch no memory
// and add nothing to a REDUCE (its identity). `end` may be symbolic, as the old end may.
UOpPtr pad_range(const UOpPtr& kernel, const UOpPtr& range, const UOpPtr& end);
UOpPtr pad_range(const UOpPtr& kernel, const UOpPtr& range, int64_t end);
// `range` padded to a multiple of `multiple` where its end is not one; a symbolic
// end n becomes ((n + multiple - 1) / multiple) * multiple, its tail masked.
UOpPtr pad_to_multiple(const UOpPtr& kernel, const UOpPtr& range, int64_t multiple);
// The least multiple of `multiple` at or past `end`: `end` itself when it is one
// (exact_quotient), a constant for a constant, else ((end + multiple - 1) / multiple) * multiple.
UOpPtr round_up(const UOpPtr& end, int64_t multiple);
// end - 1, folded: the last iteration of a range that ends at `end`.
UOpPtr last_of(const UOpPtr& end);
// A reduce range padded to a multiple of `multiple` without masking its loads: each
// reads at the range clamped to its old end (the last real step again, in bounds) and
// the REDUCEs over it add their identity there, so a sum's inner loop selects its
// term instead of testing every load. As pad_to_multiple where the range may run no
// iteration (its end's lower bound below 1).
UOpPtr pad_sum_clamped(const UOpPtr& kernel, const UOpPtr& range, int64_t multiple);
// An output range padded to `end` without masking its loads (codegen/kernel_edit.cpp).
// `end` may be symbolic, as the range's own end may; a range that may run no
// iteration (its end's lower bound below 1) has no last iteration to read again, so
// it is padded as pad_range pads, every access masked.
UOpPtr pad_output_range(const UOpPtr& kernel, const UOpPtr& range, const UOpPtr& end,
                        bool repeat_last = false);
UOpPtr pad_output_range(const UOpPtr& kernel, const UOpPtr& range, int64_t end, bool repeat_last = false);

struct Lanes {
  int64_t upcast, unroll;  // range = (outer * unroll + unrolled) * upcast + lane
};

struct Split {
  UOpPtr root, outer, inner;
};

// range -> outer * factor + inner by the range-splitting primitive: the outer part keeps
// `range`'s kind, the inner one is of `inner_kind`, both with fresh axis ids.
Split split(const UOpPtr& k, const UOpPtr& range, int64_t factor, AxisKind inner_kind);
// `range` (padded first if needed) split into outer, unroll and upcast parts. Returns
// the kernel and the outer range's id.
std::pair<UOpPtr, int64_t> split_lanes(UOpPtr k, UOpPtr range, Lanes lanes);
// Nested blocks for a float sum over the range `range_id`: the innermost REDUCE adds
// at most about `most` values per accumulator, each outer one at most that many partial sums.
UOpPtr block_sum(UOpPtr k, int64_t range_id, int64_t most = kBlock);
// The float-sum range a BlockSum goes to next: the last reduce range longer than
// `most` that a float sum closes, or null.
UOpPtr long_float_sum(const UOpPtr& k, int64_t most = kBlock);
// Every float sum longer than kBlock blocked (the reduced range when the lanes are
// outputs, or when nothing was upcast).
UOpPtr block_all_sums(UOpPtr k);

// The float sum `red` over its short range `range` written out as its terms, each with
// the range a constant (so a pick by it folds to the one load it reads); the sum's other
// ranges stay a REDUCE.
UOpPtr expand_sum(const UOpPtr& kernel, const UOpPtr& red, const UOpPtr& range);

// `kernel` with its main END (its first effect) replaced by `end`.
UOpPtr with_main_end(const UOpPtr& kernel, UOpPtr end);
// The kernel's main END lists `first` before its other ranges.
UOpPtr loop_first(const UOpPtr& kernel, const UOpPtr& first);
// A one-END kernel with the last iteration of `range` as an END of its own: the first END
// runs `range` one iteration short, the second the last iteration over fresh copies of the
// other loops, both under the END's first loop other than `range`, which they share.
UOpPtr peel_last(const UOpPtr& kernel, const UOpPtr& range);
// Loops of one iteration left by the splits become their only value.
UOpPtr drop_unit_loops(UOpPtr k);

}  // namespace loom::kopt
