// range_split: RANGE(end) % c with end % c == 0 becomes outer*c + inner; the
// substitution waits for the SINK. A constant that does not divide is refused.
#include "schedule/range_flatten.hpp"
#include "schedule/range_split.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

using namespace loom;
using loom::testing::apply_stage;
using loom::testing::expect;

namespace {
// out[r] = x[r op c] for r < 12, op MOD or IDIV.
std::string divmod_kernel(int c, const char* op = "MOD") {
  return fmt::format(R"(
%n = CONST i64 [12]
%r = RANGE i64 %n [axis 0 loop]
%c = CONST i64 [{}]
%m = {} i64 %r, %c
%x = DEFINE_GLOBAL f32* [1]
%ix = INDEX f32* %x, %m
%lx = LOAD f32 %ix
%out = DEFINE_GLOBAL f32* [0]
%io = INDEX f32* %out, %r
%st = STORE f32 %io, %lx
%e = END f32 %st, %r
%k = SINK bool %e
)",
                     c, op);
}
}  // namespace

TEST_CASE("RANGE(12) % 4 -> RANGE(3)*4 + RANGE(4): the modulo is gone, both ranges are loops") {
  CHECK(apply_stage(range_split() + range_flatten(), divmod_kernel(4)) == expect(R"(
%c3 = CONST i64 [3]
%r1 = RANGE i64 %c3 [axis 1 loop]
%c4 = CONST i64 [4]
%r2 = RANGE i64 %c4 [axis 2 loop]
%x = DEFINE_GLOBAL f32* [1]
%ix = INDEX f32* %x, %r2
%lx = LOAD f32 %ix
%m = MUL i64 %r1, %c4
%a = ADD i64 %m, %r2
%out = DEFINE_GLOBAL f32* [0]
%io = INDEX f32* %out, %a
%st = STORE f32 %io, %lx
%e = END f32 %st, %r1, %r2
%k = SINK bool %e
)"));
}

TEST_CASE("no split when end % c != 0: RANGE(12) % 5 stays") {
  CHECK(apply_stage(range_split() + range_flatten(), divmod_kernel(5)) == expect(divmod_kernel(5)));
}

TEST_CASE("RANGE(12) / 4 alone -> RANGE(3)*4 + RANGE(4): the quotient is the outer range") {
  CHECK(apply_stage(range_split() + range_flatten(), divmod_kernel(4, "IDIV")) == expect(R"(
%c3 = CONST i64 [3]
%r1 = RANGE i64 %c3 [axis 1 loop]
%x = DEFINE_GLOBAL f32* [1]
%ix = INDEX f32* %x, %r1
%lx = LOAD f32 %ix
%c4 = CONST i64 [4]
%m = MUL i64 %r1, %c4
%r2 = RANGE i64 %c4 [axis 2 loop]
%a = ADD i64 %m, %r2
%out = DEFINE_GLOBAL f32* [0]
%io = INDEX f32* %out, %a
%st = STORE f32 %io, %lx
%e = END f32 %st, %r1, %r2
%k = SINK bool %e
)"));
}
