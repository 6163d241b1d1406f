// One function applies each Opt (codegen/opt.hpp): the edits of
// codegen/kernel_edit.hpp and the recipes of codegen/recipes.hpp, chosen by kind.
#include "codegen/opt.hpp"

#include "codegen/pair_dot.hpp"
#include "codegen/recipes.hpp"
#include "ir/contraction.hpp"
#include "ir/range_split.hpp"
#include "ir/symbolic.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace loom {

namespace {

using namespace kopt;

bool optimised(const UOpPtr& kernel) {
  for (const auto& r : ranges_of(kernel)) {
    const AxisKind k = kind(r);
    if (k == AxisKind::Upcast || k == AxisKind::Unroll || k == AxisKind::Parallel || k == AxisKind::Pair)
      return true;
  }
  return false;
}

// The widest element the kernel reads or writes in its loops, or accumulates in a Float32
// sum (a half kernel's sums, in registers of Float32 lanes): lanes are as many as one
// SIMD register holds of it. A scalar read once,
// outside every loop (Adam's Float64 step count beside Float32 parameters), never takes
// lanes, so it does not halve them.
int widest_element(const UOpPtr& kernel) {
  int widest = 1;
  for (const auto& n : toposort(kernel))
    if ((n->op == Op::INDEX && n->src.at(0)->op == Op::DEFINE_GLOBAL && !n->ranges().empty()) ||
        (n->op == Op::REDUCE && n->dtype.base() == DType::Float32))
      widest = std::max(widest, n->dtype.itemsize());
  return widest;
}

bool splits_ranges(OptKind k) { return k != OptKind::AlignSides && k != OptKind::Parallel; }

std::string axes(const UOpPtr& kernel) {
  std::string out;
  for (const auto& r : ranges_of(kernel))
    out +=
        fmt::format("{}{} ({}, {})", out.empty() ? "" : ", ", r->get<AxisArg>().id, axis_kind_name(kind(r)),
                    trip(r) ? fmt::format("{}", *trip(r)) : std::string("symbolic"));
  return out.empty() ? std::string("none") : out;
}

[[noreturn]] void misfit(const Opt& opt, const UOpPtr& kernel, std::string_view why) {
  throw Error(
      fmt::format("apply_opt: {} does not fit the kernel: {}; its ranges (axis id, kind, trip) are {}",
                  to_string(opt), why, axes(kernel)));
}

UOpPtr range_of(const Opt& opt, const UOpPtr& kernel) {
  UOpPtr r = find_range(kernel, opt.axis);
  if (!r) misfit(opt, kernel, fmt::format("no range has axis id {}", opt.axis));
  return r;
}

// The contraction a tile Opt names: its columns must be the Opt's axis.
MatmulAxes contraction(const Opt& opt, const UOpPtr& kernel, const std::optional<MatmulAxes>& axes) {
  if (!axes) misfit(opt, kernel, "the kernel is not that contraction (ir/contraction.hpp)");
  if (axes->cols->get<AxisArg>().id != opt.axis)
    misfit(opt, kernel, fmt::format("the contraction's columns are axis {}", axes->cols->get<AxisArg>().id));
  if (opt.amount < 1) misfit(opt, kernel, "a tile has at least one vector");
  return *axes;
}

}  // namespace

OptState::OptState(UOpPtr kernel, const Target& target)
    : kernel_(std::move(kernel)),
      target_(target),
      lanes_(target.vector_bytes / widest_element(kernel_)),
      fresh_(!optimised(kernel_)) {}

void OptState::settle() {
  if (settled_) return;
  if (fresh_) kernel_ = simplify(kernel_);
  settled_ = true;
}

