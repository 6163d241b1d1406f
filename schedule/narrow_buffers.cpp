#include "schedule/narrow_buffers.hpp"

#include "ir/buffer_access.hpp"
#include "ir/widening.hpp"

namespace loom {

namespace {

UOpPtr store_narrow(const Match& m) {
  const UOpPtr &index = m["index"], &buffer = m["buf"], &wide = m["wide"];
  const UOpPtr& narrow = wide->src[0];
  if (!is_exact_widening(*wide)) return nullptr;
  std::vector<UOpPtr> src = buffer->src;
  src[0] = narrow;
  const UOpPtr smaller = UOp::make(Op::BUFFERIZE, narrow->dtype, std::move(src), buffer->arg);
  const UOpPtr read = make_index(smaller, index_of(index), valid_of(index));
  return UOp::make(Op::CAST, wide->dtype, {UOp::make(Op::LOAD, narrow->dtype, {read})});
}

}  // namespace

const PatternMatcher& narrow_buffers() {
  static const PatternMatcher pm(
      "narrow_buffers",
      {{UPat::op(Op::LOAD,
                 {UPat::op(Op::INDEX,
                           {UPat::op(Op::BUFFERIZE, {UPat::ops({Op::CAST}, "wide")}, "buf").allow_more_src()},
                           "index")
                      .allow_more_src()}),
        store_narrow}});
  return pm;
}

}  // namespace loom
