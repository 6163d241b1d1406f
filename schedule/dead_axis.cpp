#include "schedule/dead_axis.hpp"

#include "ir/buffer_access.hpp"

namespace loom {

namespace {

UOpPtr drop_dead_axes(const Match& m) {
  const UOpPtr &index = m.root(), &buffer = m["buf"];
  const UOpPtr& value = buffer->src[0];
  if (value->op == Op::CONTIGUOUS) return nullptr;
  const auto& shape = buffer->get<Shape>();
  const std::vector<UOpPtr> idx = index_of(index);
  std::vector<UOpPtr> src{value}, kept_idx;
  Shape kept_shape;
  for (size_t i = 0; i < shape.size(); ++i) {
    const UOpPtr& axis = buffer->src[i + 1];
    // An axis of size 0 stays, dead or not: it makes the buffer empty. Without it
    // the buffer would compute elements that do not exist, reading its empty inputs.
    const bool live = value->ranges().contains(axis) || shape[i] == 0;
    if (axis->op != Op::RANGE || !live) continue;
    src.push_back(axis);
    kept_idx.push_back(idx[i]);
    kept_shape.push_back(shape[i]);
  }
  if (kept_shape.size() == shape.size()) return nullptr;
  const UOpPtr smaller = UOp::make(Op::BUFFERIZE, buffer->dtype, std::move(src), std::move(kept_shape));
  return make_index(smaller, kept_idx, valid_of(index));
}

}  // namespace

const PatternMatcher& dead_axis() {
  static const PatternMatcher pm(
      "dead_axis",
      {{UPat::op(Op::INDEX, {UPat::op(Op::BUFFERIZE, {UPat()}, "buf").allow_more_src()}).allow_more_src(),
        drop_dead_axes}});
  return pm;
}

}  // namespace loom
