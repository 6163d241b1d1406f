#include "schedule/narrow_buffers.hpp"

#include "ir/buffer_access.hpp"

namespace loom {

namespace {

// A float widened exactly to a wider float: every value of `narrow` is one of `wide`.
bool widens(DType narrow, DType wide) {
  return narrow.is_float() && wide.is_float() && narrow.lanes == 1 && wide.lanes == 1 &&
         narrow.itemsize() < wide.itemsize();
}

UOpPtr store_narrow(const Match& m) {
  const UOpPtr &index = m["index"], &buffer = m["buf"], &wide = m["wide"];
  const UOpPtr& narrow = wide->src[0];
  if (!widens(narrow->dtype, wide->dtype)) return nullptr;
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
