// dead_axis: size-1 axes, constant-indexed axes and axes the value never uses
// leave a proposed buffer; the reads drop their index there.
#include "schedule/dead_axis.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>

using namespace loom;
using loom::testing::apply_stage;
using loom::testing::expect;

TEST_CASE("an axis of size 1 and an axis the value does not use leave the buffer and its read") {
  // b[(4 1 8)] = x[r0] (r2 unused), read at (3 - r7, 0, r8).
  CHECK(apply_stage(dead_axis(), R"(
%n = CONST i64 [4]
%m = CONST i64 [8]
%z = CONST i64 [0]
%r0 = RANGE i64 %n [axis 0 loop]
%r2 = RANGE i64 %m [axis 2 loop]
%x = BUFFER f32 [(1 4)]
%ix = INDEX f32* %x, %r0
%lx = LOAD f32 %ix
%b = BUFFERIZE f32 %lx, %r0, %z, %r2 [(4 1 8)]
%r7 = RANGE i64 %n [axis 7 loop]
%r8 = RANGE i64 %m [axis 8 loop]
%three = CONST i64 [3]
%flip = SUB i64 %three, %r7
%ib = INDEX f32* %b, %flip, %z, %r8
%lb = LOAD f32 %ib
%out = CONTIGUOUS f32 %lb
%root = BUFFERIZE f32 %out, %r7, %z, %r8 [(4 1 8)]
)") == expect(R"(
%n = CONST i64 [4]
%m = CONST i64 [8]
%z = CONST i64 [0]
%r0 = RANGE i64 %n [axis 0 loop]
%x = BUFFER f32 [(1 4)]
%ix = INDEX f32* %x, %r0
%lx = LOAD f32 %ix
%b = BUFFERIZE f32 %lx, %r0 [(4)]
%r7 = RANGE i64 %n [axis 7 loop]
%r8 = RANGE i64 %m [axis 8 loop]
%three = CONST i64 [3]
%flip = SUB i64 %three, %r7
%ib = INDEX f32* %b, %flip
%lb = LOAD f32 %ib
%out = CONTIGUOUS f32 %lb
%root = BUFFERIZE f32 %out, %r7, %z, %r8 [(4 1 8)]
)"));
}

TEST_CASE("a buffer with no live axis keeps a BUFFERIZE with no ranges (a scalar)") {
  CHECK(apply_stage(dead_axis(), R"(
%n = CONST i64 [4]
%k = RANGE i64 %n [axis 1 reduce]
%r0 = RANGE i64 %n [axis 0 loop]
%x = BUFFER f32 [(1 4)]
%ix = INDEX f32* %x, %k
%lx = LOAD f32 %ix
%s = REDUCE f32 %lx, %k [reduce ADD ()]
%b = BUFFERIZE f32 %s, %r0 [(4)]
%r7 = RANGE i64 %n [axis 7 loop]
%ib = INDEX f32* %b, %r7
%lb = LOAD f32 %ib
%out = CONTIGUOUS f32 %lb
%root = BUFFERIZE f32 %out, %r7 [(4)]
)") == expect(R"(
%n = CONST i64 [4]
%k = RANGE i64 %n [axis 1 reduce]
%x = BUFFER f32 [(1 4)]
%ix = INDEX f32* %x, %k
%lx = LOAD f32 %ix
%s = REDUCE f32 %lx, %k [reduce ADD ()]
%b = BUFFERIZE f32 %s [()]
%ib = INDEX f32* %b
%lb = LOAD f32 %ib
%r7 = RANGE i64 %n [axis 7 loop]
%out = CONTIGUOUS f32 %lb
%root = BUFFERIZE f32 %out, %r7 [(4)]
)"));
}

TEST_CASE("a realization point keeps every axis: its shape is the one asked for") {
  const char* g = R"(
%n = CONST i64 [4]
%z = CONST i64 [0]
%c = CONST f32 [1.0]
%out = CONTIGUOUS f32 %c
%root = BUFFERIZE f32 %out, %z [(1)]
%r7 = RANGE i64 %n [axis 7 loop]
%ib = INDEX f32* %root, %z
%lb = LOAD f32 %ib
%out2 = CONTIGUOUS f32 %lb
%root2 = BUFFERIZE f32 %out2, %r7 [(4)]
)";
  CHECK(apply_stage(dead_axis(), g) == expect(g));
}
