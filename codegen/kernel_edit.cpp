// The optimiser's edits (codegen/kernel_edit.hpp): padding, range splits, blocked
// sums and the reordering of a kernel's main END.
#include "codegen/kernel_edit.hpp"

#include "codegen/vector_ops.hpp"
#include "ir/pattern.hpp"
#include "ir/range_split.hpp"
#include "ir/symbolic.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

namespace loom::kopt {

AxisKind kind(const UOpPtr& range) { return range->get<AxisArg>().kind; }

UOpPtr with_kind(const UOpPtr& range, AxisKind k) {
  return UOp::make(Op::RANGE, range->dtype, range->src, AxisArg{range->get<AxisArg>().id, k});
}

UOpPtr find_range(const UOpPtr& kernel, int64_t id) {
  for (const auto& r : ranges_of(kernel))
    if (r->get<AxisArg>().id == id) return r;
  return nullptr;
}

// The REDUCEs that close `range` (a kernel may hold several over one range).
std::vector<UOpPtr> reduces_of(const UOpPtr& kernel, const UOpPtr& range) {
  std::vector<UOpPtr> out;
  for (const auto& n : toposort(kernel))
    if (n->op == Op::REDUCE && std::find(n->src.begin() + 1, n->src.end(), range) != n->src.end())
      out.push_back(n);
  return out;
}

// The first of them, if any.
UOpPtr reduce_of(const UOpPtr& kernel, const UOpPtr& range) {
  const std::vector<UOpPtr> reds = reduces_of(kernel, range);
  return reds.empty() ? nullptr : reds.front();
}

// ---- padding ------------------------------------------------------------------------
// `range` runs to `end` instead: the iterations past its old end touch no memory
// (their accesses become invalid) and add nothing to a REDUCE (its identity).
// Every global access the padded range reaches gets `inside` in its validity,
// inner ones first: an index loaded to address another access (a gather) is an
// access of its own and must be guarded inside the outer one too.
UOpPtr guard_accesses(const UOpPtr& kernel, const UOpPtr& padded, const UOpPtr& inside) {
  std::unordered_map<const UOp*, UOpPtr> done;
  for (const auto& n : toposort(kernel)) {
    std::vector<UOpPtr> src;
    for (const auto& s : n->src) src.push_back(done.at(s.get()));
    if (n->op == Op::INDEX && n->src.at(0)->op == Op::DEFINE_GLOBAL && reaches(n, padded))
      src = {src[0], src[1], src.size() > 2 ? land(src[2], inside) : inside};
    done[n.get()] = src == n->src ? n : n->with_src(std::move(src));
  }
  return done.at(kernel.get());
}

// `value` is 0 wherever every load that moves along `padded` reads nothing (a guarded
// access yields 0, docs/kernel-ir.md): such loads, and products, sums, casts and masks
// (WHERE(c, x, 0)) of values that are. Both factors of a product must be: 0 times an
// infinity another load holds is NaN.
bool zero_outside(const UOpPtr& value, const UOpPtr& padded) {
  switch (value->op) {
    case Op::LOAD: {
      const UOpPtr& index = value->src.at(0);
      return index->op == Op::INDEX && index->src.at(0)->op == Op::DEFINE_GLOBAL && reaches(index, padded);
    }
    case Op::MUL:
    case Op::ADD: return zero_outside(value->src[0], padded) && zero_outside(value->src[1], padded);
    case Op::CAST:
    case Op::NEG: return zero_outside(value->src[0], padded);
    case Op::WHERE:
      return value->src[2]->is_const() && value->src[2]->const_value() == 0.0 &&
             zero_outside(value->src[1], padded);
    default: return false;
  }
}

// Every REDUCE over the padded range `padded` folds the padding (where `inside` is
// false) as its identity: one kernel may hold several over the same range (a row's sum
// read twice, computed in place). With `guarded_loads` (pad_range), a sum whose terms are
// 0 there already (zero_outside: a product of loads) is left alone: the select around
// each term kept LLVM from fusing the multiply and the add (a dot tile's padded row:
// masked vmulps and vaddps, twice the FMAs' instructions).
UOpPtr identity_outside(const UOpPtr& k, const UOpPtr& padded, const UOpPtr& inside, bool guarded_loads) {
  std::vector<std::pair<UOpPtr, UOpPtr>> guarded;
  for (const auto& red : reduces_of(k, padded)) {
    const ReduceArg& arg = red->get<ReduceArg>();
    if (guarded_loads && arg.op == Op::ADD && zero_outside(red->src[0], padded)) continue;
    std::vector<UOpPtr> src = red->src;
    src[0] = where(inside, src[0], reduce_identity(red->get<ReduceArg>().op, red->dtype));
    guarded.emplace_back(red, red->with_src(std::move(src)));
  }
  return substitute(k, guarded);
}

UOpPtr pad_range(const UOpPtr& kernel, const UOpPtr& range, const UOpPtr& end) {
  const UOpPtr& old_end = range->src.at(0);
  const AxisArg axis = range->get<AxisArg>();
  const UOpPtr padded = make_range(end, axis.id, axis.kind);
  const UOpPtr inside = padded < old_end;
  UOpPtr k = guard_accesses(substitute(kernel, {{range, padded}}), padded, inside);
  if (axis.kind != AxisKind::Reduce) return k;
  return identity_outside(k, padded, inside, /*guarded_loads=*/true);
}
UOpPtr pad_range(const UOpPtr& kernel, const UOpPtr& range, int64_t end) {
  return pad_range(kernel, range, const_i64(end));
}

// `range` padded to a multiple of `multiple` where its end is not one.
UOpPtr pad_to_multiple(const UOpPtr& kernel, const UOpPtr& range, int64_t multiple) {
  const UOpPtr& end = range->src.at(0);
  if (exact_quotient(end, multiple)) return kernel;
  return pad_range(kernel, range, round_up(end, multiple));
}

UOpPtr pad_sum_clamped(const UOpPtr& kernel, const UOpPtr& range, int64_t multiple) {
  const UOpPtr& old_end = range->src.at(0);
  if (exact_quotient(old_end, multiple)) return kernel;
  if (old_end->vmin() < 1) return pad_to_multiple(kernel, range, multiple);
  const AxisArg axis = range->get<AxisArg>();
  const UOpPtr padded = make_range(round_up(old_end, multiple), axis.id, axis.kind);
  const UOpPtr inside = padded < old_end;
  const UOpPtr last = last_of(old_end);
  const UOpPtr clamped = where(inside, padded, last);
  const UOpPtr k = substitute(kernel, {{range, padded}});
  std::vector<std::pair<UOpPtr, UOpPtr>> fixed;
  for (const auto& n : toposort(k)) {
    if (n->op != Op::INDEX || n->src.at(0)->op != Op::DEFINE_GLOBAL || !reaches(n, padded)) continue;
    std::vector<UOpPtr> src = n->src;
    for (size_t i = 1; i < src.size(); ++i) src[i] = substitute(src[i], {{padded, clamped}});
    fixed.emplace_back(n, n->with_src(std::move(src)));
  }
  return identity_outside(substitute(k, fixed), padded, inside, /*guarded_loads=*/false);
}

UOpPtr last_of(const UOpPtr& end) {
  return end->is_const() ? const_i64(end->const_int() - 1) : simplify(end - 1);
}

UOpPtr round_up(const UOpPtr& end, int64_t multiple) {
  if (exact_quotient(end, multiple)) return end;
  if (end->is_const()) return const_i64((end->const_int() + multiple - 1) / multiple * multiple);
  return simplify((end + (multiple - 1)) / multiple * multiple);
}

// range -> outer * factor + inner by the range-splitting primitive: the outer part keeps
// `range`'s kind, the inner one is of `inner_kind`, both with fresh axis ids.
Split split(const UOpPtr& k, const UOpPtr& range, int64_t factor, AxisKind inner_kind) {
  const SplitRanges s = split_ranges(k, {RangeSplit{range, factor, inner_kind}});
  return {s.root, s.parts[0].first, s.parts[0].second};
}

// `range` (padded first if needed) split into outer, unroll and upcast parts:
// range = (outer * unroll + unrolled) * upcast + lane. Returns the kernel and
// the outer range's id.
std::pair<UOpPtr, int64_t> split_lanes(UOpPtr k, UOpPtr range, Lanes lanes) {
  const int64_t id = range->get<AxisArg>().id;
  k = pad_to_multiple(k, range, lanes.upcast * lanes.unroll);
  const Split lane = split(k, find_range(k, id), lanes.upcast, AxisKind::Upcast);
  if (lanes.unroll == 1) return {lane.root, lane.outer->get<AxisArg>().id};
  const Split unrolled = split(lane.root, lane.outer, lanes.unroll, AxisKind::Unroll);
  return {unrolled.root, unrolled.outer->get<AxisArg>().id};
}

// Nested blocks for a float sum over `range` (a reduce range of `red`): the
// innermost REDUCE adds at most about `most` values per accumulator, each outer
// one at most that many partial sums.
UOpPtr block_sum(UOpPtr k, int64_t range_id, int64_t most) {
  UOpPtr range = find_range(k, range_id);
  const int64_t n = trip_bound(range);  // a symbolic sum is blocked for its longest
  if (n <= most) return k;
  const int levels =
      static_cast<int>(std::ceil(std::log2(static_cast<double>(n)) / std::log2(static_cast<double>(most))));
  const int64_t block =
      int64_t{1} << static_cast<int>(std::lround(std::log2(static_cast<double>(n)) / levels));
  k = pad_to_multiple(k, range, block);
  range = find_range(k, range_id);
  const Split blocks = split(k, range, block, AxisKind::Reduce);
  // REDUCE(x, ..., outer, inner, lanes...) -> REDUCE(REDUCE(x, inner), ..., outer, lanes...)
  const UOpPtr red = reduce_of(blocks.root, blocks.inner);
  const UOpPtr inner = UOp::make(Op::REDUCE, red->dtype, {red->src[0], blocks.inner}, red->arg);
  std::vector<UOpPtr> src{inner};
  for (size_t i = 1; i < red->src.size(); ++i)
    if (red->src[i] != blocks.inner) src.push_back(red->src[i]);
  k = substitute(blocks.root, {{red, red->with_src(std::move(src))}});
  return block_sum(k, blocks.outer->get<AxisArg>().id, most);
}

bool is_float_sum(const UOpPtr& red) {
  return red && red->get<ReduceArg>().op == Op::ADD && red->dtype.is_float();
}

// ---- register tiles -------------------------------------------------------------------
// The kernel's main END (its first) with every use of `padded` in what it stores
// clamped: its padded iterations are the last real one again.
UOpPtr repeat_last_iteration(const UOpPtr& kernel, const UOpPtr& padded, const UOpPtr& clamped) {
  std::vector<UOpPtr> effects = kernel->src, src = effects.at(0)->src;
  src[0] = substitute(src[0], {{padded, clamped}});
  effects[0] = effects[0]->with_src(std::move(src));
  return kernel->with_src(std::move(effects));
}

// An output range padded to `end` without masking its loads: every load reads
// at the range clamped to its old end (a duplicate of a real row, in bounds),
// and only the stores are guarded. So the inner loop of a tile whose rows do
// not divide the output has no per-row validity to test. With `repeat_last` the
// stores are clamped too: a padded row computes the last real row again, from the
// same loads in the same order, and stores the same value there again, so the
// epilogue tests no row (docs/performance.md: a padded product lost 3 to 8% to the
// tests). Only for a kernel that reads nothing it stores, and then for its main END
// alone: the other ENDs of a kernel of several outputs are guarded as below.
UOpPtr pad_output_range(const UOpPtr& kernel, const UOpPtr& range, int64_t end, bool repeat_last) {
  return pad_output_range(kernel, range, const_i64(end), repeat_last);
}

UOpPtr pad_output_range(const UOpPtr& kernel, const UOpPtr& range, const UOpPtr& end, bool repeat_last) {
  const UOpPtr& old_end = range->src.at(0);
  if (end == old_end || (end->is_const() && old_end->is_const() && end->const_int() == old_end->const_int()))
    return kernel;
  if (old_end->vmin() < 1) return pad_range(kernel, range, end);
  const AxisArg axis = range->get<AxisArg>();
  const UOpPtr padded = make_range(end, axis.id, axis.kind);
  const UOpPtr last = last_of(old_end);
  const UOpPtr clamped = where(padded < old_end, padded, last);
  const UOpPtr k0 = substitute(kernel, {{range, padded}});
  const UOpPtr k = repeat_last ? repeat_last_iteration(k0, padded, clamped) : k0;
  if (repeat_last && k->src.size() == 1) return k;
  std::vector<const UOp*> stored;
  for (const auto& n : toposort(k))
    if (n->op == Op::STORE) stored.push_back(n->src.at(0).get());
  // The loads only a side END makes (a column sum beside the tile) are guarded like the
  // stores: its rows are then lanes of one contiguous run, a vector load, where clamped
  // ones are a gather of one load a row.
  const auto main_nodes = toposort(k->src.at(0));
  std::unordered_set<const UOp*> main;
  for (const auto& n : main_nodes) main.insert(n.get());
  std::vector<std::pair<UOpPtr, UOpPtr>> fixed;
  for (const auto& n : toposort(k)) {
    if (n->op != Op::INDEX || n->src.at(0)->op != Op::DEFINE_GLOBAL || !reaches(n, padded)) continue;
    if (repeat_last && main.contains(n.get())) continue;  // clamped already, stores included
    std::vector<UOpPtr> src = n->src;
    if (std::find(stored.begin(), stored.end(), n.get()) != stored.end() || !main.contains(n.get()))
      src.resize(3), src[2] = n->src.size() > 2 ? land(n->src[2], padded < old_end) : padded < old_end;
    else
      src[1] = substitute(src[1], {{padded, clamped}});
    fixed.emplace_back(n, n->with_src(std::move(src)));
  }
  return substitute(k, fixed);
}

UOpPtr with_main_end(const UOpPtr& kernel, UOpPtr end) {
  std::vector<UOpPtr> src = kernel->src;
  src.at(0) = std::move(end);
  return kernel->with_src(std::move(src));
}

// The kernel's main END lists `first` before its other ranges.
UOpPtr loop_first(const UOpPtr& kernel, const UOpPtr& first) {
  const UOpPtr& end = kernel->src.at(0);
  std::vector<UOpPtr> src{end->src[0], first};
  for (size_t i = 1; i < end->src.size(); ++i)
    if (end->src[i] != first) src.push_back(end->src[i]);
  return with_main_end(kernel, end->with_src(std::move(src)));
}

UOpPtr peel_last(const UOpPtr& kernel, const UOpPtr& range) {
  const UOpPtr& end = kernel->src.at(0);
  const std::vector<UOpPtr> loops(end->src.begin() + 1, end->src.end());
  const UOpPtr& shared = loops.at(0) != range ? loops[0] : loops.at(1);
  int64_t next = next_axis_id(kernel);
  const int64_t n = *trip(range);
  const UOpPtr shorter = make_range(n - 1, next++, kind(range));
  std::vector<UOpPtr> others{shared}, last{shared};
  std::vector<std::pair<UOpPtr, UOpPtr>> to_last{{range, const_int(DType::Int64, n - 1)}};
  for (const auto& r : loops) {
    if (r == shared) continue;
    if (r == range) {
      others.push_back(shorter);
      continue;
    }
    others.push_back(r);
    last.push_back(make_range(r->src.at(0), next++, kind(r)));
    to_last.emplace_back(r, last.back());
  }
  const UOpPtr& body = end->src[0];
  others.insert(others.begin(), simplify(substitute(body, {{range, shorter}})));
  last.insert(last.begin(), simplify(substitute(body, to_last)));
  return kernel->with_src(
      {UOp::make(Op::END, end->dtype, std::move(others)), UOp::make(Op::END, end->dtype, std::move(last))});
}

UOpPtr expand_sum(const UOpPtr& kernel, const UOpPtr& red, const UOpPtr& range) {
  const UOpPtr& body = red->src[0];
  UOpPtr sum;
  for (int64_t v = 0; v < *trip(range); ++v) {
    const UOpPtr term = simplify(substitute(body, {{range, const_int(DType::Int64, v)}}));
    sum = sum ? alu(Op::ADD, {sum, term}) : term;
  }
  std::vector<UOpPtr> src{sum};
  for (size_t j = 1; j < red->src.size(); ++j)
    if (red->src[j] != range) src.push_back(red->src[j]);
  return simplify(substitute(kernel, {{red, src.size() == 1 ? sum : red->with_src(std::move(src))}}));
}

// Loops of one iteration left by the splits become their only value, so the
// kernel's first loop is one that can be shared between threads.
UOpPtr drop_unit_loops(UOpPtr k) {
  for (const auto& r : ranges_of(k))
    if (kind(r) == AxisKind::Loop && trip(r) == 1) k = substitute(k, {{r, const_int(DType::Int64, 0)}});
  std::vector<UOpPtr> effects;
  for (const auto& end : k->src) {
    if (end->op != Op::END) {
      effects.push_back(end);
      continue;
    }
    std::vector<UOpPtr> src{end->src[0]};
    for (size_t i = 1; i < end->src.size(); ++i)
      if (end->src[i]->op == Op::RANGE) src.push_back(end->src[i]);
    effects.push_back(end->with_src(std::move(src)));
  }
  return k->with_src(std::move(effects));
}

std::vector<std::pair<UOpPtr, UOpPtr>> running_max_sums(const UOpPtr& k) {
  // A max nested in a sum lists the sum's very ranges: only a sum with such a max is walked.
  std::vector<UOpPtr> sums, maxes;
  for (const auto& u : toposort(k)) {
    if (u->op != Op::REDUCE || u->src.size() < 2) continue;
    if (u->get<ReduceArg>().op == Op::ADD) sums.push_back(u);
    if (u->get<ReduceArg>().op == Op::MAX) maxes.push_back(u);
  }
  std::vector<std::pair<UOpPtr, UOpPtr>> out;
  if (maxes.empty()) return out;
  const auto same_ranges = [](const UOpPtr& a, const UOpPtr& b) {
    return std::equal(a->src.begin() + 1, a->src.end(), b->src.begin() + 1, b->src.end());
  };
  for (const auto& sum : sums) {
    if (std::none_of(maxes.begin(), maxes.end(), [&](const UOpPtr& m) { return same_ranges(m, sum); }))
      continue;
    for (const auto& u : toposort(sum->src[0]))
      if (u->op == Op::REDUCE && u->get<ReduceArg>().op == Op::MAX && same_ranges(u, sum))
        out.emplace_back(sum, u);
  }
  return out;
}

std::unordered_set<const UOp*> running_max_ranges(const UOpPtr& k) {
  std::unordered_set<const UOp*> out;
  for (const auto& [sum, max] : running_max_sums(k))
    for (size_t i = 1; i < sum->src.size(); ++i) out.insert(sum->src[i].get());
  return out;
}

UOpPtr long_float_sum(const UOpPtr& k, int64_t most) {
  UOpPtr next;
  const std::unordered_set<const UOp*> running = running_max_ranges(k);
  for (const auto& r : ranges_of(k))
    if (kind(r) == AxisKind::Reduce && trip_bound(r) > most && is_float_sum(reduce_of(k, r)) &&
        !running.contains(r.get()))
      next = r;
  return next;
}

UOpPtr block_all_sums(UOpPtr k) {
  while (const UOpPtr next = long_float_sum(k)) k = block_sum(k, next->get<AxisArg>().id);
  return k;
}

}  // namespace loom::kopt
