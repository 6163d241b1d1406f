// reduce_collapse: sums over a range replaced by closed forms. Structure is
// checked by pointer against the expected graph; the bound patterns are also
// checked by value, against the count done by hand, for cut points on both
// sides of and inside [0, 64).
#include "ir/pattern.hpp"
#include "schedule/reduce_collapse.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>

using namespace loom;
using loom::testing::apply_stage;
using loom::testing::expect;

namespace {

// sum over r < 64 of (cond ? 1.0 : 0.0) (or its swap), with `cond` over r and the
// variables a, b in [-100, 100]; the result, if the sum collapsed.
UOpPtr count_sum(const std::string& cond, bool swapped = false) {
  return apply_stage(reduce_collapse(), fmt::format(R"(
%n = CONST i64 [64]
%r = RANGE i64 %n [axis 0 reduce]
%a = DEFINE_VAR i64 [var "a" -100 100]
%b = DEFINE_VAR i64 [var "b" -100 100]
%one = CONST f32 [1.0]
%zero = CONST f32 [0.0]
{}
%w = WHERE f32 %c, {}
%s = REDUCE f32 %w, %r [reduce ADD ()]
roots %s
)",
                                                    cond, swapped ? "%zero, %one" : "%one, %zero"));
}

double at(const UOpPtr& e, int64_t a, int64_t b = 0) {
  const UOpPtr v = simplify(substitute(e, {{make_var("a", -100, 100), const_int(DType::Int64, a)},
                                           {make_var("b", -100, 100), const_int(DType::Int64, b)}}));
  REQUIRE(v->op == Op::CONST);
  return v->const_value();
}

bool has_reduce(const UOpPtr& u) {
  for (const auto& n : toposort(u))
    if (n->op == Op::REDUCE) return true;
  return false;
}

}  // namespace

TEST_CASE("upper bound: sum(r < cut ? val : 0) -> clamp(cut, 0, N) * val") {
  const UOpPtr s = count_sum("%c = CMPLT bool %r, %a");
  REQUIRE_FALSE(has_reduce(s));
  for (int64_t a : {-7, 0, 1, 30, 63, 64, 65, 100}) CHECK(at(s, a) == std::clamp<int64_t>(a, 0, 64));
}

TEST_CASE("lower bound: sum(r < cut ? 0 : val) -> clamp(N - cut, 0, N) * val") {
  const UOpPtr s = count_sum("%c = CMPLT bool %r, %a", true);
  REQUIRE_FALSE(has_reduce(s));
  for (int64_t a : {-7, 0, 1, 30, 63, 64, 65, 100}) CHECK(at(s, a) == 64 - std::clamp<int64_t>(a, 0, 64));
}

TEST_CASE("two-sided: sum(lo <= r & r < hi ? val : 0) -> clamp(min(N, hi) - max(0, lo), 0, N) * val") {
  const UOpPtr s = count_sum(R"(
%lt = CMPLT bool %r, %a
%t = CONST bool [1]
%ge = CMPNE bool %lt, %t
%lt2 = CMPLT bool %r, %b
%c = AND bool %ge, %lt2)");
  REQUIRE_FALSE(has_reduce(s));
  for (int64_t a : {-5, 0, 10, 70})
    for (int64_t b : {-3, 0, 12, 64, 90})
      CHECK(at(s, a, b) == std::clamp<int64_t>(std::min<int64_t>(b, 64) - std::max<int64_t>(a, 0), 0, 64));
}

TEST_CASE("lifting: sum(r + 3 < cut ? 1 : 0) is the upper bound at cut - 3") {
  const UOpPtr s = count_sum(R"(
%three = CONST i64 [3]
%r3 = ADD i64 %r, %three
%c = CMPLT bool %r3, %a)");
  REQUIRE_FALSE(has_reduce(s));
  for (int64_t a : {-1, 2, 3, 40, 66, 67, 99}) CHECK(at(s, a) == std::clamp<int64_t>(a - 3, 0, 64));
}

TEST_CASE("distributive split: sum(x + y) -> sum(x) + sum(y) when both halves collapse") {
  const UOpPtr s = apply_stage(reduce_collapse(), R"(
%n = CONST i64 [64]
%r = RANGE i64 %n [axis 0 reduce]
%a = DEFINE_VAR i64 [var "a" -100 100]
%b = DEFINE_VAR i64 [var "b" -100 100]
%one = CONST f32 [1.0]
%two = CONST f32 [2.0]
%zero = CONST f32 [0.0]
%ca = CMPLT bool %r, %a
%cb = CMPLT bool %r, %b
%wa = WHERE f32 %ca, %one, %zero
%wb = WHERE f32 %cb, %two, %zero
%sum = ADD f32 %wa, %wb
%s = REDUCE f32 %sum, %r [reduce ADD ()]
)");
  REQUIRE_FALSE(has_reduce(s));
  CHECK(at(s, 10, 20) == 10 + 2 * 20);
  CHECK(at(s, 70, -4) == 64);
}

