// reduce_unparented: a reduce range the body does not use. ADD -> times N,
// MUL -> to the power N (floats), MAX -> the range dropped.
#include "schedule/reduce_unparented.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <limits>

using namespace loom;
using loom::testing::apply_stage;
using loom::testing::expect;

namespace {
// REDUCE[op](x[r0], r0, r1) with r1 = RANGE(8) unused, stored per nothing (a scalar).
std::string reduce_with_unused(const char* op, const char* dt = "f32") {
  return fmt::format(R"(
%n = CONST i64 [4]
%m = CONST i64 [8]
%r0 = RANGE i64 %n [axis 0 reduce]
%r1 = RANGE i64 %m [axis 1 reduce]
%x = DEFINE_GLOBAL {1}* [1]
%i = INDEX {1}* %x, %r0
%l = LOAD {1} %i
%s = REDUCE {1} %l, %r0, %r1 [reduce {0} ()]
%o = DEFINE_GLOBAL {1}* [0]
%z = CONST i64 [0]
%io = INDEX {1}* %o, %z
%st = STORE {1} %io, %s
%k = SINK bool %st
)",
                     op, dt);
}
std::string reduced(const std::string& tail, const char* op, const char* dt = "f32") {
  return fmt::format(R"(
%n = CONST i64 [4]
%r0 = RANGE i64 %n [axis 0 reduce]
%x = DEFINE_GLOBAL {1}* [1]
%i = INDEX {1}* %x, %r0
%l = LOAD {1} %i
%s = REDUCE {1} %l, %r0 [reduce {0} ()]
{2}
%o = DEFINE_GLOBAL {1}* [0]
%z = CONST i64 [0]
%io = INDEX {1}* %o, %z
%st = STORE {1} %io, %v
%k = SINK bool %st
)",
                     op, dt, tail);
}
}  // namespace

TEST_CASE("ADD over an unused range of 8 is the sum times 8") {
  CHECK(apply_stage(reduce_unparented(), reduce_with_unused("ADD")) ==
        expect(reduced("%eight = CONST f32 [8.0]\n%v = MUL f32 %s, %eight", "ADD")));
  CHECK(apply_stage(reduce_unparented(), reduce_with_unused("ADD", "i32")) ==
        expect(reduced("%eight = CONST i32 [8]\n%v = MUL i32 %s, %eight", "ADD", "i32")));
}

TEST_CASE("MUL over an unused range of 8 is the product to the 8th power; integers are left alone") {
  CHECK(apply_stage(reduce_unparented(), reduce_with_unused("MUL")) ==
        expect(reduced("%eight = CONST f32 [8.0]\n%v = POW f32 %s, %eight", "MUL")));
  CHECK(apply_stage(reduce_unparented(), reduce_with_unused("MUL", "i32")) ==
        expect(reduce_with_unused("MUL", "i32")));
}

TEST_CASE("MAX over an unused range drops it; a reduce over nothing it uses is its body") {
  CHECK(apply_stage(reduce_unparented(), reduce_with_unused("MAX")) ==
        expect(reduced("%v = MAX f32 %s, %s", "MAX")));  // MAX(s, s) simplifies to s
  const UOpPtr r = make_range(5, 3, AxisKind::Reduce);
  const UOpPtr x = const_float(DType::Float32, 2.5);
  const UOpPtr red = UOp::make(Op::REDUCE, DType::Float32, {x, r}, ReduceArg{Op::ADD, {}});
  CHECK(apply_stage(reduce_unparented(), to_text(red)) == const_float(DType::Float32, 12.5));
}

TEST_CASE("a reduce over a range of size 0 is its op's identity, whatever its body reads") {
  // The body may read a buffer of no elements (a [0, 4] input's rows): its value
  // must not reach the result, not even as x * 0, which is NaN for x = inf.
  const UOpPtr r = make_range(0, 5, AxisKind::Reduce);
  const UOpPtr x = const_float(DType::Float32, std::numeric_limits<double>::infinity());
  const auto over_nothing = [&](Op op, DType dt) {
    const UOpPtr body = dt.is_float() ? x : cast(x, dt);
    return apply_stage(reduce_unparented(), to_text(UOp::make(Op::REDUCE, dt, {body, r}, ReduceArg{op, {}})));
  };
  CHECK(over_nothing(Op::ADD, DType::Float32) == const_float(DType::Float32, 0));
  CHECK(over_nothing(Op::MUL, DType::Float32) == const_float(DType::Float32, 1));
  CHECK(over_nothing(Op::MAX, DType::Float32) ==
        const_float(DType::Float32, -std::numeric_limits<double>::infinity()));
  CHECK(over_nothing(Op::MAX, DType::Int32) == const_int(DType::Int32, std::numeric_limits<int32_t>::min()));
  CHECK(over_nothing(Op::MAX, DType::Bool) == const_int(DType::Bool, 0));
}
