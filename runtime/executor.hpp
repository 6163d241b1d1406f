#pragma once
// Runs one compiled kernel: its parallel range split into slices run by
// tbb::parallel_for inside a task_arena of num_threads() threads. The slices
// depend only on the extent, never on the thread count, so results are bitwise
// identical for every LOOM_THREADS.
#include "runtime/jit.hpp"

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace loom {

// Calls `fn` on disjoint slices covering [0, parallel_extent). Extent 0 or 1 (a
// kernel without a parallel range passes 1) is one direct call on the calling
// thread with [0, extent). Counts one executed kernel. Throws loom::Error on a
// null function or a negative extent. With a `profile_name` (LOOM_PROFILE on),
// each slice is a profile event of that name on the thread that ran it.
void run_kernel(KernelFn fn, const std::vector<void*>& bufs, const std::vector<int64_t>& vars,
                int64_t parallel_extent, const std::string& profile_name = {});
// The same for a kernel compiled with LOOM_CHECK_BOUNDS: every slice runs, and
// the result is the first non-zero status a slice returned, else 0.
int32_t run_checked_kernel(CheckedKernelFn fn, const std::vector<void*>& bufs,
                           const std::vector<int64_t>& vars, int64_t parallel_extent,
                           const std::string& profile_name = {});

// The slicing rule: slices hold at most slice_grain(extent) = ceil(extent / 64)
// iterations (at least 1); tbb::simple_partitioner halves the range until each
// piece fits, so an extent splits into between 33 and 64 slices (or one per
// iteration when extent <= 64), the same ones for every thread count.
int64_t slice_grain(int64_t parallel_extent);

// The thread count in force: a loom::Context's LOOM_THREADS, else the last
// set_num_threads, else the environment's LOOM_THREADS, else default_num_threads().
int num_threads();
void set_num_threads(int n);  // throws loom::Error if n < 1

// The cores this process may run on: the default thread count.
int default_num_threads();

// Runs task(0) ... task(n - 1) on the arena's threads, as many at once as there
// are threads, and returns when they are done (compiling a schedule's kernels).
// If tasks throw, the first exception is rethrown here; tasks not yet started
// may then not run.
void run_tasks(size_t n, const std::function<void(size_t)>& task);

// Slices of the last run_kernel call run on distinct threads (for tests).
int last_run_distinct_threads();

}  // namespace loom