namespace {
// The embedding lookup as the front end emits it: out[j] = sum over r < 65536 of
// table[r*64 + j] * float(int(int(idx) == int(r))), idx loaded from slot 2.
const char* kOneHot = R"(
%n = CONST i64 [65536]
%w = CONST i64 [64]
%r = RANGE i64 %n [axis 1 reduce]
%j = RANGE i64 %w [axis 0 loop]
%table = DEFINE_GLOBAL f32* [1]
%row = MUL i64 %r, %w
%at = ADD i64 %row, %j
%it = INDEX f32* %table, %at
%lt = LOAD f32 %it
%ids = DEFINE_GLOBAL i32* [2]
%z = CONST i64 [0]
%ii = INDEX i32* %ids, %z
%idx = LOAD i32 %ii
%r32 = CAST i32 %r
%hit = CMPEQ bool %idx, %r32
%h32 = CAST i32 %hit
%hf = CAST f32 %h32
%p = MUL f32 %lt, %hf
%s = REDUCE f32 %p, %r [reduce ADD ()]
%out = DEFINE_GLOBAL f32* [0]
%io = INDEX f32* %out, %j
%st = STORE f32 %io, %s
%e = END f32 %st, %j
%k = SINK bool %e
)";
}  // namespace

TEST_CASE("the one-hot embedding lookup (CMPEQ, Bool->Int32->Float32 casts) becomes one guarded load") {
  CHECK(apply_stage(reduce_collapse(), kOneHot) == expect(R"(
%w = CONST i64 [64]
%j = RANGE i64 %w [axis 0 loop]
%ids = DEFINE_GLOBAL i32* [2]
%z = CONST i64 [0]
%ii = INDEX i32* %ids, %z
%idx = LOAD i32 %ii
%i64 = CAST i64 %idx
%m1 = CONST i64 [-1]
%lo = CMPLT bool %m1, %i64
%n = CONST i64 [65536]
%hi = CMPLT bool %i64, %n
%in = AND bool %lo, %hi
%table = DEFINE_GLOBAL f32* [1]
%row = MUL i64 %i64, %w
%at = ADD i64 %row, %j
%it = INDEX f32* %table, %at, %in
%lt = LOAD f32 %it
%zero = CONST f32 [0.0]
%v = WHERE f32 %in, %lt, %zero
%out = DEFINE_GLOBAL f32* [0]
%io = INDEX f32* %out, %j
%st = STORE f32 %io, %v
%e = END f32 %st, %j
%k = SINK bool %e
)"));
}

TEST_CASE("the NE form: sum(idx != r ? 0 : expr) -> in_bounds ? expr[r := idx] : 0") {
  const UOpPtr s = apply_stage(reduce_collapse(), R"(
%n = CONST i64 [16]
%r = RANGE i64 %n [axis 1 reduce]
%x = DEFINE_GLOBAL f32* [1]
%ix = INDEX f32* %x, %r
%lx = LOAD f32 %ix
%idx = DEFINE_VAR i64 [var "i" -100 100]
%ne = CMPNE bool %idx, %r
%zero = CONST f32 [0.0]
%w = WHERE f32 %ne, %zero, %lx
%s = REDUCE f32 %w, %r [reduce ADD ()]
)");
  CHECK(s == expect(R"(
%idx = DEFINE_VAR i64 [var "i" -100 100]
%m1 = CONST i64 [-1]
%lo = CMPLT bool %m1, %idx
%n = CONST i64 [16]
%hi = CMPLT bool %idx, %n
%in = AND bool %lo, %hi
%x = DEFINE_GLOBAL f32* [1]
%ix = INDEX f32* %x, %idx, %in
%lx = LOAD f32 %ix
%zero = CONST f32 [0.0]
%v = WHERE f32 %in, %lx, %zero
)"));
}

TEST_CASE("guards: a sum of loads that depend on r, and a gather whose index depends on r, stay") {
  const char* plain = R"(
%n = CONST i64 [16]
%r = RANGE i64 %n [axis 1 reduce]
%x = DEFINE_GLOBAL f32* [1]
%ix = INDEX f32* %x, %r
%lx = LOAD f32 %ix
%s = REDUCE f32 %lx, %r [reduce ADD ()]
)";
  CHECK(apply_stage(reduce_collapse(), plain) == expect(plain));
  const char* self_index = R"(
%n = CONST i64 [16]
%r = RANGE i64 %n [axis 1 reduce]
%x = DEFINE_GLOBAL f32* [1]
%ix = INDEX f32* %x, %r
%lx = LOAD f32 %ix
%ids = DEFINE_GLOBAL i64* [2]
%ii = INDEX i64* %ids, %r
%idx = LOAD i64 %ii
%eq = CMPEQ bool %idx, %r
%zero = CONST f32 [0.0]
%w = WHERE f32 %eq, %lx, %zero
%s = REDUCE f32 %w, %r [reduce ADD ()]
)";
  CHECK(apply_stage(reduce_collapse(), self_index) == expect(self_index));
}

TEST_CASE("x * bool.cast() becomes a WHERE only inside a reduce: elsewhere inf * 0 stays NaN") {
  const char* outside = R"(
%x = DEFINE_VAR f32 [var "x" 0 0]
%b = DEFINE_VAR bool [var "b" 0 1]
%c = CAST f32 %b
%m = MUL f32 %x, %c
)";
  CHECK(apply_stage(reduce_collapse(), outside) == expect(outside));
}
