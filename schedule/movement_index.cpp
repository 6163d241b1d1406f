#include "schedule/movement_index.hpp"

#include "ir/dim_expr.hpp"
#include "ir/symbolic.hpp"

namespace loom {

namespace {

Shape strides_of(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// reshape: the linear index in the output shape, unravelled in the input shape.
// Simplified here, so consumers that read a value through equal views agree
// on one index (and rangeify fuses them) even when the views were built apart.
std::vector<UOpPtr> reshape_index(const std::vector<UOpPtr>& idx, const Shape& out, const Shape& in) {
  const UOpPtr lin = linear_index(idx, out);
  const auto st = strides_of(in);
  std::vector<UOpPtr> src_idx;
  for (size_t j = 0; j < in.size(); ++j) {
    if (in[j] == 1)
      src_idx.push_back(const_i64(0));
    else if (j == 0)
      src_idx.push_back(simplify(lin / st[0]));
    else
      src_idx.push_back(simplify((lin / st[j]) % in[j]));
  }
  return src_idx;
}

SourceIndex pad_index(const std::vector<UOpPtr>& idx, const Shape& in, const Shape& bounds) {
  SourceIndex out{idx, nullptr};
  for (size_t i = 0; i < in.size(); ++i) {
    const Dim &lo = bounds[2 * i], &hi = bounds[2 * i + 1];
    if (lo == 0 && hi == 0) continue;
    out.idx[i] = idx[i] - lo;
    const UOpPtr here = land(dim_uop(lo - 1) < idx[i], idx[i] < lo + in[i]);
    out.inside = out.inside ? land(out.inside, here) : here;
  }
  return out;
}

}  // namespace

UOpPtr linear_index(const std::vector<UOpPtr>& idx, const Shape& shape) {
  UOpPtr lin = const_i64(0);
  Dim stride = 1;
  for (size_t i = idx.size(); i-- > 0;) {
    if (shape[i] != 1) lin = idx[i] * stride + lin;
    stride *= shape[i];
  }
  return lin;
}

SourceIndex movement_source_index(const UOpPtr& op, const std::vector<UOpPtr>& idx) {
  const Shape& in = *op->src.at(0)->shape();
  SourceIndex out{idx, nullptr};
  switch (op->op) {
    case Op::RESHAPE: out.idx = reshape_index(idx, *op->shape(), in); break;
    case Op::PERMUTE: {
      const auto& order = op->get<std::vector<int64_t>>();
      for (size_t i = 0; i < order.size(); ++i) out.idx[order[i]] = idx[i];
      break;
    }
    case Op::EXPAND:
      for (size_t i = 0; i < in.size(); ++i)
        if (in[i] == 1) out.idx[i] = const_i64(0);
      break;
    case Op::FLIP:
      for (int64_t a : op->get<std::vector<int64_t>>()) out.idx[a] = dim_uop(in[a] - 1) - idx[a];
      break;
    case Op::SHRINK: {
      const Shape& bounds = op->get<Shape>();
      for (size_t i = 0; i < in.size(); ++i)
        if (bounds[2 * i] != 0) out.idx[i] = idx[i] + bounds[2 * i];
      break;
    }
    case Op::PAD: return pad_index(idx, in, op->get<Shape>());
    default: throw Error("movement_source_index: " + std::string(op_name(op->op)) + " is not a movement op");
  }
  return out;
}

}  // namespace loom
