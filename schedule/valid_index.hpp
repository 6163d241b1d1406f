#pragma once
// valid_index (per kernel): the address of a guarded access simplified where its guard
// holds. A guard that bounds a range (`r < c`, `c < r`, and their ANDs) narrows that range:
// the address is simplified with r standing for a variable of the narrower bounds, then r
// is put back. An access whose guard is false touches no memory (docs/kernel-ir.md), so the
// address only has to be right where the guard holds.
//
//   Before:  INDEX(b, ((c + 256*t - 512) / 65536) * 65536 + ((c + 256*t - 512) % 256) * 256
//                     + ((c + 256*t - 512) / 256) % 256, 511 < c)         c < 768, t < 2048
//   After:   INDEX(b, (t / 256) * 65536 + c * 256 + t % 256 - 131072, 511 < c)
//
// A concatenation's piece read that way (the gradient of q, k and v's concatenation, the
// piece of v transposed): unguarded, c - 512 may be negative, so no division folds and no
// range of the address has a stride, and the kernel ran without lanes. The address is
// kept only when it has fewer divisions and remainders than before, and only when no load
// inside it changed: a gather's index is loaded whether or not the outer guard holds, so that
// load's own guard must not fold away under it.
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& valid_index();

}  // namespace loom
