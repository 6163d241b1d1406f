#pragma once
// The IR side of loom::Dim (include/loom/dim.hpp): a symbolic size's expression,
// its variables and bindings (docs/symbolic.md).
#include "ir/uop.hpp"

#include <string>
#include <vector>

namespace loom {

// The names of the variables in `d`, sorted.
std::vector<std::string> variables(const Dim& d);
// The size as an Int64 node: a CONST, or the expression.
UOpPtr dim_uop(const Dim& d);
// Empties the cache of combined symbolic sizes (ir/dim.cpp): the nodes it holds are freed.
void clear_dim_cache();
// BIND(var, value): `var` (a DEFINE_VAR) bound to `value`.
UOpPtr bind_var(const UOpPtr& var, int64_t value);

// Index math with a size, symbolic or not (a number picks the int64_t overloads).
inline UOpPtr operator+(const UOpPtr& a, const Dim& b) { return a + dim_uop(b); }
inline UOpPtr operator-(const UOpPtr& a, const Dim& b) { return a - dim_uop(b); }
inline UOpPtr operator*(const UOpPtr& a, const Dim& b) { return a * dim_uop(b); }
inline UOpPtr operator/(const UOpPtr& a, const Dim& b) { return a / dim_uop(b); }
inline UOpPtr operator%(const UOpPtr& a, const Dim& b) { return a % dim_uop(b); }
inline UOpPtr operator<(const UOpPtr& a, const Dim& b) { return a < dim_uop(b); }

}  // namespace loom
