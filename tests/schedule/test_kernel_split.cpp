// Kernel split: buffers per surviving BUFFERIZE, and the order of kernels when
// an assign writes into a buffer other kernels of the schedule read.
#include "schedule/kernel_split.hpp"
#include "schedule/schedule.hpp"
#include "support/graph_builders.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::gb;

namespace {
UOpPtr assign(const UOpPtr& target, const UOpPtr& value) {
  return UOp::make(Op::ASSIGN, value->dtype, {target, value});
}
UOpPtr plus_one(const UOpPtr& x) {
  return x + UOp::make(Op::EXPAND, x->dtype,
                       {UOp::make(Op::RESHAPE, x->dtype, {const_float(x->dtype, 1)}, Shape{1})}, *x->shape());
}
bool reads(const ScheduledKernel& k, const UOpPtr& buffer) {
  return std::find(k.buffers.begin() + 1, k.buffers.end(), buffer) != k.buffers.end();
}
}  // namespace

TEST_CASE("an in-place write runs after every kernel that reads the old value, whatever the target order") {
  const UOpPtr w = input(1, {16});
  const UOpPtr total = reduce_axis(w, Op::ADD, {0});  // a second kernel reading w
  FakeBuffers fb;
  Schedule s = create_schedule({assign(w, plus_one(w)), total}, fb.factory(), {w, nullptr});
  REQUIRE(s.kernels.size() == 2);
  CHECK(s.kernels[0].buffers[0] != w);  // the sum, into a fresh buffer, first
  CHECK(reads(s.kernels[0], w));
  CHECK(s.kernels[1].buffers[0] == w);  // then the write, in place
  CHECK(s.results[0] == w);
}

TEST_CASE("a kernel that needs both the old and the new value sends the write to a fresh buffer") {
  const UOpPtr w = input(1, {16});
  const UOpPtr a = assign(w, plus_one(w));
  const UOpPtr both = a + w;  // new value + old value
  FakeBuffers fb;
  // Two kernels: elementwise_outputs would make them one (the next test).
  const uint64_t off = detail::push_flag_overrides({{"LOOM_DISABLE", "elementwise_outputs"}});
  Schedule s = create_schedule({a, both}, fb.factory(), {w, nullptr});
  detail::pop_flag_overrides(off);
  REQUIRE(s.kernels.size() == 2);
  CHECK(s.kernels[0].buffers[0] != w);
  CHECK(s.kernels[1].buffers[0] != w);
  CHECK(reads(s.kernels[1], w));                        // the old value, untouched
  CHECK(reads(s.kernels[1], s.kernels[0].buffers[0]));  // and the new one
}

TEST_CASE("one kernel storing the new value in place and new + old beside it reads the old value first") {
  const UOpPtr w = input(1, {16});
  const UOpPtr a = assign(w, plus_one(w));
  FakeBuffers fb;
  Schedule s = create_schedule({a, a + w}, fb.factory(), {w, nullptr});
  REQUIRE(s.kernels.size() == 1);  // elementwise_outputs: both over one range
  CHECK(s.kernels[0].outputs == 2);
  CHECK(s.kernels[0].buffers[0] == w);  // in place: the load of w[i] feeds w's own store
  CHECK(s.kernels[0].buffers[1] != w);
  CHECK(s.results[0] == w);
  CHECK(reads_output_only_in_place(s.kernels[0].ast));
}

TEST_CASE("a kernel of two outputs whose second reads the buffer the first overwrites writes a copy") {
  // w.assign(x + 1) and w + 1 (the old w): in one kernel the second value's load of w[i]
  // would come after the first's store of w[i], so the first goes to a fresh buffer.
  const UOpPtr w = input(1, {16}), x = input(2, {16});
  const UOpPtr a = assign(w, plus_one(x));
  FakeBuffers fb;
  Schedule s = create_schedule({a, a * plus_one(w)}, fb.factory(), {w, nullptr});
  REQUIRE(s.kernels.size() == 1);
  CHECK(s.kernels[0].buffers[0] != w);
  CHECK(reads(s.kernels[0], w));
  CHECK(s.results[0] == s.kernels[0].buffers[0]);
}

TEST_CASE("two writes that each read the other's old value: the first in place, the second copied") {
  const UOpPtr a = input(1, {8}), b = input(2, {8});
  FakeBuffers fb;
  Schedule s = create_schedule({assign(a, a - b), assign(b, b + a)}, fb.factory(), {a, b});
  REQUIRE(s.kernels.size() == 2);
  CHECK(s.kernels[0].buffers[0] != b);  // b's new value first, out of place, reading the old a
  CHECK(reads(s.kernels[0], a));
  CHECK(s.kernels[1].buffers[0] == a);  // then a in place
  CHECK(s.results[0] == a);
  CHECK(s.results[1] == s.kernels[0].buffers[0]);
}

TEST_CASE("without a requested buffer, kernels keep dependency order and fresh outputs") {
  const UOpPtr w = input(1, {16});
  FakeBuffers fb;
  Schedule s = create_schedule({assign(w, plus_one(w)), reduce_axis(w, Op::ADD, {0})}, fb.factory());
  REQUIRE(s.kernels.size() == 2);
  CHECK(s.kernels[0].buffers[0] != w);
  CHECK(s.kernels[1].buffers[0] != w);
}

TEST_CASE("a kernel that would write no element is not scheduled; its empty buffer is the result") {
  // loom-fuzz seed 5020515: a batched product over an empty batch axis, permuted. Its
  // empty ranges simplified away, the kernel stored to an address that ignored a loop
  // it sat in, and the expander refused it; the realize threw.
  auto move = [](Op op, const UOpPtr& x, std::vector<int64_t> arg) {
    return UOp::make(op, x->dtype, {x}, std::move(arg));
  };
  const UOpPtr a = move(Op::EXPAND, move(Op::RESHAPE, input(1, {0}), {0, 3, 1, 2}), {0, 3, 26, 2});
  const UOpPtr b =
      move(Op::EXPAND,
           move(Op::RESHAPE, move(Op::PERMUTE, move(Op::RESHAPE, input(2, {0}), {0, 2, 26}), {0, 2, 1}),
                {0, 1, 26, 2}),
           {0, 3, 26, 2});
  const UOpPtr product =
      move(Op::PERMUTE, move(Op::RESHAPE, reduce_axis(a * b, Op::ADD, {3}), {0, 3, 26}), {1, 0, 2});
  const UOpPtr w = input(3, {16});
  FakeBuffers fb;
  Schedule s = create_schedule({product, product, plus_one(w)}, fb.factory());
  REQUIRE(s.kernels.size() == 1);  // only w + 1
  CHECK(reads(s.kernels[0], w));
  REQUIRE(s.results.size() == 3);
  CHECK(*s.results[0]->shape() == Shape{3, 0, 26});
  CHECK(*s.results[1]->shape() == Shape{3, 0, 26});
}
