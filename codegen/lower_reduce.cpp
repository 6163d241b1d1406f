// Reduce lowering: each REDUCE becomes an accumulator register, set to the
// identity once per iteration of the loops the result lives in, folded inside
// the reduce loops, and read after them.
//
//   Before:  %r = REDUCE f32 %x, r1 [ADD]
//   After:   %acc = DEFINE_REG f32* [0 1]; STORE INDEX(AFTER(%acc, r0), 0), 0.0
//            END(STORE INDEX(%acc, 0), ADD(LOAD INDEX(AFTER(%acc, init, r1), 0), %x), r1)
//            %r = LOAD INDEX(AFTER(%acc, end), 0)
//
// AFTER carries the order: the fold's load waits for the initial store and
// runs per iteration of r1; the result's load waits for the loop. So the
// linearizer needs no notion of reductions at all.
#include "codegen/codegen.hpp"
#include "codegen/kernel_edit.hpp"
#include "codegen/needed_loops.hpp"
#include "codegen/vector_ops.hpp"
#include "ir/pass_observer.hpp"
#include "ir/pattern.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace loom {

namespace {

struct ReduceLowering {
  NeededLoops open;
  int vector_bytes;
  int64_t next_reg = 0;
};

UOpPtr after(const UOpPtr& x, std::vector<UOpPtr> deps) {
  if (deps.empty()) return x;
  deps.insert(deps.begin(), x);
  return UOp::make(Op::AFTER, x->dtype, std::move(deps));
}
UOpPtr at(const UOpPtr& reg) { return UOp::make(Op::INDEX, reg->dtype, {reg, const_int(DType::Int64, 0)}); }
UOpPtr load(const UOpPtr& index) { return UOp::make(Op::LOAD, index->dtype.deref(), {index}); }
UOpPtr store(const UOpPtr& index, const UOpPtr& v) { return UOp::make(Op::STORE, v->dtype, {index, v}); }

// The loops the result lives in, in axis order (a deterministic AFTER).
std::vector<UOpPtr> live_loops(ReduceLowering& ctx, const UOpPtr& red) {
  std::vector<UOpPtr> loops;
  for (const auto& r : ranges_of(red))
    if (std::binary_search(ctx.open(red).begin(), ctx.open(red).end(), r.get())) loops.push_back(r);
  std::sort(loops.begin(), loops.end(),
            [](const UOpPtr& a, const UOpPtr& b) { return a->get<AxisArg>().id < b->get<AxisArg>().id; });
  return loops;
}

// A REDUCE wider than one SIMD register keeps one accumulator per register-wide
// slice, all updated in the one loop: independent additions the CPU overlaps.
int register_slices(const ReduceLowering& ctx, const UOpPtr& red) {
  const int width = std::max(1, ctx.vector_bytes / red->dtype.itemsize());
  const int lanes = static_cast<int>(red->dtype.lanes);
  return lanes > width && lanes % width == 0 ? lanes / width : 1;
}

// Slice `i` of `n` of the vector `v`.
UOpPtr slice(const UOpPtr& v, int i, int n) {
  if (n == 1) return v;
  const int width = static_cast<int>(v->dtype.lanes) / n;
  std::vector<int64_t> picks;
  for (int l = i * width; l < (i + 1) * width; ++l) picks.push_back(l);
  return pick(v, picks);
}

// acc + x*y folds as MULACC, which the emitter may contract into one fused
// multiply-add (docs/semantics.md states the tolerance); other folds as `op`.
// A value of two lanes per accumulator lane (a pair range's, codegen/pair_dot.hpp) adds
// each pair, odd lane first: a product as DOT2, anything else as two adds.
UOpPtr fold(Op op, const UOpPtr& current, const UOpPtr& value) {
  if (value->dtype.lanes == 2 * current->dtype.lanes) {
    if (op == Op::ADD && value->op == Op::MUL && value->dtype.is_float())
      return UOp::make(Op::DOT2, current->dtype, {value->src[0], value->src[1], current});
    const PairLanes halves = pair_lanes(current->dtype.lanes);
    return alu(op, {alu(op, {current, pick(value, halves.odd)}), pick(value, halves.even)});
  }
  if (op == Op::ADD && value->op == Op::MUL && value->dtype.is_float())
    return UOp::make(Op::MULACC, value->dtype, {value->src[0], value->src[1], current});
  return alu(op, {current, value});
}

UOpPtr to_accumulator(ReduceLowering& ctx, const UOpPtr& red) {
  const Op op = red->get<ReduceArg>().op;
  const std::vector<UOpPtr> reduce_ranges(red->src.begin() + 1, red->src.end());
  if (reduce_ranges.empty()) return red->src[0];
  const int n = register_slices(ctx, red);
  std::vector<UOpPtr> regs, updates;
  const DType slice_dtype = red->dtype.base().vec(red->dtype.lanes / n);
  for (int i = 0; i < n; ++i) {
    const UOpPtr value = slice(red->src[0], i, n);
    const UOpPtr reg =
        UOp::make(Op::DEFINE_REG, slice_dtype.ptr_to(), {}, std::vector<int64_t>{ctx.next_reg++, 1});
    const UOpPtr init = store(at(after(reg, live_loops(ctx, red))), reduce_identity(op, slice_dtype));
    std::vector<UOpPtr> fold_deps{init};
    fold_deps.insert(fold_deps.end(), reduce_ranges.begin(), reduce_ranges.end());
    const UOpPtr current = load(at(after(reg, fold_deps)));
    updates.push_back(store(at(reg), fold(op, current, value)));
    regs.push_back(reg);
  }
  std::vector<UOpPtr> loop{n == 1 ? updates[0] : UOp::make(Op::SINK, DType::Bool, updates)};
  loop.insert(loop.end(), reduce_ranges.begin(), reduce_ranges.end());
  const UOpPtr folded = UOp::make(Op::END, red->dtype, std::move(loop));
  std::vector<UOpPtr> results;
  for (const auto& reg : regs) results.push_back(load(at(after(reg, {folded}))));
  return n == 1 ? results[0] : UOp::make(Op::VECTORIZE, red->dtype, std::move(results));
}

// The sums of one running max folded with it in one loop (online softmax: attention's
// weighted sum and its row's sum): a running max m, and at each step m' = max(m, x), each
// sum so far rescaled by exp(m - m') and its value added at m'. The values are computed
// at m' = 0 while the row holds only -inf (so exp(-inf - 0) = 0, not exp(-inf + inf) =
// NaN), and the rescale is 1 while m does not grow: a row of -inf sums to 0, as
// exp(s - max) summed does once the max is finite. The loop lives in every loop one of
// the sums lives in.
std::vector<UOpPtr> to_online_accumulators(ReduceLowering& ctx, const std::vector<UOpPtr>& sums,
                                           const UOpPtr& max) {
  const std::vector<UOpPtr> ranges(sums[0]->src.begin() + 1, sums[0]->src.end());
  const DType mt = max->dtype;
  for (const auto& red : sums)
    if (mt.lanes != 1 && mt.lanes != red->dtype.lanes)
      throw Error(fmt::format("lower_reduce: a running max of {} in a sum of {}", to_string(mt),
                              to_string(red->dtype)));
  std::vector<UOpPtr> live;
  for (const auto& red : sums)
    for (const auto& r : live_loops(ctx, red))
      if (std::find(live.begin(), live.end(), r) == live.end()) live.push_back(r);
  std::sort(live.begin(), live.end(),
            [](const UOpPtr& a, const UOpPtr& b) { return a->get<AxisArg>().id < b->get<AxisArg>().id; });
  const auto reg = [&](DType dt) {
    return UOp::make(Op::DEFINE_REG, dt.ptr_to(), {}, std::vector<int64_t>{ctx.next_reg++, 1});
  };
  const auto start = [&](const UOpPtr& r, const UOpPtr& init) {
    std::vector<UOpPtr> deps{store(at(after(r, live)), init)};
    deps.insert(deps.end(), ranges.begin(), ranges.end());
    return load(at(after(r, deps)));
  };
  const UOpPtr max_reg = reg(mt);
  const UOpPtr m = start(max_reg, reduce_identity(Op::MAX, mt));
  const UOpPtr grown = alu(Op::MAX, {m, max->src[0]});
  const UOpPtr shift =
      where(eq(grown, vconst(mt, -std::numeric_limits<double>::infinity())), vconst(mt, 0), grown);
  const UOpPtr rescale = where(eq(m, grown), vconst(mt, 1), lower_transcendental(alu(Op::EXP, {m - grown})));
  std::vector<UOpPtr> stores, sum_regs;
  for (const auto& red : sums) {
    const DType st = red->dtype;
    const UOpPtr sum_reg = reg(st), sum = start(sum_reg, vconst(st, 0));
    const UOpPtr scaled =
        rescale->dtype.lanes == st.lanes ? rescale : broadcast(rescale, static_cast<int>(st.lanes));
    stores.push_back(
        store(at(sum_reg), fold(Op::ADD, sum * scaled, substitute(red->src[0], {{max, shift}}))));
    sum_regs.push_back(sum_reg);
  }
  stores.push_back(store(at(max_reg), grown));  // last: the sums' steps read the max before it grows
  std::vector<UOpPtr> loop{UOp::make(Op::SINK, DType::Bool, std::move(stores))};
  loop.insert(loop.end(), ranges.begin(), ranges.end());
  const UOpPtr folded = UOp::make(Op::END, sums[0]->dtype, std::move(loop));
  std::vector<UOpPtr> results;
  for (size_t i = 0; i < sums.size(); ++i) results.push_back(load(at(after(sum_regs[i], {folded}))));
  return results;
}

// Every sum with a running max, folded with it and the other sums of that max (before the
// other reduces are lowered, which would give the max a loop of its own inside the sum's).
UOpPtr fold_running_maxes(ReduceLowering& ctx, const UOpPtr& kernel) {
  std::vector<std::pair<UOpPtr, std::vector<UOpPtr>>> by_max;  // in the order the sums come
  UOpPtr last_sum;
  for (const auto& [sum, max] : kopt::running_max_sums(kernel)) {
    if (sum == last_sum) throw Error("lower_reduce: a sum with several running maxes; expected one");
    last_sum = sum;
    auto it = std::find_if(by_max.begin(), by_max.end(), [&](const auto& g) { return g.first == max; });
    if (it == by_max.end()) it = by_max.insert(by_max.end(), {max, {}});
    it->second.push_back(sum);
  }
  std::vector<std::pair<UOpPtr, UOpPtr>> folded;
  for (const auto& [max, sums] : by_max) {
    const std::vector<UOpPtr> results = to_online_accumulators(ctx, sums, max);
    for (size_t i = 0; i < sums.size(); ++i) folded.emplace_back(sums[i], results[i]);
  }
  return folded.empty() ? kernel : substitute(kernel, folded);
}

// Does the END or REDUCE close a loop that never iterates? Nothing inside it
// runs then; lowered, the accumulator's loop would be placed (and its loads
// run) outside the empty loop, so it goes first.
bool closes_empty_loop(const UOpPtr& u) {
  return std::any_of(u->src.begin() + 1, u->src.end(), [](const UOpPtr& r) {
    return r->op == Op::RANGE && r->src.at(0)->is_const() && r->src[0]->const_int() <= 0;
  });
}

const PatternMatcher& reduce_lowering() {
  static const PatternMatcher pm(
      "lower_reduce", {
                          {UPat::ops({Op::END}, "end"),
                           [](const Match& m) -> UOpPtr {
                             return closes_empty_loop(m["end"]) ? UOp::make(Op::SINK, DType::Bool) : nullptr;
                           }},
                          {UPat::ops({Op::REDUCE}, "red"),
                           [](const Match& m) {
                             const UOpPtr& red = m["red"];
                             if (closes_empty_loop(red))
                               return reduce_identity(red->get<ReduceArg>().op, red->dtype);
                             return to_accumulator(m.ctx<ReduceLowering>(), red);
                           }},
                      });
  return pm;
}

}  // namespace

UOpPtr lower_reduce(const UOpPtr& kernel, int vector_bytes) {
  ReduceLowering ctx{NeededLoops(kernel), vector_bytes};
  return graph_rewrite(fold_running_maxes(ctx, kernel), reduce_lowering(), ctx);
}

}  // namespace loom
