#include "ir/buffer_access.hpp"

namespace loom {

size_t index_arity(const UOpPtr& buffer) {
  return buffer->op == Op::BUFFERIZE ? buffer->get<std::vector<int64_t>>().size() : 1;
}

std::vector<UOpPtr> index_of(const UOpPtr& index) {
  const size_t n = index_arity(index->src.at(0));
  return {index->src.begin() + 1, index->src.begin() + 1 + static_cast<std::ptrdiff_t>(n)};
}

UOpPtr valid_of(const UOpPtr& index) {
  return index->src.size() > index_arity(index->src.at(0)) + 1 ? index->src.back() : nullptr;
}

UOpPtr make_index(const UOpPtr& buffer, const std::vector<UOpPtr>& idx, const UOpPtr& valid) {
  std::vector<UOpPtr> src{buffer};
  src.insert(src.end(), idx.begin(), idx.end());
  if (valid) src.push_back(valid);
  const DType dt = buffer->dtype.ptr ? buffer->dtype : buffer->dtype.ptr_to();
  return UOp::make(Op::INDEX, dt, std::move(src));
}

UOpPtr where_valid(const UOpPtr& valid, const UOpPtr& value) {
  return valid ? where(valid, value, const_like(value->dtype, 0)) : value;
}

UOpPtr and_valid(const UOpPtr& a, const UOpPtr& b) { return !a ? b : !b ? a : a == b ? a : land(a, b); }

}  // namespace loom
