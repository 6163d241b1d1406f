#include "codegen/vector_ops.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace loom {

UOpPtr broadcast(const UOpPtr& x, int lanes) {
  if (lanes == 1) return x;
  return UOp::make(Op::VECTORIZE, x->dtype.vec(lanes), std::vector<UOpPtr>(static_cast<size_t>(lanes), x));
}

UOpPtr gep(const UOpPtr& v, std::vector<int64_t> lanes) {
  const DType dt = v->dtype.base().vec(static_cast<int>(lanes.size()));
  return UOp::make(Op::GEP, dt, {v}, std::move(lanes));
}

namespace {

// pick's results within one call: a lane-wise tree is a DAG (exp's polynomial, a row's
// reduces fused into their reader), and walking it without a memo is exponential in depth.
struct PickKey {
  const UOp* v;
  std::vector<int64_t> lanes;
  bool operator==(const PickKey&) const = default;
};
struct PickKeyHash {
  size_t operator()(const PickKey& k) const {
    size_t h = std::hash<const void*>{}(k.v);
    for (int64_t l : k.lanes) h = h * 1000003u ^ std::hash<int64_t>{}(l);
    return h;
  }
};
struct PickMemo {
  std::unordered_map<PickKey, UOpPtr, PickKeyHash> picked;
  size_t budget = std::numeric_limits<size_t>::max();  // the picks it may make
  bool over_budget = false;
};

UOpPtr pick_in(const UOpPtr& v, const std::vector<int64_t>& lanes, PickMemo& memo);

// Lanes `lanes` of a VECTORIZE: from one source, from scalars, or whole sources in
// their order (a register-wide accumulator's slices); null otherwise.
UOpPtr pick_vectorized(const UOpPtr& v, const std::vector<int64_t>& lanes, PickMemo& memo) {
  std::vector<std::pair<size_t, int64_t>> at;  // each lane of v: its source and its lane there
  for (size_t s = 0; s < v->src.size(); ++s)
    for (int64_t l = 0; l < static_cast<int64_t>(v->src[s]->dtype.lanes); ++l) at.emplace_back(s, l);
  const size_t first = at.at(static_cast<size_t>(lanes.at(0))).first;
  bool one_source = true, scalars = true;
  std::vector<int64_t> within;
  std::vector<UOpPtr> picked;
  for (int64_t l : lanes) {
    const auto [s, sl] = at.at(static_cast<size_t>(l));
    one_source &= s == first;
    scalars &= v->src[s]->dtype.lanes == 1;
    within.push_back(sl);
    picked.push_back(v->src[s]);
  }
  if (one_source) return pick_in(v->src[first], within, memo);
  if (scalars) return UOp::make(Op::VECTORIZE, v->dtype.base().vec(static_cast<int>(lanes.size())), picked);
  std::vector<UOpPtr> whole;  // each source's lanes 0 .. n-1, in a row
  for (size_t i = 0; i < lanes.size(); i += static_cast<size_t>(picked[i]->dtype.lanes)) {
    for (int64_t l = 0; l < picked[i]->dtype.lanes; ++l)
      if (i + static_cast<size_t>(l) >= lanes.size() || within[i + static_cast<size_t>(l)] != l ||
          picked[i + static_cast<size_t>(l)] != picked[i])
        return nullptr;
    whole.push_back(picked[i]);
  }
  return UOp::make(Op::VECTORIZE, v->dtype.base().vec(static_cast<int>(lanes.size())), whole);
}

}  // namespace

UOpPtr uniform_lane(const UOpPtr& v) {
  if (v->dtype.lanes == 1) return v;
  if (v->op != Op::VECTORIZE) return nullptr;
  for (const auto& s : v->src)
    if (s != v->src[0] || s->dtype.lanes != 1) return nullptr;
  return v->src[0];
}

