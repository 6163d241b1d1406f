// elementwise_outputs: an elementwise buffer read at its own element by an elementwise
// buffer of the same ranges joins the reader's kernel (its ranges, its value used
// directly), and elementwise siblings reading one buffer at their own element share a
// kernel; each guard refusing. Before graph in, After graph out, by pointer.
#include "schedule/elementwise_outputs.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace loom;
using loom::testing::apply_stage;
using loom::testing::expect;

namespace {
// g, m [8]: a gradient and Adam's first moment; p [8] the parameter (kParameter).
const std::string kBuffers = R"(
%n = CONST i64 [8]
%g = BUFFER f32 [(1 8)]
%m = BUFFER f32 [(2 8)]
%b1 = CONST f32 [0.9]
%c1 = CONST f32 [0.1]
)";
const std::string kParameter = "%p = BUFFER f32 [(3 8)]\n%lr = CONST f32 [0.5]\n";
// M[i] = m[i] * 0.9 + g[i] * 0.1 over range `r`.
std::string moment(const std::string& r) {
  return "%im = INDEX f32* %m, " + r + "\n%lm = LOAD f32 %im\n%ig = INDEX f32* %g, " + r +
         "\n%lg = LOAD f32 %ig\n%mb = MUL f32 %lm, %b1\n%gc = MUL f32 %lg, %c1\n%mv = ADD f32 %mb, %gc\n"
         "%cm = CONTIGUOUS f32 %mv\n%bm = BUFFERIZE f32 %cm, " +
         r + " [(8)]\n";
}
// P[j] = p[j] - 0.5 * `m_new`, over range %rj.
std::string update(const std::string& m_new) {
  return kParameter + "%ip = INDEX f32* %p, %rj\n%lp = LOAD f32 %ip\n%step = MUL f32 %lr, " + m_new +
         "\n%pv = SUB f32 %lp, %step\n%cp = CONTIGUOUS f32 %pv\n%bp = BUFFERIZE f32 %cp, %rj [(8)]\n";
}
const std::string kRanges = "%ri = RANGE i64 %n [axis 0 loop]\n%rj = RANGE i64 %n [axis 1 loop]\n";
}  // namespace

TEST_CASE(
    "Adam's moment, read by the parameter's update at its own element, is stored by the update's kernel") {
  const std::string before = kBuffers + kRanges + moment("%ri") +
                             "%imn = INDEX f32* %bm, %rj\n%lmn = LOAD f32 %imn\n" + update("%lmn") +
                             "%root = SINK bool %bm, %bp\n";
  // Both over the moment's range (the group's first member keeps its own), the update
  // using the moment's value instead of loading it.
  const std::string expected = kBuffers + "%ri = RANGE i64 %n [axis 0 loop]\n" + moment("%ri") + kParameter +
                               "%ip = INDEX f32* %p, %ri\n%lp = LOAD f32 %ip\n%step = MUL f32 %lr, %mv\n"
                               "%pv = SUB f32 %lp, %step\n%cp = CONTIGUOUS f32 %pv\n%bp = BUFFERIZE f32 %cp, "
                               "%ri [(8)]\n%root = SINK bool %bm, %bp\n";
  CHECK(apply_stage(elementwise_outputs(), before) == expect(expected));
}

TEST_CASE("a read of another element (a shift, another order) keeps the producer's kernel apart") {
  const std::string shifted = kBuffers + kRanges + moment("%ri") +
                              "%one = CONST i64 [1]\n%seven = CONST i64 [7]\n%jm = MOD i64 %rj, %seven\n"
                              "%j1 = ADD i64 %jm, %one\n%imn = INDEX f32* %bm, %j1\n%lmn = LOAD f32 %imn\n" +
                              update("%lmn") + "%root = SINK bool %bm, %bp\n";
  CHECK(apply_stage(elementwise_outputs(), shifted) == expect(shifted));
}

