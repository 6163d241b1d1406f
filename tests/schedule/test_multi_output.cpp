// multi_output: a column sum of what a product reads joins the product's output
// ranges (Before graph in, After graph out, by pointer), and each guard refusing.
#include "schedule/multi_output.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace loom;
using loom::testing::apply_stage;
using loom::testing::expect;

namespace {
// dY [8, 4] and x [8, 5].
const std::string kOperands = R"(
%m = CONST i64 [8]
%n = CONST i64 [4]
%k = CONST i64 [5]
%dy = BUFFER f32 [(1 32)]
%x = BUFFER f32 [(2 40)]
)";
// The weight gradient's ranges, and dY[m, n] over them.
const std::string kDyRead = R"(
%rm = RANGE i64 %m [axis 0 reduce]
%rn = RANGE i64 %n [axis 1 loop]
%rk = RANGE i64 %k [axis 2 loop]
%dyrow = MUL i64 %rm, %n
%idy = ADD i64 %dyrow, %rn
%ixdy = INDEX f32* %dy, %idy
%ldy = LOAD f32 %ixdy
)";
// dY[m, n] and x[m, k], over the weight gradient's ranges.
const std::string kProductReads = kDyRead + R"(%xrow = MUL i64 %rm, %k
%ixv = ADD i64 %xrow, %rk
%ixx = INDEX f32* %x, %ixv
%lx = LOAD f32 %ixx
)";
// dW[n, k] = sum_m dY[m, n] * x[m, k]: the weight gradient.
const std::string kWeightGradient = kOperands + kProductReads + R"(
%prod = MUL f32 %ldy, %lx
%dw = REDUCE f32 %prod, %rm [reduce ADD ()]
%cw = CONTIGUOUS f32 %dw
%bw = BUFFERIZE f32 %cw, %rn, %rk [(4 5)]
)";

// db[n2] = sum_m2 `source`[m2, n2], over ranges of its own; `n2` names its output range,
// `extent` the reduce range's end.
std::string column_sum_body(const std::string& source, const std::string& n2,
                            const std::string& extent = "%m") {
  return "\n%rm2 = RANGE i64 " + extent + " [axis 3 reduce]\n" +
         (n2 == "%rn2" ? "%rn2 = RANGE i64 %n [axis 4 loop]\n" : "") + R"(%row2 = MUL i64 %rm2, %n
%i2 = ADD i64 %row2, )" +
         n2 + R"(
%ix2 = INDEX f32* )" +
         source + R"(, %i2
%l2 = LOAD f32 %ix2
%db = REDUCE f32 %l2, %rm2 [reduce ADD ()]
%cb = CONTIGUOUS f32 %db
%bb = BUFFERIZE f32 %cb, )" +
         n2 + R"( [(4)]
)";
}

// The column sum beside the weight gradient, both roots of the graph.
std::string column_sum(const std::string& source, const std::string& n2, const std::string& extent = "%m") {
  return column_sum_body(source, n2, extent) + "%root = SINK bool %bw, %bb\n";
}
}  // namespace

TEST_CASE("the bias gradient sum_m dY[m, n] is stored over the weight gradient's range n") {
  const UOpPtr after = apply_stage(multi_output(), kWeightGradient + column_sum("%dy", "%rn2"));
  CHECK(after == expect(kWeightGradient + column_sum("%dy", "%rn")));
}

TEST_CASE("a column sum of another buffer than the product reads stays a kernel of its own") {
  const std::string other = kWeightGradient + "%dz = BUFFER f32 [(3 32)]\n" + column_sum("%dz", "%rn2");
  CHECK(apply_stage(multi_output(), other) == expect(other));
}

TEST_CASE("a column sum the product reads (or that reads the product) is not fused: one needs the other") {
  // dW[n, k] = sum_m dY[m, n] * (x[m, k] + db[n]): the product reads the sum's buffer.
  const std::string reads_sum = kOperands + column_sum_body("%dy", "%rn2") + kProductReads + R"(
%ixb = INDEX f32* %bb, %rn
%lb = LOAD f32 %ixb
%xb = ADD f32 %lx, %lb
%prod = MUL f32 %ldy, %xb
%dw = REDUCE f32 %prod, %rm [reduce ADD ()]
%cw = CONTIGUOUS f32 %dw
%bw = BUFFERIZE f32 %cw, %rn, %rk [(4 5)]
%root = SINK bool %bw, %bb
)";
  CHECK(apply_stage(multi_output(), reads_sum) == expect(reads_sum));
}

TEST_CASE("a sum over another extent than the product's, or written in place, is not fused") {
  const std::string shorter = kWeightGradient + "%six = CONST i64 [6]\n" + column_sum("%dy", "%rn2", "%six");
  CHECK(apply_stage(multi_output(), shorter) == expect(shorter));
  const std::string fusable = kWeightGradient + column_sum("%dy", "%rn2");
  for (const std::vector<bool>& in_place : {std::vector<bool>{true, false}, std::vector<bool>{false, true}}) {
    const Flags flags;
    StageContext ctx{flags, {}};
    ctx.in_place_roots = in_place;
    CHECK(graph_rewrite(expect(fusable), symbolic() + multi_output(), ctx) == expect(fusable));
  }
}

TEST_CASE(
    "a product that reads a buffer of its whole iteration space is no contraction: its column sum "
    "stays apart") {
  // P[n, k] = sum_m dY[m, n] * big[m, n, k]: no register tile walks it, so the column sum
  // of dY would only add its loop to a pass over big.
  const std::string over_all = R"(
%m = CONST i64 [8]
%n = CONST i64 [4]
%k = CONST i64 [5]
%dy = BUFFER f32 [(1 32)]
%big = BUFFER f32 [(5 160)]
)" + kDyRead + R"(%c20 = CONST i64 [20]
%bm = MUL i64 %rm, %c20
%bn = MUL i64 %rn, %k
%bmn = ADD i64 %bm, %bn
%ib = ADD i64 %bmn, %rk
%ixb = INDEX f32* %big, %ib
%lb = LOAD f32 %ixb
%prod = MUL f32 %ldy, %lb
%dw = REDUCE f32 %prod, %rm [reduce ADD ()]
%cw = CONTIGUOUS f32 %dw
%bw = BUFFERIZE f32 %cw, %rn, %rk [(4 5)]
)" + column_sum("%dy", "%rn2");
  CHECK(apply_stage(multi_output(), over_all) == expect(over_all));
}
