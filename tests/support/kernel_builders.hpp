#pragma once
// Short builders for hand-written kernel ASTs in tests (docs/kernel-ir.md shapes).
#include "ir/uop.hpp"

#include <vector>

namespace loom::kb {

inline UOpPtr global(int64_t slot, DType elem) {
  return UOp::make(Op::DEFINE_GLOBAL, elem.ptr_to(), {}, slot);
}
inline UOpPtr index(const UOpPtr& buf, const UOpPtr& idx) {
  return UOp::make(Op::INDEX, buf->dtype, {buf, idx});
}
inline UOpPtr index(const UOpPtr& buf, const UOpPtr& idx, const UOpPtr& valid) {
  return UOp::make(Op::INDEX, buf->dtype, {buf, idx, valid});
}
inline UOpPtr load(const UOpPtr& idx) { return UOp::make(Op::LOAD, idx->dtype.base(), {idx}); }
inline UOpPtr store(const UOpPtr& idx, const UOpPtr& value) {
  return UOp::make(Op::STORE, value->dtype, {idx, value});
}
inline UOpPtr end(const UOpPtr& value, std::vector<UOpPtr> ranges) {
  ranges.insert(ranges.begin(), value);
  return UOp::make(Op::END, value->dtype, std::move(ranges));
}
inline UOpPtr reduce(Op op, const UOpPtr& value, std::vector<UOpPtr> ranges) {
  ranges.insert(ranges.begin(), value);
  return UOp::make(Op::REDUCE, value->dtype, std::move(ranges), ReduceArg{op, {}});
}
inline UOpPtr sink(std::vector<UOpPtr> effects) {
  return UOp::make(Op::SINK, DType::Int64, std::move(effects));
}
inline UOpPtr i64(int64_t v) { return const_int(DType::Int64, v); }

}  // namespace loom::kb
