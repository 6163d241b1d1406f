// masked_reads: a buffer holding 0.0 or -inf outside a condition on its own coordinates
// passes the condition to its readers, taken at the read's coordinates. Before graph in,
// After graph out, by pointer.
#include "schedule/masked_reads.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace loom;
using loom::testing::apply_stage;

namespace {

// P = where(k <= q, exp2(x[q, k]) * scale, K) over [8, 8], kept in a buffer, read by a
// product over k: out[q2, d] = sum_k P[q2, k] * v[k, d]. With `masked`, the graph the stage
// makes: K selected where j <= q2 fails (the sum's bound, for codegen's reduce_bounds).
std::string weighted_sum(const std::string& constant, const std::string& scale, bool masked = false,
                         const std::string& condition = "%c = OR bool %lt, %eq") {
  const std::string read =
      masked
          ? "%oi = CAST i32 %ro\n%ji = CAST i32 %rj\n%lt2 = CMPLT bool %ji, %oi\n%eq2 = CMPEQ bool %ji, %oi\n"
            "%c2 = OR bool %lt2, %eq2\n%ip = INDEX f32* %bp, %ro, %rj\n%lp = LOAD f32 %ip\n"
            "%k2 = CONST f32 [" +
                constant + "]\n%read = WHERE f32 %c2, %lp, %k2\n"
          : "%ip = INDEX f32* %bp, %ro, %rj\n%read = LOAD f32 %ip\n";
  return "%n = CONST i64 [8]\n%x = BUFFER f32 [(1 64)]\n%v = BUFFER f32 [(2 64)]\n"
         "%rq = RANGE i64 %n [axis 0 loop]\n%rk = RANGE i64 %n [axis 1 loop]\n"
         "%a = MUL i64 %rq, %n\n%at = ADD i64 %a, %rk\n%ix = INDEX f32* %x, %at\n%lx = LOAD f32 %ix\n"
         "%e = EXP2 f32 %lx\n%qi = CAST i32 %rq\n%ki = CAST i32 %rk\n"
         "%lt = CMPLT bool %ki, %qi\n%eq = CMPEQ bool %ki, %qi\n" +
         condition + "\n%k = CONST f32 [" + constant + "]\n%w = WHERE f32 %c, %e, %k\n" +
         (scale.empty() ? "%p = CONTIGUOUS f32 %w\n"
                        : "%s = CONST f32 [" + scale + "]\n%p = MUL f32 %w, %s\n") +
         "%bp = BUFFERIZE f32 %p, %rq, %rk [(8 8)]\n"
         "%ro = RANGE i64 %n [axis 2 loop]\n%rd = RANGE i64 %n [axis 3 loop]\n%rj = RANGE i64 %n [axis 4 "
         "reduce]\n" +
         read +
         "%b = MUL i64 %rj, %n\n%bt = ADD i64 %b, %rd\n%iv = INDEX f32* %v, %bt\n%lv = LOAD f32 %iv\n"
         "%t = MUL f32 %read, %lv\n%sum = REDUCE f32 %t, %rj [reduce ADD ()]\n"
         "%root = BUFFERIZE f32 %sum, %ro, %rd [(8 8)]\n%sink = SINK bool %root\n";
}

}  // namespace

TEST_CASE("a sum's read of weights that are 0 above the diagonal selects 0 above it itself") {
  const UOpPtr out = apply_stage(masked_reads(), weighted_sum("0.0", ""), Flags{}, false);
  // The product's read masked by j <= q2.
  CHECK(out == parse_text(weighted_sum("0.0", "", true)));
}

TEST_CASE("a gradient's scale after the select: the constant is 0 times the scale") {
  const UOpPtr out = apply_stage(masked_reads(), weighted_sum("0.0", "0.125"), Flags{}, false);
  CHECK(out == parse_text(weighted_sum("0.0", "0.125", true)));
  // -inf scores (a max may skip them too).
  const UOpPtr scores = apply_stage(masked_reads(), weighted_sum("-inf", ""), Flags{}, false);
  CHECK(scores == parse_text(weighted_sum("-inf", "", true)));
}

TEST_CASE("masked_reads leaves a buffer alone where no sum could skip its constant") {
  SUBCASE("a constant that is no sum's identity") {
    const std::string text = weighted_sum("1.0", "");
    CHECK(apply_stage(masked_reads(), text, Flags{}, false) == parse_text(text));
  }
  SUBCASE("a condition that reads memory (a mask kept in a buffer)") {
    const std::string text = weighted_sum("0.0", "", false,
                                          "%m = BUFFER bool [(3 64)]\n%im = INDEX bool* %m, %at\n%lm = LOAD "
                                          "bool %im\n%c0 = OR bool %lt, %eq\n%c = AND bool %c0, %lm");
    CHECK(apply_stage(masked_reads(), text, Flags{}, false) == parse_text(text));
  }
  SUBCASE("an infinite scale") {
    const std::string text = weighted_sum("0.0", "inf");
    CHECK(apply_stage(masked_reads(), text, Flags{}, false) == parse_text(text));
  }
}

TEST_CASE("an elementwise read of a masked buffer is left alone: no sum to bound") {
  // out[q2, j2] = P[q2, j2] * 3: a select (or a masked load) would cost more than it saves.
  const std::string head =
      "%n = CONST i64 [8]\n%x = BUFFER f32 [(1 64)]\n"
      "%rq = RANGE i64 %n [axis 0 loop]\n%rk = RANGE i64 %n [axis 1 loop]\n"
      "%a = MUL i64 %rq, %n\n%at = ADD i64 %a, %rk\n%ix = INDEX f32* %x, %at\n%lx = LOAD f32 %ix\n"
      "%e = EXP2 f32 %lx\n%qi = CAST i32 %rq\n%ki = CAST i32 %rk\n"
      "%lt = CMPLT bool %ki, %qi\n%eq = CMPEQ bool %ki, %qi\n%c = OR bool %lt, %eq\n"
      "%k = CONST f32 [0.0]\n%w = WHERE f32 %c, %e, %k\n%bp = BUFFERIZE f32 %w, %rq, %rk [(8 8)]\n"
      "%ro = RANGE i64 %n [axis 2 loop]\n%rj = RANGE i64 %n [axis 3 loop]\n";
  const std::string tail =
      "%three = CONST f32 [3.0]\n%t = MUL f32 %read, %three\n"
      "%root = BUFFERIZE f32 %t, %ro, %rj [(8 8)]\n%sink = SINK bool %root\n";
  const std::string before = head + "%ip = INDEX f32* %bp, %ro, %rj\n%read = LOAD f32 %ip\n" + tail;
  CHECK(apply_stage(masked_reads(), before, Flags{}, false) == parse_text(before));
}
