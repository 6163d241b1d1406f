// The stage runner: groups run their stages' rules as one fixpoint, report
// each group once, and LOOM_DISABLE takes one stage's rules out of its group.
#include "schedule/rangeify.hpp"
#include "schedule/stages.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace loom;

namespace {
size_t count(const UOpPtr& root, Op op) {
  size_t n = 0;
  for (const auto& u : toposort(root)) n += u->op == op;
  return n;
}
// t = x*x read at i and 7 - i: rangeify proposes t, buffer_removal inlines it.
UOpPtr flipped_square() {
  const UOpPtr x = UOp::make(Op::BUFFER, DType::Float32, {}, std::vector<int64_t>{1, 8});
  const UOpPtr t = x * x;
  return rangeify({t + UOp::make(Op::FLIP, DType::Float32, {t}, std::vector<int64_t>{0})});
}
}  // namespace

TEST_CASE("LOOM_DISABLE=buffer_removal takes its rules out of the fixpoint: the proposed buffer stays") {
  const UOpPtr ranged = flipped_square();
  REQUIRE(count(ranged, Op::BUFFERIZE) == 2);
  CHECK(count(buffer_stages(ranged, Flags{}), Op::BUFFERIZE) == 1);
  Flags off;
  off.disable = {"buffer_removal"};
  CHECK(count(buffer_stages(ranged, off), Op::BUFFERIZE) == 2);
}

TEST_CASE("disabling one stage leaves the others of its group on") {
  // a scalar sum of a broadcast value: reduce_unparented folds it, with buffer_removal off
  const UOpPtr x = UOp::make(Op::BUFFER, DType::Float32, {}, std::vector<int64_t>{1, 1});
  const UOpPtr e = UOp::make(Op::EXPAND, DType::Float32, {x}, std::vector<int64_t>{64});
  const UOpPtr s = UOp::make(Op::REDUCE_AXIS, DType::Float32, {e}, ReduceArg{Op::ADD, {0}});
  Flags off;
  off.disable = {"buffer_removal"};
  CHECK(count(buffer_stages(rangeify({s}), off), Op::REDUCE) == 0);
  off.disable = {"buffer_removal", "reduce_unparented", "reduce_collapse"};
  CHECK(count(buffer_stages(rangeify({s}), off), Op::REDUCE) == 1);
}

TEST_CASE("kernel_stages reports each of its groups, in order, with what each made") {
  const UOpPtr kernel = parse_text(R"(
%n = CONST i64 [32]
%r = RANGE i64 %n [axis 0 loop]
%x = DEFINE_GLOBAL f32* [1]
%ix = INDEX f32* %x, %r
%lx = LOAD f32 %ix
%out = DEFINE_GLOBAL f32* [0]
%io = INDEX f32* %out, %r
%st = STORE f32 %io, %lx
%e = END f32 %st, %r
%k = SINK bool %e
)");
  std::vector<KernelPassRun> ran;
  CHECK(kernel_stages(kernel, Flags{}, ran) == kernel);
  std::vector<std::string> groups;
  for (const auto& r : ran) groups.push_back(r.pass);
  CHECK(groups == std::vector<std::string>{"scatter_reduce", "load_collapse", "guard_narrowing",
                                           "valid_index", "range_split", "range_simplify", "range_merge"});
  CHECK(ran.front().before == kernel);
  CHECK(ran.back().after == kernel);
}
