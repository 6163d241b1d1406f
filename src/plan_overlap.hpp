#pragma once
// A plan's order for overlapping its collectives with its kernels
// (docs/distributed.md). Each collective starts as soon as the kernels writing
// its input have run, and is waited for only before the first item touching its
// buffers. Before/after, for a part computing the inputs of all-reduces a
// (which needs kernels k0 k1 k2) and b (needs k0 k3), then a kernel k4 reading a:
//   k0 k1 k2 k3 | start a, start b | wait a, wait b | k4
//   -> k0 k3 | start b | k1 k2 | start a | wait a | k4 | wait b (at the end)
#include "src/plan.hpp"

#include <cstdint>
#include <vector>

namespace loom::detail {

// Reorders kernels[first, end) (one part, in dependency order) so that the
// kernels a collective's input buffers need (those writing them, and those they
// depend on) come as early as the order allows: the collective needing the
// fewest kernels first, then the next, then any other kernel. `inputs[i]` are
// collective i's buffers (a bucket's pieces, else its one input). Returns the
// collectives' indices in the order their inputs are complete.
std::vector<size_t> order_for_inputs(std::vector<PlanKernel>& kernels, size_t first,
                                     const std::vector<std::vector<uint32_t>>& inputs);

// 1 + the index of the last kernel writing any of `buffers`, or 0 when none
// does: the earliest `after` of a collective reading them.
size_t ready_after(const std::vector<PlanKernel>& kernels, const std::vector<uint32_t>& buffers);

// Sets each collective's `wait`: the first kernel from its `after` on that reads
// or writes its input or output, or the `after` of a later collective that does
// (it must end before that one starts), else the end of the plan.
void set_waits(Plan& plan);

}  // namespace loom::detail
