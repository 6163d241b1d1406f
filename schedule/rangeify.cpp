#include "schedule/rangeify.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace loom {

namespace {

int64_t numel(const Shape& s) { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); }

UOpPtr idx_const(int64_t v) { return const_int(DType::Int64, v); }

// Row-major strides of a shape.
std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

UOpPtr linear_index(const std::vector<UOpPtr>& idx, const Shape& shape) {
  auto st = strides_of(shape);
  UOpPtr lin = idx_const(0);
  for (size_t i = 0; i < idx.size(); ++i)
    if (shape[i] != 1) lin = lin + idx[i] * st[i];
  return lin;
}

UOpPtr and_valid(const UOpPtr& a, const UOpPtr& b) { return a ? land(a, b) : b; }

}  // namespace

std::vector<UOpPtr> realization_points(const std::vector<UOpPtr>& targets) {
  std::unordered_set<const UOp*> targets_set;
  for (const auto& t : targets) targets_set.insert(t.get());
  auto is_point = [&](const UOp* u) {
    return targets_set.count(u) || u->op == Op::CONTIGUOUS || u->op == Op::ASSIGN;
  };

  // Walk (node, under_expand) pairs from every target; a realization point
  // starts a fresh kernel, so the flag resets below it.
  std::unordered_set<const UOp*> reduce_points;
  std::set<std::pair<const UOp*, bool>> seen;
  std::vector<std::pair<const UOp*, bool>> stack;
  for (const auto& t : targets) stack.emplace_back(t.get(), false);
  while (!stack.empty()) {
    auto [u, expanded] = stack.back();
    stack.pop_back();
    if (!seen.insert({u, expanded}).second) continue;
    if (u->op == Op::REDUCE_AXIS && expanded) reduce_points.insert(u);
    bool below = expanded && !is_point(u) && !reduce_points.count(u);
    if (u->op == Op::EXPAND && numel(*u->shape()) > numel(*u->src[0]->shape())) below = true;
    if (u->op == Op::BUFFER) continue;
    for (const auto& s : u->src) stack.emplace_back(s.get(), below);
  }
  std::vector<UOpPtr> out;
  for (const auto& n : toposort(targets))
    if (is_point(n.get()) || reduce_points.count(n.get())) out.push_back(n);
  return out;
}

namespace {

struct Rangeifier {
  std::unordered_set<const UOp*> points;
  std::unordered_map<const UOp*, UOpPtr> bufferized;
  int64_t next_axis = 0;

  struct Key {
    std::vector<UOpPtr> parts;  // node, indices..., valid (held: keys are compared by address)
    bool operator==(const Key& o) const { return parts == o.parts; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      size_t h = 0;
      for (const auto& p : k.parts) h = h * 1000003u ^ std::hash<const UOp*>()(p.get());
      return h;
    }
  };
  std::unordered_map<Key, UOpPtr, KeyHash> memo;

  UOpPtr bufferize(const UOpPtr& point) {
    if (auto it = bufferized.find(point.get()); it != bufferized.end()) return it->second;
    const Shape& shape = *point->shape();
    std::vector<UOpPtr> idx;
    for (int64_t n : shape) idx.push_back(n == 1 ? idx_const(0) : make_range(n, next_axis++, AxisKind::Loop));
    UOpPtr value = point->op == Op::CONTIGUOUS ? at(point->src[0], idx, nullptr)
                   : point->op == Op::ASSIGN   ? at(point->src[1], idx, nullptr)
                                               : compute(point, idx, nullptr);
    std::vector<UOpPtr> src{value};
    src.insert(src.end(), idx.begin(), idx.end());
    UOpPtr b = UOp::make(Op::BUFFERIZE, point->dtype, std::move(src), std::vector<int64_t>(shape));
    bufferized[point.get()] = b;
    return b;
  }

  // The value of tensor-level `u` at `idx`, needed only where `valid` holds.
  UOpPtr at(const UOpPtr& u, const std::vector<UOpPtr>& idx, const UOpPtr& valid) {
    if (points.count(u.get())) return read(bufferize(u), idx, valid);
    Key key{{u}};
    key.parts.insert(key.parts.end(), idx.begin(), idx.end());
    key.parts.push_back(valid);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    UOpPtr v = compute(u, idx, valid);
    memo.emplace(std::move(key), v);
    return v;
  }

  static UOpPtr read(const UOpPtr& source, std::vector<UOpPtr> idx, const UOpPtr& valid) {
    std::vector<UOpPtr> src{source};
    src.insert(src.end(), idx.begin(), idx.end());
    if (valid) src.push_back(valid);
    UOpPtr index = UOp::make(Op::INDEX, source->dtype.ptr_to(), std::move(src));
    return UOp::make(Op::LOAD, source->dtype, {index});
  }

