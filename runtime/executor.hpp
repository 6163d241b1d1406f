#pragma once
// Runs one compiled kernel: its parallel range split into slices run by
// tbb::parallel_for inside a task_arena of num_threads() threads, or on the
// calling thread when the kernel is too small to share. The slices depend only
// on the extent and the kernel's work, never on the thread count, and parallel
// iterations write disjoint outputs, so results are bitwise identical for every
// LOOM_THREADS.
#include "ir/target.hpp"
#include "runtime/jit.hpp"

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace loom {

// The work of a run whose size is not known: it is split as finely as allowed.
inline constexpr double kUnknownWork = -1;

// A run's work (in operations: each ALU op, each element loaded or stored) and the
// Target's thresholds it is weighed against (run_work).
struct RunWork {
  double ops = kUnknownWork;
  double serial = 0;  // less work runs on the calling thread: waking TBB's workers costs more
  double slice = 0;   // a slice holds at least this much, so its call is worth making
  double task = 0;    // a task (consecutive slices) holds at least this much, so its spawn and steal are
};
// `ops` against `target`'s serial_work(), slice_work() and task_work().
inline RunWork run_work(double ops, const Target& target) {
  return {ops, target.serial_work(), target.slice_work(), target.task_work()};
}

// Calls `fn` on disjoint slices covering [0, parallel_extent). A run of less than
// work.serial in all (`work.ops`), or that would be one slice, is one direct call on
// the calling thread with [0, extent); with one thread in force (num_threads()) the
// slices run in order on the calling thread, without TBB; any other is dispatched to
// TBB (counted in Counters::kernels_dispatched) as tasks of consecutive slices, one per
// work.task of its work but at least one per thread and at most one per slice: a
// task costs a spawn and a steal (about a microsecond between two cores), a slice a call. Counts one executed
// kernel. Throws loom::Error on a null function or a negative extent. With a `profile_name` (LOOM_PROFILE
// on), each slice is a profile event of that name on the thread that ran it.
void run_kernel(KernelFn fn, const std::vector<void*>& bufs, const std::vector<int64_t>& vars,
                int64_t parallel_extent, const std::string& profile_name = {}, const RunWork& work = {});
// The same for a kernel compiled with LOOM_CHECK_BOUNDS: every slice runs, and
// the result is the first non-zero status a slice returned, else 0.
int32_t run_checked_kernel(CheckedKernelFn fn, const std::vector<void*>& bufs,
                           const std::vector<int64_t>& vars, int64_t parallel_extent,
                           const std::string& profile_name = {}, const RunWork& work = {});

// The slicing rule: slices hold at most slice_grain iterations, where the grain is
// ceil(extent / 64), raised so a slice holds at least work.slice of `work.ops`;
// tbb::simple_partitioner halves the range until each piece fits. The slices
// depend on the extent and the work only, never on the thread count.
int64_t slice_grain(int64_t parallel_extent, const RunWork& work = {});

// The tasks a run shared across threads is dispatched as, each a group of consecutive
// slices run in order: one per work.task of work.ops, at least one per thread (of
// num_threads()), at most one per slice; one per slice when the work is not known.
int64_t shared_run_tasks(int64_t slices, const RunWork& work = {});

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
