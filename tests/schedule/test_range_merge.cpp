// range_merge: adjacent ranges of one kind merge when the divmod count does
// not grow; a merge that would add divisions is rejected.
#include "schedule/range_merge.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

using namespace loom;
using loom::testing::apply_stage;
using loom::testing::expect;

namespace {
// out[r0*8 + r1] = x[<read>] over r0 < 4, r1 < 8.
std::string copy_kernel(const char* read) {
  return fmt::format(R"(
%n4 = CONST i64 [4]
%n8 = CONST i64 [8]
%r0 = RANGE i64 %n4 [axis 0 loop]
%r1 = RANGE i64 %n8 [axis 1 loop]
{}
%x = DEFINE_GLOBAL f32* [1]
%ix = INDEX f32* %x, %read
%lx = LOAD f32 %ix
%w = MUL i64 %r0, %n8
%o = ADD i64 %w, %r1
%out = DEFINE_GLOBAL f32* [0]
%io = INDEX f32* %out, %o
%st = STORE f32 %io, %lx
%e = END f32 %st, %r0, %r1
%k = SINK bool %e
)",
                     read);
}
}  // namespace

TEST_CASE("RANGE(0..4), RANGE(0..8) -> RANGE(0..32) where both index linearly") {
  CHECK(apply_stage(range_merge(), copy_kernel("%w8 = MUL i64 %r0, %n8\n%read = ADD i64 %w8, %r1")) ==
        expect(R"(
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
)"));
}

TEST_CASE("a merge that would add divmods is rejected: a transposed read keeps both loops") {
  const std::string transposed = copy_kernel("%w4 = MUL i64 %r1, %n4\n%read = ADD i64 %w4, %r0");
  CHECK(apply_stage(range_merge(), transposed) == expect(transposed));
}

TEST_CASE("ranges of different kinds, or in different REDUCE scopes, do not merge") {
  const char* scopes = R"(
%n4 = CONST i64 [4]
%n8 = CONST i64 [8]
%r0 = RANGE i64 %n4 [axis 0 loop]
%r1 = RANGE i64 %n8 [axis 1 loop]
%k = RANGE i64 %n8 [axis 2 reduce]
%w = MUL i64 %r0, %n8
%o = ADD i64 %w, %r1
%x = DEFINE_GLOBAL f32* [1]
%w2 = MUL i64 %r0, %n8
%a = ADD i64 %w2, %k
%ix = INDEX f32* %x, %a
%lx = LOAD f32 %ix
%s = REDUCE f32 %lx, %k [reduce ADD ()]
%f = CAST f32 %r1
%v = ADD f32 %s, %f
%out = DEFINE_GLOBAL f32* [0]
%io = INDEX f32* %out, %o
%st = STORE f32 %io, %v
%e = END f32 %st, %r0, %r1
%sink = SINK bool %e
)";
  CHECK(apply_stage(range_merge(), scopes) == expect(scopes));  // the REDUCE depends on r0, not r1
}
