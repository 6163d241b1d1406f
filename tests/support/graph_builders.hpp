#pragma once
// Short builders for tensor-level graphs in scheduler tests: input buffers
// without memory, a buffer factory, and node counts.
#include "schedule/schedule.hpp"

#include <algorithm>

namespace loom::gb {

inline UOpPtr input(int64_t id, Shape shape, DType dt = DType::Float32) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  UOpPtr buf = UOp::make(Op::BUFFER, dt, {}, std::vector<int64_t>{id, n});
  return shape == Shape{n} ? buf : UOp::make(Op::RESHAPE, dt, {buf}, shape);
}

// A factory that makes storage-less BUFFER nodes: the scheduler never touches memory.
struct FakeBuffers {
  int64_t next = 1000;
  BufferFactory factory() {
    return [this](DType dt, const Dim& size) {
      return UOp::make(Op::BUFFER, dt, {}, std::vector<int64_t>{next++, size.max()});
    };
  }
};

inline size_t count_op(const UOpPtr& root, Op op) {
  auto nodes = toposort(root);
  return static_cast<size_t>(
      std::count_if(nodes.begin(), nodes.end(), [op](const UOpPtr& n) { return n->op == op; }));
}

inline UOpPtr reduce_axis(const UOpPtr& x, Op op, std::vector<int64_t> axes) {
  return UOp::make(Op::REDUCE_AXIS, x->dtype, {x}, ReduceArg{op, std::move(axes)});
}

}  // namespace loom::gb
