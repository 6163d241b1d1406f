#include "schedule/row_padding.hpp"

#include "ir/symbolic.hpp"
#include "schedule/stage.hpp"

#include <algorithm>

namespace loom {

namespace {

// The elements that pad a row of `buf` (one line), or 0: the buffer keeps its layout.
int64_t row_padding_of(const UOpPtr& buf, const Target& target) {
  const Shape& shape = buf->get<Shape>();
  const bool guarded = buf->src.size() > shape.size() + 1;
  if (shape.size() < 2 || guarded || is_symbolic(shape)) return 0;
  const int64_t itemsize = buf->dtype.itemsize(), row = shape.back().value();
  const int64_t set_stride = target.l1d_sets() * target.line_bytes;
  if (row * itemsize % set_stride != 0 || target.line_bytes % itemsize != 0) return 0;
  if (element_count(shape) <= row) return 0;  // one row
  return target.line_bytes / itemsize;
}

UOpPtr pad_rows(const Match& m) {
  const UOpPtr& sink = m.root();
  const Target& target = m.ctx<StageContext>().target;
  std::vector<std::pair<UOpPtr, UOpPtr>> padded;
  for (const auto& u : toposort(sink)) {
    if (u->op != Op::BUFFERIZE || std::find(sink->src.begin(), sink->src.end(), u) != sink->src.end())
      continue;
    const int64_t pad = row_padding_of(u, target);
    if (pad == 0) continue;
    Shape shape = u->get<Shape>();
    shape.back() = shape.back().value() + pad;
    padded.emplace_back(u, UOp::make(Op::BUFFERIZE, u->dtype, u->src, std::move(shape)));
  }
  return padded.empty() ? nullptr : substitute(sink, padded);
}

}  // namespace

const PatternMatcher& row_padding() {
  static const PatternMatcher pm("row_padding", {{UPat::ops({Op::SINK}), pad_rows}});
  return pm;
}

}  // namespace loom
