// Rangeify and kernel split, checked on what they generate: kernel count,
// loads, stores, reduces, and the buffers each kernel binds.
#include "schedule/kernel_split.hpp"
#include "schedule/rangeify.hpp"
#include "schedule/schedule.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace loom;

namespace {

UOpPtr input(int64_t id, Shape shape, DType dt = DType::Float32) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  UOpPtr buf = UOp::make(Op::BUFFER, dt, {}, std::vector<int64_t>{id, n});
  return shape == Shape{n} ? buf : UOp::make(Op::RESHAPE, dt, {buf}, shape);
}

// A factory that makes storage-less BUFFER nodes: the scheduler never touches memory.
struct FakeBuffers {
  int64_t next = 1000;
  BufferFactory factory() {
    return [this](DType dt, int64_t size) {
      return UOp::make(Op::BUFFER, dt, {}, std::vector<int64_t>{next++, size});
    };
  }
};

size_t count_op(const UOpPtr& root, Op op) {
  auto nodes = toposort(root);
  return static_cast<size_t>(
      std::count_if(nodes.begin(), nodes.end(), [op](const UOpPtr& n) { return n->op == op; }));
}

UOpPtr reduce_axis(const UOpPtr& x, Op op, std::vector<int64_t> axes) {
  return UOp::make(Op::REDUCE_AXIS, x->dtype, {x}, ReduceArg{op, std::move(axes)});
}

}  // namespace

TEST_CASE("(a*b+c).relu().exp() on [1024,1024] is one kernel: 3 loads, 1 store, no intermediate buffer") {
  Shape s{1024, 1024};
  UOpPtr a = input(1, s), b = input(2, s), c = input(3, s);
  UOpPtr zero =
      UOp::make(Op::EXPAND, DType::Float32,
                {UOp::make(Op::RESHAPE, DType::Float32, {const_float(DType::Float32, 0)}, Shape{1, 1})}, s);
  UOpPtr y = alu(Op::EXP2, {umax(a * b + c, zero)});
  FakeBuffers fb;
  Schedule sched = create_schedule({y}, fb.factory());
  REQUIRE(sched.kernels.size() == 1);
  const auto& k = sched.kernels[0];
  CHECK(count_op(k.ast, Op::LOAD) == 3);
  CHECK(count_op(k.ast, Op::STORE) == 1);
  CHECK(k.buffers.size() == 4);  // the output and the three inputs, nothing in between
  CHECK(k.buffers[1] == a->src[0]);
  CHECK(k.buffers[2] == b->src[0]);
  CHECK(k.buffers[3] == c->src[0]);
}

TEST_CASE("x / x.sum() computes the sum once: exactly one REDUCE over N across all kernels") {
  const int64_t n = 4096;
  UOpPtr x = input(1, {n});
  UOpPtr sum = UOp::make(Op::RESHAPE, DType::Float32, {reduce_axis(x, Op::ADD, {0})}, Shape{1});
  UOpPtr y = UOp::make(Op::FDIV, DType::Float32, {x, UOp::make(Op::EXPAND, DType::Float32, {sum}, Shape{n})});
  auto points = realization_points({y});
  CHECK(points.size() == 2);  // the reduce (it is broadcast) and the output
  FakeBuffers fb;
  Schedule sched = create_schedule({y}, fb.factory());
  REQUIRE(sched.kernels.size() == 2);
  size_t reduces = 0;
  for (const auto& k : sched.kernels) {
    reduces += count_op(k.ast, Op::REDUCE);
    for (const auto& node : toposort(k.ast))
      if (node->op == Op::REDUCE) CHECK(node->src[1]->src[0]->const_int() == n);
  }
  CHECK(reduces == 1);
  // The division kernel reads the sum's buffer, made by the first kernel.
  CHECK(sched.kernels[1].buffers.at(2) == sched.kernels[0].buffers.at(0));
}

TEST_CASE("a reduce followed by elementwise ops over the same range fuses into one kernel") {
  UOpPtr x = input(1, {8, 16});
  UOpPtr y = alu(Op::SQRT, {reduce_axis(x, Op::ADD, {1})});
  FakeBuffers fb;
  Schedule sched = create_schedule({y}, fb.factory());
  REQUIRE(sched.kernels.size() == 1);
  CHECK(count_op(sched.kernels[0].ast, Op::REDUCE) == 1);
}

TEST_CASE("the same computation on other buffers is the same kernel") {
  FakeBuffers fb;
  auto build = [&](int64_t id) {
    UOpPtr x = input(id, {6, 4});
    return create_schedule({UOp::make(Op::PERMUTE, DType::Float32, {x}, std::vector<int64_t>{1, 0})},
                           fb.factory());
  };
  Schedule s1 = build(1), s2 = build(2);
  REQUIRE(s1.kernels.size() == 1);
  CHECK(s1.kernels[0].ast == s2.kernels[0].ast);
  CHECK(s1.kernels[0].buffers[1] != s2.kernels[0].buffers[1]);
}

TEST_CASE("CONTIGUOUS and a realized input make buffers; a contiguous view needs no kernel") {
  UOpPtr x = input(1, {4, 4});
  CHECK(is_buffer_view(x));
  UOpPtr c = UOp::make(Op::CONTIGUOUS, DType::Float32,
                       {UOp::make(Op::PERMUTE, DType::Float32, {x}, std::vector<int64_t>{1, 0})});
  UOpPtr y = c * c;
  FakeBuffers fb;
  Schedule sched = create_schedule({y}, fb.factory());
  CHECK(sched.kernels.size() == 2);
  CHECK(count_op(sched.kernels[1].ast, Op::LOAD) == 1);  // c*c loads c once: equal loads are one node
}

TEST_CASE("pad then shrink back to the original: the validity guard simplifies away") {
  UOpPtr x = input(1, {4});
  UOpPtr p = UOp::make(Op::PAD, DType::Float32, {x}, std::vector<int64_t>{1, 1});
  UOpPtr s = UOp::make(Op::SHRINK, DType::Float32, {p}, std::vector<int64_t>{1, 5});
  FakeBuffers fb;
  Schedule sched = create_schedule({s}, fb.factory());
  REQUIRE(sched.kernels.size() == 1);
  CHECK(count_op(sched.kernels[0].ast, Op::WHERE) == 0);
  CHECK(count_op(sched.kernels[0].ast, Op::CMPLT) == 0);
}
