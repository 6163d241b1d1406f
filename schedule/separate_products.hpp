#pragma once
// separate_products (tensor level, before rangeify): an elementwise value that combines
// two or more sums of products (x @ W + h @ U, an RNN cell's gates; two projections
// added) makes every product but the first a realization point, so each is a kernel of
// its own that the contraction analysis register-tiles, and the combination runs in the
// last product's kernel. Fused, the products shared one kernel of two reduces that no
// tile takes (a 512 x 512 pair: 14.9 ms against 2 x 1.3).
//
//   Before:  ADD(RESHAPE(REDUCE_AXIS[ADD](MUL(a, b))), RESHAPE(REDUCE_AXIS[ADD](MUL(c, d))))
//   After:   ADD(RESHAPE(REDUCE_AXIS[ADD](MUL(a, b))),
//                RESHAPE(CONTIGUOUS(REDUCE_AXIS[ADD](MUL(c, d)))))
//
// A product counts when it keeps at least two axes of more than one element (a matrix,
// not a dot product or a GEMV's row), and it is reached from the value through ALU ops,
// casts and movement ops other than EXPAND (a broadcast product is rangeify's candidate
// already), never through a realization point.
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& separate_products();

}  // namespace loom
