// narrow_buffers: a proposed buffer of a value widened from a narrower float stores the
// narrow value and its reads widen it; a narrowing cast and a realization point keep
// their buffers as they are.
#include "schedule/narrow_buffers.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace loom;
using loom::testing::apply_stage;
using loom::testing::expect;

namespace {
// b[r0] = cast(cast(x[r0], inner), outer), read at r7 by a realization point.
std::string cast_buffer(const char* inner, const char* outer) {
  return std::string(R"(
%n = CONST i64 [8]
%r0 = RANGE i64 %n [axis 0 loop]
%x = BUFFER f32 [(1 8)]
%ix = INDEX f32* %x, %r0
%lx = LOAD f32 %ix
%y = CAST )") +
         inner + R"( %lx
%w = CAST )" +
         outer + R"( %y
%b = BUFFERIZE )" +
         outer + R"( %w, %r0 [(8)]
%r7 = RANGE i64 %n [axis 7 loop]
%ib = INDEX )" +
         outer + R"(* %b, %r7
%lb = LOAD )" +
         outer + R"( %ib
%out = CONTIGUOUS )" +
         outer + R"( %lb
%root = BUFFERIZE )" +
         outer + R"( %out, %r7 [(8)]
)";
}
}  // namespace

TEST_CASE("a bfloat16 value widened to float32 is stored as bfloat16 and widened where it is read") {
  CHECK(apply_stage(narrow_buffers(), cast_buffer("bf16", "f32")) == expect(R"(
%n = CONST i64 [8]
%r0 = RANGE i64 %n [axis 0 loop]
%x = BUFFER f32 [(1 8)]
%ix = INDEX f32* %x, %r0
%lx = LOAD f32 %ix
%y = CAST bf16 %lx
%b = BUFFERIZE bf16 %y, %r0 [(8)]
%r7 = RANGE i64 %n [axis 7 loop]
%ib = INDEX bf16* %b, %r7
%lb = LOAD bf16 %ib
%w = CAST f32 %lb
%out = CONTIGUOUS f32 %w
%root = BUFFERIZE f32 %out, %r7 [(8)]
)"));
}

TEST_CASE("float16 to float32 likewise; a narrowing cast keeps its buffer") {
  CHECK(apply_stage(narrow_buffers(), cast_buffer("f16", "f32")) != expect(cast_buffer("f16", "f32")));
  CHECK(apply_stage(narrow_buffers(), cast_buffer("f32", "bf16")) == expect(cast_buffer("f32", "bf16")));
  CHECK(apply_stage(narrow_buffers(), cast_buffer("f64", "f32")) == expect(cast_buffer("f64", "f32")));
}

TEST_CASE("a realization point keeps the dtype the user asked for") {
  // The root's value is CONTIGUOUS(CAST ...): not a widening cast itself.
  const std::string kept = R"(
%n = CONST i64 [8]
%r0 = RANGE i64 %n [axis 0 loop]
%x = BUFFER bf16 [(1 8)]
%ix = INDEX bf16* %x, %r0
%lx = LOAD bf16 %ix
%w = CAST f32 %lx
%out = CONTIGUOUS f32 %w
%root = BUFFERIZE f32 %out, %r0 [(8)]
)";
  CHECK(apply_stage(narrow_buffers(), kept) == expect(kept));
}