bool lane_wise(const UOpPtr& v) {
  if (!is_alu(v->op) && v->op != Op::CAST) return false;
  return std::all_of(v->src.begin(), v->src.end(),
                     [&](const UOpPtr& s) { return s->dtype.lanes == v->dtype.lanes; });
}

namespace {

UOpPtr pick_uncached(const UOpPtr& v, const std::vector<int64_t>& lanes, PickMemo& memo) {
  const int n = static_cast<int>(lanes.size());
  bool identity = n == static_cast<int>(v->dtype.lanes);
  for (int i = 0; identity && i < n; ++i) identity = lanes[static_cast<size_t>(i)] == i;
  if (identity) return v;
  if (v->dtype.lanes == 1) return broadcast(v, n);  // every lane is the scalar
  if (v->op == Op::VECTORIZE)
    if (UOpPtr p = pick_vectorized(v, lanes, memo)) return p;
  if (v->op == Op::GEP) {
    const auto& inner = v->get<std::vector<int64_t>>();
    std::vector<int64_t> through;
    for (int64_t l : lanes) through.push_back(inner.at(static_cast<size_t>(l)));
    return pick_in(v->src[0], through, memo);
  }
  if (v->dtype.lanes > 1 && lane_wise(v)) {
    std::vector<UOpPtr> src, scalars;
    for (const auto& s : v->src) {
      src.push_back(pick_in(s, lanes, memo));
      if (const UOpPtr x = uniform_lane(src.back())) scalars.push_back(x);
    }
    // Every picked source the same in all its lanes (a row's index, its validity): the op
    // once on scalars, broadcast.
    if (scalars.size() == src.size())
      return broadcast(UOp::make(v->op, v->dtype.base(), std::move(scalars), v->arg), n);
    return UOp::make(v->op, v->dtype.base().vec(n), std::move(src), v->arg);
  }
  return gep(v, lanes);
}

UOpPtr pick_in(const UOpPtr& v, const std::vector<int64_t>& lanes, PickMemo& memo) {
  PickKey key{v.get(), lanes};
  if (auto it = memo.picked.find(key); it != memo.picked.end()) return it->second;
  if (memo.over_budget || memo.picked.size() >= memo.budget) {
    memo.over_budget = true;
    return v;  // a stand-in: the caller discards the result
  }
  UOpPtr out = pick_uncached(v, lanes, memo);
  memo.picked.emplace(std::move(key), out);
  return out;
}

}  // namespace

UOpPtr pick(const UOpPtr& v, const std::vector<int64_t>& lanes) {
  PickMemo memo;
  return pick_in(v, lanes, memo);
}

UOpPtr pick_within(const UOpPtr& v, const std::vector<int64_t>& lanes, size_t budget) {
  PickMemo memo;
  memo.budget = budget;
  const UOpPtr out = pick_in(v, lanes, memo);
  return memo.over_budget ? nullptr : out;
}

UOpPtr vconst(DType dt, double v) { return broadcast(const_like(dt.base(), v), dt.lanes); }

UOpPtr reduce_identity(Op op, DType dt) {
  const DType s = dt.base();
  switch (op) {
    case Op::ADD: return vconst(dt, 0);
    case Op::MUL: return vconst(dt, 1);
    case Op::MAX:
      if (s.is_float()) return vconst(dt, -std::numeric_limits<double>::infinity());
      if (s.is_unsigned()) return vconst(dt, 0);
      return broadcast(const_int(s, s.scalar == Scalar::Int32 ? std::numeric_limits<int32_t>::min()
                                                              : std::numeric_limits<int64_t>::min()),
                       dt.lanes);
    default:
      throw Error(
          fmt::format("REDUCE {}: the op must be ADD, MUL or MAX, got {}", to_string(dt), op_name(op)));
  }
}

PairLanes pair_lanes(int64_t pairs) {
  PairLanes out;
  for (int64_t l = 0; l < pairs; ++l) out.odd.push_back(2 * l + 1), out.even.push_back(2 * l);
  return out;
}

}  // namespace loom
