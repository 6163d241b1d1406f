#pragma once
// elementwise_outputs (rangeify's graph, after multi_output): an elementwise buffer
// that another elementwise buffer of the same ranges reads at its own element is
// stored by the reader's kernel, which uses the value itself instead of loading it.
// An optimizer's update is one kernel per parameter, writing the parameter and its
// moments (Adam: m, v, then p from the new m and v), not one kernel per tensor.
//
//   Before:  M = BUFFERIZE(m[i] * b1 + g[i] * c, i)                  (m written in place)
//            P = BUFFERIZE(p[j] - s * LOAD(INDEX(M, j)), j)           (p written in place)
//   After:   M = BUFFERIZE(m[i] * b1 + g[i] * c, i)
//            P = BUFFERIZE(p[i] - s * (m[i] * b1 + g[i] * c), i)
//
// kernel_split then makes M and P, which share their RANGE nodes, one kernel of two
// stores (docs/kernel-ir.md), the value computed once. A pair joins when: the producer
// is a root of the graph (a target or an assign, stored anyway: an intermediate buffer
// was kept by buffer_removal's rules or the user's .contiguous(), and joined it would be
// a store nobody reads); neither value has a REDUCE (a product's tiling is
// multi_output's business); each lists only ranges of constant extent, at least one,
// used by no other BUFFERIZE (its own), and no valid; they have as many ranges, of equal
// extents in order; every read of the producer in the reader is at the reader's ranges
// in order (the same element); and joining makes no cycle of kernels (no chain from one
// to the other through a kernel outside both). A chain of such pairs (m and v both read
// by p, g by both) is one kernel over the ranges of its first member in toposort order.
// Siblings join the same way: elementwise buffers that read one buffer (whatever made
// it, a reduce included) at their own element, under the same guards, are one kernel
// that loads it once (two outputs of a row sum: a compare with it and a copy of it).
// An output written in place stays in place only where kernel_split finds each load of
// the buffer it overwrites feeding its own store (kernel_split.hpp,
// reads_output_only_in_place); otherwise it goes to a fresh buffer.
#include "ir/pattern.hpp"

namespace loom {

const PatternMatcher& elementwise_outputs();

}  // namespace loom
