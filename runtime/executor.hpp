#pragma once
// Runs one compiled kernel: its parallel range split into slices run by
// tbb::parallel_for inside a task_arena of num_threads() threads. The slices
// depend only on the extent, never on the thread count, so results are bitwise
// identical for every LOOM_THREADS.
#include "runtime/jit.hpp"

#include <vector>

namespace loom {

void run_kernel(KernelFn fn, const std::vector<void*>& bufs, const std::vector<int64_t>& vars,
                int64_t parallel_extent);

// LOOM_THREADS, default: the cores available to the process.
int num_threads();
void set_num_threads(int n);  // throws loom::Error if n < 1

// Slices of the last run_kernel call run on distinct threads (for tests).
int last_run_distinct_threads();

}  // namespace loom
