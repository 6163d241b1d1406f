#include "ir/buffer_access.hpp"

#include "ir/dim_expr.hpp"

#include "ir/range_split.hpp"
#include "ir/symbolic.hpp"

#include <unordered_set>

namespace loom {

size_t index_arity(const UOpPtr& buffer) {
  return buffer->op == Op::BUFFERIZE ? buffer->get<Shape>().size() : 1;
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

UOpPtr inline_at(const UOpPtr& buffer, const UOpPtr& index) {
  const std::vector<UOpPtr> idx = index_of(index);
  std::vector<std::pair<UOpPtr, UOpPtr>> subs;
  for (size_t i = 0; i < idx.size(); ++i)
    if (buffer->src[i + 1]->op == Op::RANGE) subs.emplace_back(buffer->src[i + 1], idx[i]);
  const UOpPtr valid = valid_of(index);
  const UOpPtr& value = buffer->src[0]->op == Op::CONTIGUOUS ? buffer->src[0]->src[0] : buffer->src[0];
  return where_valid(valid, substitute_ranges(value, subs, valid));
}

UOpPtr and_valid(const UOpPtr& a, const UOpPtr& b) { return !a ? b : !b ? a : a == b ? a : land(a, b); }

UOpPtr linear_address(const UOpPtr& index) {
  const UOpPtr& buffer = index->src.at(0);
  if (buffer->op != Op::BUFFERIZE) return index->src.at(1);
  const auto& shape = buffer->get<Shape>();
  const std::vector<UOpPtr> idx = index_of(index);
  UOpPtr address = const_int(DType::Int64, 0);
  for (size_t d = 0; d < shape.size(); ++d) address = address * shape[d] + idx[d];
  return address;
}

std::optional<int64_t> address_stride(const UOpPtr& index, const UOpPtr& range) {
  return linear_stride(linear_address(index), range);
}

std::optional<int64_t> linear_stride(const UOpPtr& idx, const UOpPtr& range) {
  if (!reaches(idx, range)) return 0;
  const UOpPtr step = simplify(substitute(idx, {{range, range + 1}}) - idx);
  if (!step->is_const()) return std::nullopt;
  return step->const_int();
}

std::vector<UOpPtr> own_nodes(const UOpPtr& value) {
  std::vector<UOpPtr> out, stack{value};
  std::unordered_set<const UOp*> seen;
  while (!stack.empty()) {
    const UOpPtr u = stack.back();
    stack.pop_back();
    if (!seen.insert(u.get()).second) continue;
    out.push_back(u);
    if (u->op != Op::BUFFERIZE) stack.insert(stack.end(), u->src.begin(), u->src.end());
  }
  return out;
}

}  // namespace loom
