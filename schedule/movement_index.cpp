#include "schedule/movement_index.hpp"

#include "ir/symbolic.hpp"

namespace loom {

namespace {

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
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

SourceIndex pad_index(const std::vector<UOpPtr>& idx, const Shape& in, const std::vector<int64_t>& bounds) {
  SourceIndex out{idx, nullptr};
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t lo = bounds[2 * i], hi = bounds[2 * i + 1];
    if (lo == 0 && hi == 0) continue;
    out.idx[i] = idx[i] - lo;
    const UOpPtr here = land(const_i64(lo - 1) < idx[i], idx[i] < lo + in[i]);
    out.inside = out.inside ? land(out.inside, here) : here;
  }
  return out;
}

}  // namespace

UOpPtr linear_index(const std::vector<UOpPtr>& idx, const Shape& shape) {
  UOpPtr lin = const_i64(0);
  int64_t stride = 1;
  for (size_t i = idx.size(); i-- > 0;) {
    if (shape[i] != 1) lin = idx[i] * stride + lin;
    stride *= shape[i];
  }
  return lin;
}

SourceIndex movement_source_index(const UOpPtr& op, const std::vector<UOpPtr>& idx) {
  const Shape& in = *op->src.at(0)->shape();
  const auto& arg = op->get<std::vector<int64_t>>();
  SourceIndex out{idx, nullptr};
  switch (op->op) {
    case Op::RESHAPE: out.idx = reshape_index(idx, *op->shape(), in); break;
    case Op::PERMUTE:
      for (size_t i = 0; i < arg.size(); ++i) out.idx[arg[i]] = idx[i];
      break;
    case Op::EXPAND:
      for (size_t i = 0; i < in.size(); ++i)
        if (in[i] == 1) out.idx[i] = const_i64(0);
      break;
    case Op::FLIP:
      for (int64_t a : arg) out.idx[a] = const_i64(in[a] - 1) - idx[a];
      break;
    case Op::SHRINK:
      for (size_t i = 0; i < in.size(); ++i)
        if (arg[2 * i]) out.idx[i] = idx[i] + arg[2 * i];
      break;
    case Op::PAD: return pad_index(idx, in, arg);
    default: throw Error("movement_source_index: " + std::string(op_name(op->op)) + " is not a movement op");
  }
  return out;
}

}  // namespace loom
