// range_flatten: nested END chains become one END over all their ranges,
// outermost first; a listed expression becomes its ranges.
#include "schedule/range_flatten.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>

using namespace loom;
using loom::testing::apply_stage;
using loom::testing::expect;

TEST_CASE("END(END(END(comp, r0), r1), r2) -> END(comp, r2, r1, r0): the same loops, one list") {
  const char* head = R"(
%n = CONST i64 [4]
%r0 = RANGE i64 %n [axis 0 loop]
%r1 = RANGE i64 %n [axis 1 loop]
%r2 = RANGE i64 %n [axis 2 loop]
%s16 = CONST i64 [16]
%a = MUL i64 %r2, %s16
%b = MUL i64 %r1, %n
%ab = ADD i64 %a, %b
%i = ADD i64 %ab, %r0
%out = DEFINE_GLOBAL f32* [0]
%io = INDEX f32* %out, %i
%one = CONST f32 [1.0]
%comp = STORE f32 %io, %one
)";
  CHECK(apply_stage(range_flatten(), std::string(head) + R"(
%e0 = END f32 %comp, %r0
%e1 = END f32 %e0, %r1
%e2 = END f32 %e1, %r2
%k = SINK bool %e2
)") == expect(std::string(head) + R"(
%e = END f32 %comp, %r2, %r1, %r0
%k = SINK bool %e
)"));
}

TEST_CASE("END over an expression of ranges lists those ranges") {
  const char* head = R"(
%c3 = CONST i64 [3]
%c4 = CONST i64 [4]
%r1 = RANGE i64 %c3 [axis 1 loop]
%r2 = RANGE i64 %c4 [axis 2 loop]
%m = MUL i64 %r1, %c4
%a = ADD i64 %m, %r2
%out = DEFINE_GLOBAL f32* [0]
%io = INDEX f32* %out, %a
%one = CONST f32 [1.0]
%st = STORE f32 %io, %one
)";
  CHECK(apply_stage(range_flatten(), std::string(head) + "%e = END f32 %st, %a\n%k = SINK bool %e\n") ==
        expect(std::string(head) + "%e = END f32 %st, %r1, %r2\n%k = SINK bool %e\n"));
}
