#include "runtime/executor.hpp"

#include "ir/flags.hpp"
#include "ir/profile.hpp"

#include <loom/debug.hpp>
#include <loom/error.hpp>

#include <sched.h>
#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace loom {

namespace {
constexpr int64_t kMaxSlices = 64;
constexpr int kMaxThreads = 1024;

// ThreadSanitizer cannot see TBB's own synchronisation (Debian's libtbb is not built
// with it), so it would report every value a caller hands to its tasks as a race. The
// hand-off is announced to it instead: the caller releases before the arena runs the
// tasks and acquires after they end; each task acquires first and releases last.
// Nothing in other builds (docs/faults.md).
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
void handoff_release(const void* token) { __tsan_release(const_cast<void*>(token)); }
void handoff_acquire(const void* token) { __tsan_acquire(const_cast<void*>(token)); }
#else
void handoff_release(const void*) {}
void handoff_acquire(const void*) {}
#endif

// The process-wide arena registry: the thread count and the arena built for it.
// Runs take a reference to the current arena under the mutex and execute outside
// it, so set_num_threads never waits for a run and a replaced arena lives until
// the runs using it finish.
class Arenas {
 public:
  static Arenas& get() {
    static Arenas* arenas = new Arenas();  // never destroyed: runs may outlive statics
    return *arenas;
  }

  // The count in force: a loom::Context's LOOM_THREADS, else set_num_threads, else
  // the environment's LOOM_THREADS, else the cores available.
  int threads() {
    const auto f = flags();
    if (f->threads_from_context) return f->threads;
    std::lock_guard lock(mu_);
    return chosen_locked(*f);
  }

  void set_threads(int n) {
    std::lock_guard lock(mu_);
    set_ = n;
  }

  // The arena for the count in force, built when the count changes.
  std::shared_ptr<tbb::task_arena> arena() {
    const int n = threads();
    std::lock_guard lock(mu_);
    if (!arena_ || arena_threads_ != n) rebuild(n);
    return arena_;
  }

 private:
  int chosen_locked(const Flags& f) const {
    return set_ > 0 ? set_ : f.threads > 0 ? f.threads : default_num_threads();
  }

  // TBB caps its workers at the machine's concurrency; a LOOM_THREADS above it is
  // the user's explicit choice, so lift the cap while that count is in force.
  void rebuild(int n) {
    allowance_.reset();
    if (n > tbb::info::default_concurrency())
      allowance_ = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                         static_cast<size_t>(n));
    arena_ = std::make_shared<tbb::task_arena>(n);
    arena_threads_ = n;
  }

  std::mutex mu_;
  int set_ = 0;  // set_num_threads; 0: never called
  int arena_threads_ = 0;
  std::shared_ptr<tbb::task_arena> arena_;
  std::unique_ptr<tbb::global_control> allowance_;
};

// A small dense id per thread, so a run can note which threads ran its slices
// with one atomic OR per slice. Ids past 256 share bits: the count is then a
// lower bound, which is all the tests need.
int this_thread_index() {
  static std::atomic<int> next{0};
  thread_local const int index = next.fetch_add(1, std::memory_order_relaxed);
  return index;
}

class ThreadSet {
 public:
  void note_this_thread() {
    const int i = this_thread_index() % 256;
    bits_[i / 64].fetch_or(uint64_t{1} << (i % 64), std::memory_order_relaxed);
  }
  int count() const {
    int n = 0;
    for (const auto& word : bits_) n += std::popcount(word.load(std::memory_order_relaxed));
    return n;
  }

 private:
  std::array<std::atomic<uint64_t>, 4> bits_{};
};

std::atomic<int> g_last_distinct_threads{0};

int cores_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}
}  // namespace

int default_num_threads() {
  static const int cores = cores_available();
  return cores;
}

int num_threads() { return Arenas::get().threads(); }

void set_num_threads(int n) {
  if (n < 1 || n > kMaxThreads)
    throw Error("set_num_threads: " + std::to_string(n) + " threads asked for, expected 1 to " +
                std::to_string(kMaxThreads));
  Arenas::get().set_threads(n);
}

int64_t slice_grain(int64_t parallel_extent, const RunWork& work) {
  int64_t grain = std::max<int64_t>(1, (parallel_extent + kMaxSlices - 1) / kMaxSlices);
  if (work.ops > 0 && parallel_extent > 0) {
    const double per_iteration = work.ops / static_cast<double>(parallel_extent);
    grain = std::max(grain, static_cast<int64_t>(std::ceil(work.slice / per_iteration)));
  }
  return std::min(grain, std::max<int64_t>(1, parallel_extent));
}

int64_t shared_run_tasks(int64_t slices, const RunWork& work) {
  if (work.ops < 0 || work.task <= 0) return slices;
  const auto tasks = static_cast<int64_t>(work.ops / work.task);
  return std::clamp<int64_t>(tasks, std::min<int64_t>(num_threads(), slices), slices);
}