  UOpPtr compute(const UOpPtr& u, const std::vector<UOpPtr>& idx, const UOpPtr& valid) {
    const Shape in = u->src.empty() ? Shape{} : u->src[0]->shape().value_or(Shape{});
    switch (u->op) {
    case Op::BUFFER: return read(u, idx, valid);
    case Op::CONST:
    case Op::DEFINE_VAR: return u;
    case Op::IOTA: return cast(idx[0], u->dtype);
    case Op::RESHAPE: return at(u->src[0], reshape_index(idx, *u->shape(), in), valid);
    case Op::PERMUTE: {
      std::vector<UOpPtr> src_idx(idx.size());
      const auto& order = u->get<std::vector<int64_t>>();
      for (size_t i = 0; i < order.size(); ++i) src_idx[order[i]] = idx[i];
      return at(u->src[0], src_idx, valid);
    }
    case Op::EXPAND: {
      std::vector<UOpPtr> src_idx(idx);
      for (size_t i = 0; i < in.size(); ++i)
        if (in[i] == 1) src_idx[i] = idx_const(0);
      return at(u->src[0], src_idx, valid);
    }
    case Op::SHRINK:
    case Op::PAD:
    case Op::FLIP: return offset_op(u, idx, valid, in);
    case Op::REDUCE_AXIS: return reduce(u, idx, valid, in);
    case Op::CONTIGUOUS:
    case Op::DETACH:
    case Op::COPY: return at(u->src[0], idx, valid);
    case Op::ASSIGN: return at(u->src[1], idx, valid);  // ASSIGN(target, value) has value's value
    default: break;
    }
    if (is_alu(u->op) || u->op == Op::CAST || u->op == Op::BITCAST) {
      std::vector<UOpPtr> src;
      for (const auto& s : u->src) src.push_back(at(s, idx, valid));
      return UOp::make(u->op, u->dtype, std::move(src), u->arg);
    }
    throw Error("rangeify: cannot index " + std::string(op_name(u->op)) + " (no rule for this op)");
  }

  // reshape: the linear index in the output shape, unravelled in the input shape.
  static std::vector<UOpPtr> reshape_index(const std::vector<UOpPtr>& idx, const Shape& out, const Shape& in) {
    UOpPtr lin = linear_index(idx, out);
    auto st = strides_of(in);
    std::vector<UOpPtr> src_idx;
    for (size_t j = 0; j < in.size(); ++j) {
      if (in[j] == 1) src_idx.push_back(idx_const(0));
      else if (j == 0) src_idx.push_back(lin / st[0]);
      else src_idx.push_back((lin / st[j]) % in[j]);
    }
    return src_idx;
  }

  UOpPtr offset_op(const UOpPtr& u, const std::vector<UOpPtr>& idx, const UOpPtr& valid, const Shape& in) {
    std::vector<UOpPtr> src_idx(idx);
    if (u->op == Op::FLIP) {
      for (int64_t a : u->get<std::vector<int64_t>>()) src_idx[a] = idx_const(in[a] - 1) - idx[a];
      return at(u->src[0], src_idx, valid);
    }
    const auto& b = u->get<std::vector<int64_t>>();
    if (u->op == Op::SHRINK) {
      for (size_t i = 0; i < in.size(); ++i)
        if (b[2 * i]) src_idx[i] = idx[i] + b[2 * i];
      return at(u->src[0], src_idx, valid);
    }
    UOpPtr inside;  // PAD: the source is read only inside its bounds; outside is 0
    for (size_t i = 0; i < in.size(); ++i) {
      const int64_t lo = b[2 * i], hi = b[2 * i + 1];
      if (lo == 0 && hi == 0) continue;
      src_idx[i] = idx[i] - lo;
      UOpPtr cond = land(idx_const(lo - 1) < idx[i], idx[i] < lo + in[i]);
      inside = and_valid(inside, cond);
    }
    if (!inside) return at(u->src[0], src_idx, valid);
    return where(inside, at(u->src[0], src_idx, and_valid(valid, inside)), const_like(u->dtype, 0));
  }

  UOpPtr reduce(const UOpPtr& u, const std::vector<UOpPtr>& idx, const UOpPtr& valid, const Shape& in) {
    const auto& ra = u->get<ReduceArg>();
    std::vector<UOpPtr> src_idx(idx), ranges;
    for (int64_t a : ra.axes) {
      if (in[a] == 1) continue;  // the output index there is already 0
      UOpPtr r = make_range(in[a], next_axis++, AxisKind::Reduce);
      src_idx[a] = r;
      ranges.push_back(r);
    }
    UOpPtr body = at(u->src[0], src_idx, valid);
    if (ranges.empty()) return body;
    std::vector<UOpPtr> src{body};
    src.insert(src.end(), ranges.begin(), ranges.end());
    return UOp::make(Op::REDUCE, u->dtype, std::move(src), ReduceArg{ra.op, {}});
  }
};

}  // namespace

UOpPtr rangeify(const std::vector<UOpPtr>& targets) {
  Rangeifier rf;
  for (const auto& p : realization_points(targets)) rf.points.insert(p.get());
  std::vector<UOpPtr> roots;
  for (const auto& t : targets) roots.push_back(rf.bufferize(t));
  return UOp::make(Op::SINK, DType::Bool, std::move(roots));
}

}  // namespace loom
