#pragma once
// Builders for the vector ops of docs/kernel-ir.md: a scalar repeated over
// lanes, lanes picked from a vector, a constant of any lane count.
#include "ir/uop.hpp"

#include <cstddef>
#include <vector>

namespace loom {

// VECTORIZE(x, x, ..., x) of `lanes` lanes; `x` itself when lanes == 1.
UOpPtr broadcast(const UOpPtr& x, int lanes);
// GEP: the lanes `lanes` of vector `v`, as a vector (a scalar for one lane).
UOpPtr gep(const UOpPtr& v, std::vector<int64_t> lanes);
// The same lanes as gep(v, lanes), picked from what `v` is built of where that
// is simpler: through GEP, VECTORIZE and lane-wise ops, so a register-wide slice
// of a tile's product is a product of a broadcast and a vector, not a shuffle of
// a wide product.
UOpPtr pick(const UOpPtr& v, const std::vector<int64_t>& lanes);
// pick, or null where it would pick more than `budget` (value, lanes) pairs: one lane
// of a fold by halves is every lane of what it folds.
UOpPtr pick_within(const UOpPtr& v, const std::vector<int64_t>& lanes, size_t budget);
// The scalar every lane of `v` is (`v` itself if scalar, x of VECTORIZE(x, x, ..., x)), or null.
UOpPtr uniform_lane(const UOpPtr& v);
// Is `v` an ALU op or a cast applied lane by lane (every source as wide as it)?
bool lane_wise(const UOpPtr& v);
// A constant `v` of `dt`'s scalar type, broadcast to `dt`'s lanes.
UOpPtr vconst(DType dt, double v);
// The lanes of a vector of `pairs` pairs (a pair range's value, docs/kernel-ir.md): each
// pair's odd lane, which its sum adds first, and its even lane.
struct PairLanes {
  std::vector<int64_t> odd, even;
};
PairLanes pair_lanes(int64_t pairs);
// The identity of a REDUCE op (ADD 0, MUL 1, MAX the lowest value) as a `dt` constant.
UOpPtr reduce_identity(Op op, DType dt);

}  // namespace loom
