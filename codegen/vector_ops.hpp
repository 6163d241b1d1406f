#pragma once
// Builders for the vector ops of docs/kernel-ir.md: a scalar repeated over
// lanes, lanes picked from a vector, a constant of any lane count.
#include "ir/uop.hpp"

#include <vector>

namespace loom {

// VECTORIZE(x, x, ..., x) of `lanes` lanes; `x` itself when lanes == 1.
UOpPtr broadcast(const UOpPtr& x, int lanes);
// GEP: the lanes `lanes` of vector `v`, as a vector (a scalar for one lane).
UOpPtr gep(const UOpPtr& v, std::vector<int64_t> lanes);
// A constant `v` of `dt`'s scalar type, broadcast to `dt`'s lanes.
UOpPtr vconst(DType dt, double v);
// The identity of a REDUCE op (ADD 0, MUL 1, MAX the lowest value) as a `dt` constant.
UOpPtr reduce_identity(Op op, DType dt);

}  // namespace loom
