// split_reduceop: a reduce with inputs/outputs >= 32768 and few outputs runs as
// two reduces through a contiguous buffer; guards refuse the rest.
#include "schedule/split_reduceop.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>

using namespace loom;
using loom::testing::apply_stage;

TEST_CASE("[65536] -> [1]: reshape to (256 256), reduce the contiguous 256, buffer, reduce the 256 parts") {
  const UOpPtr after = apply_stage(split_reduceop(), R"(
%x = BUFFER f32 [(1 65536)]
%s = REDUCE_AXIS f32 %x [reduce ADD (0)]
)",
                                   Flags{}, false);
  CHECK(after == parse_text(R"(
%x = BUFFER f32 [(1 65536)]
%parts = RESHAPE f32 %x [(256 256)]
%first = REDUCE_AXIS f32 %parts [reduce ADD (1)]
%kept = CONTIGUOUS f32 %first
%second = REDUCE_AXIS f32 %kept [reduce ADD (0)]
%s = RESHAPE f32 %second [(1)]
)"));
}

TEST_CASE("guards: a small ratio, many outputs, or an axis made by EXPAND is not split") {
  const char* small = "%x = BUFFER f32 [(1 16384)]\n%s = REDUCE_AXIS f32 %x [reduce ADD (0)]\n";
  CHECK(apply_stage(split_reduceop(), small, Flags{}, false) == parse_text(small));
  const char* many = R"(
%x = BUFFER f32 [(1 33554432)]
%v = RESHAPE f32 %x [(512 65536)]
%s = REDUCE_AXIS f32 %v [reduce ADD (1)]
)";
  CHECK(apply_stage(split_reduceop(), many, Flags{}, false) == parse_text(many));
  const char* expanded = R"(
%x = BUFFER f32 [(1 1)]
%e = EXPAND f32 %x [(65536)]
%s = REDUCE_AXIS f32 %e [reduce ADD (0)]
)";
  CHECK(apply_stage(split_reduceop(), expanded, Flags{}, false) == parse_text(expanded));
}