TEST_CASE("a reader with a REDUCE, or of another extent, stays apart") {
  // S = sum_k M[k]: a reduce reads the moment.
  const std::string summed =
      kBuffers + "%ri = RANGE i64 %n [axis 0 loop]\n" + moment("%ri") +
      "%rk = RANGE i64 %n [axis 2 reduce]\n%imn = INDEX f32* %bm, %rk\n%lmn = LOAD f32 "
      "%imn\n%s = REDUCE f32 %lmn, %rk [reduce ADD ()]\n%cs = CONTIGUOUS f32 %s\n%bs = "
      "BUFFERIZE f32 %cs [()]\n%root = SINK bool %bm, %bs\n";
  CHECK(apply_stage(elementwise_outputs(), summed) == expect(summed));
  // P over [4] reads M [8] at its own index: not the same iteration space.
  const std::string shorter = kBuffers +
                              "%four = CONST i64 [4]\n%ri = RANGE i64 %n [axis 0 loop]\n"
                              "%rj = RANGE i64 %four [axis 1 loop]\n" +
                              moment("%ri") + "%imn = INDEX f32* %bm, %rj\n%lmn = LOAD f32 %imn\n" +
                              kParameter +
                              "%ip = INDEX f32* %p, %rj\n%lp = LOAD f32 %ip\n%step = MUL f32 %lr, %lmn\n"
                              "%pv = SUB f32 %lp, %step\n%cp = CONTIGUOUS f32 %pv\n%bp = BUFFERIZE f32 %cp, "
                              "%rj [(4)]\n%root = SINK bool %bm, %bp\n";
  CHECK(apply_stage(elementwise_outputs(), shorter) == expect(shorter));
}

TEST_CASE(
    "a producer the reader also needs through another kernel stays apart: one kernel would wait for itself") {
  // T = sum_k M[k] (a kernel of its own), P[j] = p[j] - 0.5 * M[j] * T: joining M and P
  // would make a kernel that needs T, which needs it.
  const std::string chained =
      kBuffers + kRanges + moment("%ri") +
      "%rk = RANGE i64 %n [axis 2 reduce]\n%ikm = INDEX f32* %bm, %rk\n%lkm = LOAD f32 %ikm\n%s = REDUCE f32 "
      "%lkm, %rk [reduce ADD ()]\n%cs = CONTIGUOUS f32 %s\n%bs = BUFFERIZE f32 %cs [()]\n%it = INDEX f32* "
      "%bs\n"
      "%lt = LOAD f32 %it\n%imn = INDEX f32* %bm, %rj\n%lmn = LOAD f32 %imn\n%mt = MUL f32 %lmn, %lt\n" +
      update("%mt") + "%root = SINK bool %bm, %bp\n";
  CHECK(apply_stage(elementwise_outputs(), chained) == expect(chained));
}

TEST_CASE("two elementwise buffers reading one sum at their own element share a kernel (siblings)") {
  // S[i] = sum_k g[k] * m[i]; A[j] = S[j] * 0.9 and B[l] = S[l] + 0.1, both roots.
  const std::string sum =
      "%ri = RANGE i64 %n [axis 0 loop]\n%rk = RANGE i64 %n [axis 1 reduce]\n"
      "%ig = INDEX f32* %g, %rk\n%lg = LOAD f32 %ig\n%im = INDEX f32* %m, %ri\n%lm = LOAD f32 %im\n"
      "%pr = MUL f32 %lg, %lm\n%s = REDUCE f32 %pr, %rk [reduce ADD ()]\n%cs = CONTIGUOUS f32 %s\n"
      "%bs = BUFFERIZE f32 %cs, %ri [(8)]\n%rj = RANGE i64 %n [axis 2 loop]\n";
  const std::string a =
      "%ia = INDEX f32* %bs, %rj\n%la = LOAD f32 %ia\n%va = MUL f32 %la, %b1\n"
      "%ca = CONTIGUOUS f32 %va\n%ba = BUFFERIZE f32 %ca, %rj [(8)]\n";
  const auto b = [](const std::string& r) {
    return "%ib = INDEX f32* %bs, " + r + "\n%lb = LOAD f32 %ib\n%vb = ADD f32 %lb, %c1\n" +
           "%cb = CONTIGUOUS f32 %vb\n%bb = BUFFERIZE f32 %cb, " + r + " [(8)]\n";
  };
  const std::string before = kBuffers + sum + a + "%rl = RANGE i64 %n [axis 3 loop]\n" + b("%rl") +
                             "%root = SINK bool %bs, %ba, %bb\n";
  // B over A's range: one kernel loads S[j] once and stores both.
  const std::string after = kBuffers + sum + a + b("%rj") + "%root = SINK bool %bs, %ba, %bb\n";
  CHECK(apply_stage(elementwise_outputs(), before) == expect(after));
}
