#pragma once
// Forward forms of the composites whose derivative the gradient does not take
// through their primitives: built for forward accuracy, their primitives'
// derivatives would be costly or wrong at special points (sigmoid'(0) through
// an |x| tie, cos' at 0 through a 0/0 that a where masks off). The front end
// builds them here; src/gradient.cpp recognises a node as one of them by
// rebuilding the form from its argument, and applies the composite's own rule.
#include "ir/uop.hpp"

namespace loom::detail {

UOpPtr exp_of(const UOpPtr& x);      // float x
UOpPtr log_of(const UOpPtr& x);      // float x
UOpPtr floor_of(const UOpPtr& x);    // float x: TRUNC, one lower where it went up
UOpPtr tanh_of(const UOpPtr& x);     // float x
UOpPtr sigmoid_of(const UOpPtr& x);  // float x
UOpPtr cos_of(const UOpPtr& x);      // float x (Float32: the primitive COS)
UOpPtr relu_of(const UOpPtr& x);     // float x
UOpPtr erf_of(const UOpPtr& x);      // float x
UOpPtr log1p_of(const UOpPtr& x);    // float x
UOpPtr expm1_of(const UOpPtr& x);    // float x

// gather's selection: along axis `axis` + 1 of `hit`, sum where(hit, source
// broadcast over that axis, 0), the axis then dropped. `source` has hit's
// shape without that axis. With `bits`, a float source is summed as the
// integers of its bits, so the one selected value passes exactly (-0.0 and
// NaN payloads too); without, it is the differentiable float sum of the same.
UOpPtr gather_select(const UOpPtr& source, const UOpPtr& hit, int64_t axis, bool bits);

}  // namespace loom::detail
