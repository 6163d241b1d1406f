#pragma once
// Kernels that differ only in an index offset share one compiled kernel.
//
// A program unrolled in a C++ loop reads each step's slice at a constant offset
// (`x.slice(0, t, t + 1)`), so each step's kernels are new ASTs: an LSTM over 128
// steps compiled 128 copies of its per-step kernels. Among the kernels of one plan,
// those whose ASTs are equal once every offset constant is taken out (an integer
// constant added in an INDEX's address or validity) are given one AST in which
// each such constant is a DEFINE_VAR, bounded by the least and greatest value it
// takes in the group; each kernel binds its own values at launch (the ABI's
// `vars`). A kernel alone in its group keeps its constants, so nothing changes for
// a program without repeats.
//
//   Before:  k5: ... INDEX(g1, r0*64 + r1 + 1024) ...    k9: ... INDEX(g1, r0*64 + r1 + 2048) ...
//   After:   k5, k9: ... INDEX(g1, r0*64 + r1 + o0) ...  o0 = DEFINE_VAR [1024, 2048]; k5 binds
//            o0 = 1024, k9 binds o0 = 2048
//
// Sound for every value the variable may take: the scheduler's decisions were made
// on each kernel's own constants, and the AST with the variable bound is that
// kernel; codegen simplifies and vectorises the shared AST within the variable's
// bounds (an offset changes no stride, so the same loops vectorise; the emitter
// claims no alignment from it). LOOM_DISABLE=offset_vars switches it off.
#include "src/plan.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::detail {

// The name LOOM_DISABLE switches this plan pass off by.
inline constexpr std::string_view kOffsetVarsPass = "offset_vars";

// The AST with each offset constant a DEFINE_VAR named o0, o1, ... (in the order
// they are met) bounded [0, 0], and the constants' values in that order. Kernels
// whose ASTs differ only in their offsets give the same `ast`.
struct OffsetPattern {
  UOpPtr ast;
  std::vector<int64_t> values;
};
OffsetPattern offset_pattern(const UOpPtr& kernel);

// Gives the plan's kernels that differ only in their offsets one AST with the
// offsets as variables, and each kernel its values in `PlanKernel::bindings`.
void share_offset_kernels(std::vector<PlanKernel>& kernels);

}  // namespace loom::detail
