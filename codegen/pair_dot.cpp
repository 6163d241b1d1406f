#include "codegen/pair_dot.hpp"

#include "codegen/kernel_edit.hpp"
#include "ir/buffer_access.hpp"
#include "ir/pattern.hpp"
#include "ir/range_split.hpp"
#include "ir/widening.hpp"

#include <algorithm>

namespace loom::kopt {

namespace {

// The REDUCEs under the kernel's main END (its first effect).
std::vector<UOpPtr> main_sums(const UOpPtr& kernel) {
  std::vector<UOpPtr> out;
  if (kernel->op != Op::SINK || kernel->src.empty()) return out;
  for (const auto& n : toposort(kernel->src[0]))
    if (n->op == Op::REDUCE) out.push_back(n);
  return out;
}

}  // namespace

bool is_bf16_product_sum(const UOpPtr& red) {
  if (!is_float_sum(red) || red->dtype != DType::Float32) return false;
  const UOpPtr& v = red->src.at(0);
  return v->op == Op::MUL && is_widened_bf16(v->src.at(0)) && is_widened_bf16(v->src.at(1));
}

UOpPtr pair_sum(const UOpPtr& kernel, const UOpPtr& range) {
  const std::vector<UOpPtr> reds = reduces_of(kernel, range);
  const auto steps = trip(range);
  if (reds.size() != 1 || !is_bf16_product_sum(reds[0]) || !steps || *steps < 2 || *steps % 2) return nullptr;
  // A range of 2 (the schedule split k where the pairs are laid out) is the pair itself.
  const int64_t id = next_axis_id(kernel);
  const UOpPtr q = *steps == 2 ? nullptr : make_range(*steps / 2, id, AxisKind::Reduce);
  const UOpPtr t = make_range(2, id + 1, AxisKind::Pair);
  const UOpPtr& red = reds[0];
  std::vector<UOpPtr> src{red->src[0]};
  for (size_t i = 1; i < red->src.size(); ++i) {
    if (red->src[i] != range) {
      src.push_back(red->src[i]);
      continue;
    }
    if (q) src.push_back(q);
    src.push_back(t);
  }
  const UOpPtr paired = substitute(kernel, {{red, red->with_src(std::move(src))}});
  const UOpPtr later_first = const_int(DType::Int64, 1) - t;
  return substitute_ranges(paired, {{range, q ? q * 2 + later_first : later_first}});
}

UOpPtr pair_dot_candidate(const UOpPtr& kernel, const Target& target) {
  if (!target.pair_dot()) return nullptr;
  const std::vector<UOpPtr> sums = main_sums(kernel);
  if (sums.size() != 1 || !is_bf16_product_sum(sums[0])) return nullptr;
  // The innermost of the sum's ranges along which each factor's pairs are one vector: after
  // the split, every load steps by one element along the pair.
  for (size_t i = sums[0]->src.size(); i-- > 1;) {
    const UOpPtr& range = sums[0]->src[i];
    if (range->op != Op::RANGE || kind(range) != AxisKind::Reduce) continue;
    const UOpPtr paired = pair_sum(kernel, range);
    if (!paired) continue;
    const std::vector<UOpPtr> after = main_sums(paired);
    UOpPtr t;
    for (const auto& r : after.at(0)->src)
      if (r->op == Op::RANGE && kind(r) == AxisKind::Pair) t = r;
    bool vectors = true;
    for (const auto& n : toposort(after[0]->src[0]))
      vectors &= n->op != Op::INDEX || address_stride(n, t) == 1;
    if (vectors) return range;
  }
  return nullptr;
}

}  // namespace loom::kopt
