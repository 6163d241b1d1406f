// load_collapse: a per-kernel REDUCE[ADD] whose body, with what does not depend
// on the reduce range stood in for by variables, simplifies to a closed form.
#include "schedule/load_collapse.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace loom;
using loom::testing::apply_stage;

namespace {
// sum(1 for k in 0..64 if k >= length), length loaded from slot 1.
const char* kCountAbove = R"(
%n = CONST i64 [64]
%k = RANGE i64 %n [axis 0 reduce]
%lens = DEFINE_GLOBAL i64* [1]
%z = CONST i64 [0]
%il = INDEX i64* %lens, %z
%length = LOAD i64 %il
%lt = CMPLT bool %k, %length
%one = CONST i32 [1]
%zero = CONST i32 [0]
%w = WHERE i32 %lt, %zero, %one
%s = REDUCE i32 %w, %k [reduce ADD ()]
%out = DEFINE_GLOBAL i32* [0]
%io = INDEX i32* %out, %z
%st = STORE i32 %io, %s
%sink = SINK bool %st
)";
}  // namespace

TEST_CASE("sum(1 for k in 0..64 if k >= length) -> clamp(64 - length, 0, 64), checked for many lengths") {
  const UOpPtr kernel = apply_stage(load_collapse(), kCountAbove);
  const UOpPtr stored = kernel->src[0]->src[1];
  UOpPtr load;
  for (const auto& n : toposort(kernel)) {
    CHECK(n->op != Op::REDUCE);
    CHECK(n->op != Op::RANGE);
    if (n->op == Op::LOAD) load = n;
  }
  REQUIRE(load);
  for (int64_t length : {-3, 0, 1, 17, 63, 64, 80}) {
    const UOpPtr v = simplify(substitute(stored, {{load, const_int(DType::Int64, length)}}));
    REQUIRE(v->is_const());
    CHECK(v->const_int() == std::clamp<int64_t>(64 - length, 0, 64));
  }
}

TEST_CASE("a reduce whose body loads at the reduce index has no closed form and stays") {
  const char* sum = R"(
%n = CONST i64 [64]
%k = RANGE i64 %n [axis 0 reduce]
%x = DEFINE_GLOBAL f32* [1]
%ix = INDEX f32* %x, %k
%lx = LOAD f32 %ix
%s = REDUCE f32 %lx, %k [reduce ADD ()]
%out = DEFINE_GLOBAL f32* [0]
%z = CONST i64 [0]
%io = INDEX f32* %out, %z
%st = STORE f32 %io, %s
%sink = SINK bool %st
)";
  CHECK(apply_stage(load_collapse(), sum) == loom::testing::expect(sum));
}

TEST_CASE("an outer sum over an inner sum that reads its own range stays: no load leaves its loop") {
  // sum over r of sum over j of (r == idx[j] ? v[j] : 0), r < 2. idx[j] and v[j] read the
  // inner range j, so they are no constants of the outer sum: stood in for by variables,
  // the inner sum looked unparented and became 3 * v[j], with j read outside its loop.
  const char* nested = R"(
%two = CONST i64 [2]
%r = RANGE i64 %two [axis 0 reduce]
%three = CONST i64 [3]
%j = RANGE i64 %three [axis 1 reduce]
%idx = DEFINE_GLOBAL i64* [1]
%ii = INDEX i64* %idx, %j
%li = LOAD i64 %ii
%hit = CMPEQ bool %r, %li
%v = DEFINE_GLOBAL f32* [2]
%iv = INDEX f32* %v, %j
%lv = LOAD f32 %iv
%zero = CONST f32 [0.0]
%w = WHERE f32 %hit, %lv, %zero
%inner = REDUCE f32 %w, %j [reduce ADD ()]
%s = REDUCE f32 %inner, %r [reduce ADD ()]
%out = DEFINE_GLOBAL f32* [0]
%z = CONST i64 [0]
%io = INDEX f32* %out, %z
%st = STORE f32 %io, %s
%sink = SINK bool %st
)";
  const UOpPtr kernel = apply_stage(load_collapse(), nested);
  CHECK(kernel == loom::testing::expect(nested));
  for (const auto& n : toposort(kernel))  // every load reading j sits inside a REDUCE over j
    if (n->op == Op::LOAD && !n->ranges().empty())
      for (const auto& red : toposort(kernel))
        if (red->op == Op::REDUCE && red->src[1]->get<AxisArg>().id == 1) CHECK(reaches(red, n));
}

TEST_CASE("a sum over RANGE(T) whose body also reads T stays a sum over that range") {
  // sum over t < T of x[(t + T * h) % T]: T, a source of the MOD, is no constant of the
  // sum to stand in for by a variable inside the range's end. Substituted there too,
  // the body read another range, the sum looked unparented and became x[...] * T with t
  // read outside its loop.
  const char* sum = R"(
%T = DEFINE_VAR i64 [var "T" 1 128]
%t = RANGE i64 %T [axis 1 reduce]
%four = CONST i64 [4]
%h = RANGE i64 %four [axis 0 loop]
%x = DEFINE_GLOBAL f32* [1]
%th = MUL i64 %T, %h
%a = ADD i64 %t, %th
%m = MOD i64 %a, %T
%ix = INDEX f32* %x, %m
%lx = LOAD f32 %ix
%s = REDUCE f32 %lx, %t [reduce ADD ()]
%out = DEFINE_GLOBAL f32* [0]
%io = INDEX f32* %out, %h
%st = STORE f32 %io, %s
%e = END f32 %st, %h
%sink = SINK bool %e
)";
  CHECK(apply_stage(load_collapse(), sum) == loom::testing::expect(sum));
}
