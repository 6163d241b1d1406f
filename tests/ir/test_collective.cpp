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

TEST_CASE("a bucket all-reduces its parts as one flat tensor, each part on a 64-byte boundary") {
  const CollectiveArg sum{CollectiveKind::AllReduce, CollectiveReduce::Sum, 0, 2};
  const UOpPtr w = tensor({2, 3}), b = tensor({3}), v = tensor({4, 4});
  const BucketLayout layout = bucket_layout({w, b, v});
  CHECK(layout.offsets == std::vector<int64_t>{0, 16, 32});  // 6 -> 16, 3 -> 16, 16 -> 16 floats
  CHECK(layout.elements == 48);
  const UOpPtr bucket = collective_bucket({w, b, v}, sum);
  CHECK(bucket->src.size() == 3);
  CHECK(*bucket->shape() == Shape{48});
  CHECK(parse_text(to_text(bucket)) == bucket);
  CHECK(collective_bucket({w}, sum) == collective(w, sum));  // one part: a plain all-reduce
  // Only an all-reduce takes several parts, of one dtype.
  CHECK_THROWS_AS(collective_bucket({w, b}, {CollectiveKind::Broadcast, CollectiveReduce::Sum, 0, 2}), Error);
  CHECK_THROWS_AS(UOp::make(Op::COLLECTIVE, DType::Float32, {w, b},
                            collective_ints({CollectiveKind::AllGather, CollectiveReduce::Sum, 0, 2})),
                  Error);
  const UOpPtr ints = UOp::make(Op::BUFFER, DType::Int32, {}, std::vector<int64_t>{2, 5});
  CHECK_THROWS_AS(UOp::make(Op::COLLECTIVE, DType::Float32, {w, ints}, collective_ints(sum)), Error);
  CHECK_THROWS_AS(collective_bucket({}, sum), Error);
}
