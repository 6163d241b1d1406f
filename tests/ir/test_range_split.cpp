// split_ranges, the shift_to-like primitive: uses become outer*factor + inner,
// END and REDUCE lists get both ranges in place, new ranges get fresh ids.
#include "ir/range_split.hpp"
#include "ir/symbolic.hpp"
#include "ir/text.hpp"

#include <doctest/doctest.h>

using namespace loom;

namespace {
const char* kStore12 = R"(
%c12 = CONST i64 [12]
%r0 = RANGE i64 %c12 [axis 0 loop]
%g = DEFINE_GLOBAL f32* [0]
%i = INDEX f32* %g, %r0
%one = CONST f32 [1.0]
%st = STORE f32 %i, %one
%e = END f32 %st, %r0
%k = SINK bool %e
)";
}  // namespace

TEST_CASE("RANGE(12) split by 4: r0 -> r1*4 + r2 with r1 < 3, r2 < 4, both listed by the END in r0's place") {
  const UOpPtr kernel = parse_text(kStore12);
  const UOpPtr r0 = kernel->src[0]->src[1];
  SplitRanges s = split_ranges(kernel, {{r0, 4, AxisKind::Upcast}});
  CHECK(s.root == parse_text(R"(
%c3 = CONST i64 [3]
%r1 = RANGE i64 %c3 [axis 1 loop]
%c4 = CONST i64 [4]
%r2 = RANGE i64 %c4 [axis 2 upcast]
%m = MUL i64 %r1, %c4
%a = ADD i64 %m, %r2
%g = DEFINE_GLOBAL f32* [0]
%i = INDEX f32* %g, %a
%one = CONST f32 [1.0]
%st = STORE f32 %i, %one
%e = END f32 %st, %r1, %r2
%k = SINK bool %e
)"));
  REQUIRE(s.parts.size() == 1);
  CHECK(s.parts[0].first->src[0]->const_int() == 3);
  CHECK(s.parts[0].second->get<AxisArg>().kind == AxisKind::Upcast);
}

TEST_CASE("factor_outer puts the new range outside: r0 -> new*3 + rest") {
  const UOpPtr kernel = parse_text(kStore12);
  const UOpPtr r0 = kernel->src[0]->src[1];
  SplitRanges s = split_ranges(kernel, {{r0, 4, AxisKind::Parallel, true}}, 7);
  const auto& [outer, inner] = s.parts.at(0);
  CHECK(outer->get<AxisArg>() == AxisArg{7, AxisKind::Parallel});
  CHECK(outer->src[0]->const_int() == 4);
  CHECK(inner->get<AxisArg>() == AxisArg{8, AxisKind::Loop});
  CHECK(inner->src[0]->const_int() == 3);
  CHECK(s.root->src[0]->src[0]->src[0]->src[1] == outer * 3 + inner);
}

TEST_CASE("a split then simplified turns r % 4 and r / 4 into the two ranges") {
  const UOpPtr r = make_range(12, 0);
  const UOpPtr e = (r % 4) * 10 + r / 4;
  SplitRanges s = split_ranges(e, {{r, 4, AxisKind::Loop}});
  const auto& [outer, inner] = s.parts.at(0);
  CHECK(simplify(s.root) == simplify(inner * 10 + outer));
}

TEST_CASE("split_ranges refuses a factor that does not divide the end, and a BUFFERIZE axis") {
  const UOpPtr kernel = parse_text(kStore12);
  const UOpPtr r0 = kernel->src[0]->src[1];
  CHECK_THROWS_AS(split_ranges(kernel, {{r0, 5, AxisKind::Loop}}), Error);
  const UOpPtr buf =
      UOp::make(Op::BUFFERIZE, DType::Float32, {cast(r0, DType::Float32), r0}, std::vector<int64_t>{12});
  CHECK_THROWS_AS(split_ranges(buf, {{r0, 4, AxisKind::Loop}}), Error);
}
