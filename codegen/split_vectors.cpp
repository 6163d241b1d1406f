// split_vectors (after lower_reduce): a value wider than a SIMD register is
// computed slice by slice where its slices are used, and a per-lane validity
// that is one bool in every lane becomes that bool.
//
//   Before:  GEP f32x16 (ADD f32x96 (LOAD f32x96 .., VECTORIZE f32x96 (acc0, .., acc11))) [0..15]
//   After:   ADD f32x16 (GEP f32x16 (LOAD ..) [0..15], VECTORIZE f32x16 (acc0, acc1))
//
// A register tile's epilogue (the previous block of k's partial sums, a bias)
// works on the whole tile as one vector (6 x 16 lanes on AVX2), and its stores
// take a row each. LLVM's x86 backend took such a vector apart lane by lane
// (about 70 vinsertps per tile, and spills), and a row's validity broadcast to
// 16 lanes became chains of vpinsrb and masked moves where one scalar test does.
#include "codegen/codegen.hpp"
#include "codegen/vector_ops.hpp"
#include "ir/pattern.hpp"

#include <algorithm>
#include <unordered_set>

namespace loom {

namespace {

struct VectorWidth {
  int bytes;
};

// Wider than one register: the backend splits it anyway, so slices cost no more.
bool wider_than_register(const UOpPtr& v, int bytes) {
  int64_t widest = v->dtype.itemsize();
  for (const auto& s : v->src) widest = std::max<int64_t>(widest, s->dtype.itemsize());
  return v->dtype.lanes * widest > bytes;
}

// One lane repeated: the op on that lane alone, broadcast (a row's validity).
bool one_lane(const std::vector<int64_t>& lanes) {
  return std::all_of(lanes.begin(), lanes.end(), [&](int64_t l) { return l == lanes[0]; });
}

// The values `v` is computed from through vectors (itself, the vectors under it and
// their scalar sources), counted up to `limit`.
size_t vector_values(const UOpPtr& v, size_t limit) {
  std::unordered_set<const UOp*> seen;
  std::vector<const UOp*> todo{v.get()};
  while (!todo.empty() && seen.size() < limit) {
    const UOp* u = todo.back();
    todo.pop_back();
    if (!seen.insert(u).second || u->dtype.lanes == 1) continue;
    for (const UOpPtr& s : u->src) todo.push_back(s.get());
  }
  return seen.size();
}

UOpPtr slice_of(const Match& m) {
  const UOpPtr& g = m.root();
  const UOpPtr& v = g->src.at(0);
  const auto& lanes = g->get<std::vector<int64_t>>();
  if (v->op == Op::VECTORIZE || v->op == Op::GEP ||
      (lane_wise(v) && wider_than_register(v, m.ctx<VectorWidth>().bytes))) {
    const UOpPtr picked = pick(v, lanes);
    return picked == g ? nullptr : picked;
  }
  if (!lane_wise(v) || !one_lane(lanes)) return nullptr;
  // One lane on scalars only where that is no more work than the vector ops it replaces:
  // a row's validity is, the last lane of a fold by halves (every lane of its leaves) is not.
  constexpr size_t kCountLimit = 4096;
  const UOpPtr picked = pick_within(v, lanes, vector_values(v, kCountLimit));
  return picked == nullptr || picked == g ? nullptr : picked;
}

UOpPtr scalar_validity(const Match& m) {
  const UOpPtr& index = m.root();
  if (index->src.size() < 3 || index->src[2]->dtype.lanes == 1) return nullptr;
  const UOpPtr valid = uniform_lane(index->src[2]);
  if (!valid) return nullptr;
  std::vector<UOpPtr> src = index->src;
  src[2] = valid;
  return index->with_src(std::move(src));
}

const PatternMatcher& vector_splits() {
  static const PatternMatcher pm("split_vectors",
                                 {
                                     {UPat::ops({Op::GEP}), slice_of},
                                     {UPat::ops({Op::INDEX}).allow_more_src(), scalar_validity},
                                 });
  return pm;
}

}  // namespace

UOpPtr split_vectors(const UOpPtr& kernel, int vector_bytes) {
  VectorWidth ctx{vector_bytes};
  return graph_rewrite(kernel, vector_splits(), ctx);
}

}  // namespace loom