void OptState::apply(const Opt& opt) {
  if (splits_ranges(opt.kind) && settled_)
    misfit(opt, kernel_, "range splits come before align_sides and parallel");
  if (!splits_ranges(opt.kind)) settle();
  UOpPtr& k = kernel_;
  const int64_t itemsize = target_.vector_bytes / lanes_;
  switch (opt.kind) {
    case OptKind::Pad: {
      const UOpPtr r = range_of(opt, k);
      if (opt.amount < 1) misfit(opt, k, "pads to a multiple of at least 1");
      k = pad_to_multiple(k, r, opt.amount);
      break;
    }
    case OptKind::Upcast:
    case OptKind::Unroll: {
      const UOpPtr r = range_of(opt, k);
      const AxisKind to = opt.kind == OptKind::Upcast ? AxisKind::Upcast : AxisKind::Unroll;
      if (opt.amount == 0 && opt.kind == OptKind::Upcast) {
        if (!trip(r)) misfit(opt, k, "a symbolic range is split into lanes, never made lanes whole");
        k = substitute(k, {{r, with_kind(r, to)}});
        break;
      }
      if (opt.amount < 1 || !exact_quotient(r->src.at(0), opt.amount))
        misfit(opt, k,
               fmt::format("{} does not divide the range's {} iterations (pad it first)", opt.amount,
                           trip(r) ? std::to_string(*trip(r)) : std::string("symbolic")));
      k = split(k, r, opt.amount, to).root;
      break;
    }
    case OptKind::BlockSum: {
      const UOpPtr r = range_of(opt, k);
      if (kind(r) != AxisKind::Reduce || !is_float_sum(reduce_of(k, r)))
        misfit(opt, k, "its range is not one a float sum reduces");
      if (opt.amount < 2) misfit(opt, k, "a block holds at least 2 values");
      k = block_sum(k, opt.axis, opt.amount);
      break;
    }
    case OptKind::Blocks: {
      const UOpPtr r = range_of(opt, k);
      if (kind(r) != AxisKind::Loop) misfit(opt, k, "only a loop is blocked");
      if (k->src.size() != 1 || k->src[0]->op != Op::END)
        misfit(opt, k, "only a kernel of one END is blocked");
      if (opt.amount < 1 || !trip(r) || *trip(r) % opt.amount != 0)
        misfit(opt, k, "the blocks must divide the loop's constant trip");
      const Split blocks = split(k, r, opt.amount, AxisKind::Loop);
      k = loop_first(blocks.root, blocks.outer);
      break;
    }
    case OptKind::Peel: {
      const UOpPtr r = range_of(opt, k);
      if (kind(r) != AxisKind::Loop || !trip(r) || *trip(r) < 2)
        misfit(opt, k, "only a loop of 2 or more constant iterations is peeled");
      if (k->src.size() != 1 || k->src[0]->op != Op::END || k->src[0]->src.size() < 3)
        misfit(opt, k, "only a kernel of one END over two loops or more is peeled");
      k = peel_last(k, r);
      break;
    }
    case OptKind::MatmulTile: {
      const MatmulAxes mm = contraction(opt, k, matmul_axes(k));
      if (opt.rows < 1) misfit(opt, k, "a tile has at least one row");
      const RegisterTile tile{opt.rows, opt.amount, tile_lanes(lanes_, trip_bound(mm.cols))};
      if (tile.rows * tile.vectors * tile.lanes > DType::kMaxLanes)
        misfit(opt, k,
               fmt::format("{} rows x {} vectors of {} lanes exceed a tile's {} lanes", tile.rows,
                           tile.vectors, tile.lanes, DType::kMaxLanes));
      k = tile_matmul(k, mm, tile, target_, itemsize);
      break;
    }
    case OptKind::GemvTile:
    case OptKind::ColumnSumTile: {
      const bool gemv = opt.kind == OptKind::GemvTile;
      const MatmulAxes mm = contraction(opt, k, gemv ? gemv_axes(k) : column_sum_axes(k, target_));
      const RegisterTile tile{1, opt.amount, tile_lanes(lanes_, trip_bound(mm.cols))};
      k = gemv ? tile_gemv(k, mm, tile, target_, itemsize) : tile_column_sum(k, mm, tile, target_, itemsize);
      break;
    }
    case OptKind::DotTile: {
      const auto dot = dot_axes(k, lanes_);
      if (!dot) misfit(opt, k, "the kernel is not a dot tile's contraction (codegen/register_tile.hpp)");
      if (dot->cols->get<AxisArg>().id != opt.axis)
        misfit(opt, k, fmt::format("the contraction's columns are axis {}", dot->cols->get<AxisArg>().id));
      if (opt.rows < 1 || opt.amount < 1) misfit(opt, k, "a dot tile has at least one row and one lane");
      if (opt.rows * *trip(dot->cols) * opt.amount > kMaxVectorLanes)
        misfit(opt, k,
               fmt::format("{} rows x {} columns of {} lanes exceed a tile's {} lanes", opt.rows,
                           *trip(dot->cols), opt.amount, kMaxVectorLanes));
      k = tile_dot(k, *dot, RegisterTile{opt.rows, *trip(dot->cols), opt.amount}, target_, itemsize);
      break;
    }
    case OptKind::ExpandSum: {
      const UOpPtr r = range_of(opt, k);
      const UOpPtr red = kind(r) == AxisKind::Reduce ? reduce_of(k, r) : nullptr;
      if (!red || !is_float_sum(red) || red->dtype.lanes != 1)
        misfit(opt, k, "its range is not one a scalar float sum reduces");
      if (!trip(r)) misfit(opt, k, "a sum is written out as its terms only over a constant range");
      k = expand_sum(k, red, r);
      break;
    }
    case OptKind::PairDot: {
      const UOpPtr r = range_of(opt, k);
      if (!target_.pair_dot()) misfit(opt, k, "the Target has no pair-dot instruction (AVX512_BF16)");
      if (opt.amount != 2) misfit(opt, k, "a pair is 2 terms");
      if (kind(r) != AxisKind::Reduce) misfit(opt, k, "its range is not one a sum reduces");
      const UOpPtr paired = pair_sum(k, r);
      if (!paired)
        misfit(opt, k, "its range is not the even, constant range of one float32 sum of bfloat16 products");
      k = paired;
      break;
    }
    case OptKind::AlignSides:
      if (opt.amount < 0 || opt.amount * lanes_ > kMaxVectorLanes)
        misfit(opt, k,
               fmt::format("{} vectors of {} lanes exceed a vector's {} lanes", opt.amount, lanes_,
                           kMaxVectorLanes));
      k = simplify(
          align_side_ends(k, opt.amount ? std::optional<Lanes>(Lanes{lanes_, opt.amount}) : std::nullopt));
      break;
    case OptKind::Parallel: {
      const UOpPtr r = find_range(k, opt.axis);
      if (!r) misfit(opt, k, fmt::format("no range has axis id {}", opt.axis));
      if (kind(r) != AxisKind::Loop) misfit(opt, k, "only a loop runs across threads");
      if (!stores_along(k, r))
        misfit(opt, k, "a store does not move along the range: it would run once per thread's task");
      k = substitute(k, {{r, with_kind(r, AxisKind::Parallel)}});
      break;
    }
  }
  applied_.push_back(opt);
}

bool stores_along(const UOpPtr& kernel, const UOpPtr& range) {
  for (const auto& n : toposort(kernel))
    if (n->op == Op::STORE && !reaches(n->src.at(0), range)) return false;
  return true;
}

UOpPtr apply_opts(const UOpPtr& kernel, const std::vector<Opt>& opts, const Target& target) {
  OptState s(kernel, target);
  for (const Opt& opt : opts) s.apply(opt);
  s.settle();
  return s.kernel();
}

}  // namespace loom
