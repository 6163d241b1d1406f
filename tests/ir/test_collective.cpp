// COLLECTIVE nodes (ir/collective.hpp): their arg, shapes, validation and text.
#include "ir/collective.hpp"
#include "ir/text.hpp"

#include <doctest/doctest.h>

using namespace loom;

namespace {
UOpPtr tensor(Shape shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const UOpPtr buf = UOp::make(Op::BUFFER, DType::Float32, {}, std::vector<int64_t>{1, n});
  return UOp::make(Op::RESHAPE, DType::Float32, {buf}, shape);
}
}  // namespace

TEST_CASE("a COLLECTIVE keeps its arg, and all_gather and reduce_scatter their rows axis") {
  const UOpPtr x = tensor({3, 4});
  const CollectiveArg sum{CollectiveKind::AllReduce, CollectiveReduce::Sum, 0, 2};
  const UOpPtr r = collective(x, sum);
  CHECK(collective_arg(*r) == sum);
  CHECK(*r->shape() == Shape{3, 4});
  CHECK(*collective(x, {CollectiveKind::AllGather, CollectiveReduce::Sum, 0, 3})->shape() == Shape{3, 3, 4});
  CHECK(*collective(x, {CollectiveKind::ReduceScatter, CollectiveReduce::Sum, 0, 3})->shape() == Shape{4});
  CHECK(collective_name({CollectiveKind::Broadcast, CollectiveReduce::Sum, 1, 2}) == "broadcast(root 1)");
  CHECK(collective_block({CollectiveKind::AllGather, CollectiveReduce::Sum, 0, 3}, 36) == 12);
  CHECK(collective_block(sum, 12) == 12);
}

TEST_CASE("a COLLECTIVE prints and parses back to the same node") {
  const UOpPtr g =
      collective(collective(tensor({2, 5}), {CollectiveKind::AllGather, CollectiveReduce::Sum, 0, 2}),
                 {CollectiveKind::Broadcast, CollectiveReduce::Sum, 1, 2});
  CHECK(parse_text(to_text(g)) == g);
}

TEST_CASE("a COLLECTIVE with a bad arg, or a reduce_scatter without a row per rank, is rejected") {
  const UOpPtr x = tensor({3, 4});
  CHECK_THROWS_AS(UOp::make(Op::COLLECTIVE, DType::Float32, {x}, std::vector<int64_t>{0, 0, 0}), Error);
  CHECK_THROWS_AS(UOp::make(Op::COLLECTIVE, DType::Float32, {x}, std::vector<int64_t>{7, 0, 0, 2}), Error);
  CHECK_THROWS_AS(UOp::make(Op::COLLECTIVE, DType::Float32, {x}, std::vector<int64_t>{0, 0, 0, 0}), Error);
  CHECK_THROWS_AS(collective(x, {CollectiveKind::ReduceScatter, CollectiveReduce::Sum, 0, 2}), Error);
  CHECK_THROWS_AS(UOp::make(Op::COLLECTIVE, DType::Int32, {x}, collective_ints({})), Error);
  CHECK_THROWS_AS(collective_arg(*x), Error);
}