namespace {
// slice(begin, end) of one slice, a profile event when `profile_name` is set.
template <class Slice>
void run_one_slice(int64_t begin, int64_t end, const std::string& profile_name, const Slice& slice) {
  std::optional<ProfileSpan> span;
  if (!profile_name.empty()) {
    span.emplace("slice", profile_name);
    span->arg("begin", static_cast<double>(begin));
    span->arg("end", static_cast<double>(end));
  }
  slice(begin, end);
}

// The slices tbb::simple_partitioner cuts [begin, end) into (halved, the lower half
// first, until a piece holds at most `grain`), run in order on the calling thread.
template <class Slice>
void run_halves(int64_t begin, int64_t end, int64_t grain, const std::string& profile_name,
                const Slice& slice) {
  if (end - begin <= grain) return run_one_slice(begin, end, profile_name, slice);
  const int64_t middle = begin + (end - begin) / 2;
  run_halves(begin, middle, grain, profile_name, slice);
  run_halves(middle, end, grain, profile_name, slice);
}

// The first index of each slice run_halves visits, in its order, and `end` last.
void slice_starts(int64_t begin, int64_t end, int64_t grain, std::vector<int64_t>& starts) {
  if (end - begin <= grain) return starts.push_back(begin);
  const int64_t middle = begin + (end - begin) / 2;
  slice_starts(begin, middle, grain, starts);
  slice_starts(middle, end, grain, starts);
}

// Calls slice(begin, end) on disjoint slices covering [0, parallel_extent), as run_kernel says.
template <class Slice>
void run_slices(int64_t parallel_extent, const std::string& profile_name, const RunWork& work,
                const Slice& slice) {
  if (parallel_extent < 0)
    throw Error("run_kernel: parallel extent " + std::to_string(parallel_extent) + " is negative");
  const int64_t grain = slice_grain(parallel_extent, work);
  const bool small = work.ops >= 0 && work.ops < work.serial;
  if (small || parallel_extent <= grain) {
    slice(0, parallel_extent);
    g_last_distinct_threads.store(1, std::memory_order_relaxed);
  } else if (num_threads() == 1) {
    // The same slices, without entering the arena and spawning a task for each:
    // one thread would run them all here, one after another.
    run_halves(0, parallel_extent, grain, profile_name, slice);
    g_last_distinct_threads.store(1, std::memory_order_relaxed);
  } else {
    ThreadSet ran_on;
    const std::shared_ptr<tbb::task_arena> arena = Arenas::get().arena();
    std::vector<int64_t> starts;
    starts.reserve(static_cast<size_t>(2 * kMaxSlices + 1));
    slice_starts(0, parallel_extent, grain, starts);
    const auto slices = static_cast<int64_t>(starts.size());
    starts.push_back(parallel_extent);
    const int64_t tasks = shared_run_tasks(slices, work);  // each runs consecutive slices, in order
    const auto run_all = [&] {                             // built before the release (as in run_tasks)
      handoff_acquire(&ran_on);
      tbb::parallel_for(
          int64_t{0}, tasks,
          [&](int64_t task) {
            handoff_acquire(&ran_on);
            ran_on.note_this_thread();
            for (int64_t i = task * slices / tasks; i < (task + 1) * slices / tasks; ++i)
              run_one_slice(starts[static_cast<size_t>(i)], starts[static_cast<size_t>(i) + 1], profile_name,
                            slice);
            handoff_release(&ran_on);
          },
          tbb::simple_partitioner());
      handoff_release(&ran_on);
    };
    handoff_release(&ran_on);
    arena->execute(run_all);
    handoff_acquire(&ran_on);
    g_last_distinct_threads.store(ran_on.count(), std::memory_order_relaxed);
    detail::count_kernel_dispatched();
  }
  detail::count_kernel_executed();
}
}  // namespace

void run_kernel(KernelFn fn, const std::vector<void*>& bufs, const std::vector<int64_t>& vars,
                int64_t parallel_extent, const std::string& profile_name, const RunWork& work) {
  if (!fn) throw Error("run_kernel: the kernel function is null");
  run_slices(parallel_extent, profile_name, work,
             [&](int64_t begin, int64_t end) { fn(bufs.data(), vars.data(), begin, end); });
}

int32_t run_checked_kernel(CheckedKernelFn fn, const std::vector<void*>& bufs,
                           const std::vector<int64_t>& vars, int64_t parallel_extent,
                           const std::string& profile_name, const RunWork& work) {
  if (!fn) throw Error("run_kernel: the kernel function is null");
  std::atomic<int32_t> first{0};
  run_slices(parallel_extent, profile_name, work, [&](int64_t begin, int64_t end) {
    int32_t expected = 0;
    if (const int32_t status = fn(bufs.data(), vars.data(), begin, end))
      first.compare_exchange_strong(expected, status, std::memory_order_relaxed);
  });
  return first.load(std::memory_order_relaxed);
}

void run_tasks(size_t n, const std::function<void(size_t)>& task) {
  if (n == 1) return task(0);
  const std::shared_ptr<tbb::task_arena> arena = Arenas::get().arena();
  // Built before the release: execute may itself run it on a worker, when the caller
  // cannot join the arena.
  const auto run_all = [&] {
    handoff_acquire(&task);
    tbb::parallel_for(
        size_t{0}, n,
        [&](size_t i) {
          handoff_acquire(&task);
          task(i);
          handoff_release(&task);
        },
        tbb::simple_partitioner());
    handoff_release(&task);
  };
  handoff_release(&task);
  arena->execute(run_all);
  handoff_acquire(&task);
}

int last_run_distinct_threads() { return g_last_distinct_threads.load(std::memory_order_relaxed); }

}  // namespace loom
