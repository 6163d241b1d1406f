#pragma once
// Runs one compiled kernel: its parallel range split into slices run by
// tbb::parallel_for inside a task_arena of num_threads() threads. The slices
// depend only on the extent, never on the thread count, so results are bitwise
// identical for every LOOM_THREADS.
#include "runtime/jit.hpp"

#include <vector>

namespace loom {

// Calls `fn` on disjoint slices covering [0, parallel_extent). Extent 0 or 1 (a
// kernel without a parallel range passes 1) is one direct call on the calling
// thread with [0, extent). Counts one executed kernel. Throws loom::Error on a
// null function or a negative extent.
void run_kernel(KernelFn fn, const std::vector<void*>& bufs, const std::vector<int64_t>& vars,
                int64_t parallel_extent);

// The slicing rule: slices hold at most slice_grain(extent) = ceil(extent / 64)
// iterations (at least 1); tbb::simple_partitioner halves the range until each
// piece fits, so an extent splits into between 33 and 64 slices (or one per
// iteration when extent <= 64), the same ones for every thread count.
int64_t slice_grain(int64_t parallel_extent);

// LOOM_THREADS, default: the cores available to the process.
int num_threads();
void set_num_threads(int n);  // throws loom::Error if n < 1

// The thread count an LOOM_THREADS value asks for. Unset or empty gives the
// default (the cores this process may run on). A value that is not a whole
// number in [1, 1024] logs a spdlog warning naming it and gives the default:
// a mistyped environment variable should not stop a program.
int threads_from_env(const char* value);
int default_num_threads();

// Slices of the last run_kernel call run on distinct threads (for tests).
int last_run_distinct_threads();

}  // namespace loom
