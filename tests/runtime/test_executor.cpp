// The executor's job is slicing, so its kernels here are plain C++ functions with
// the kernel ABI: they record which slice (and thread) ran each index.
#include "ir/flags.hpp"
#include "runtime/executor.hpp"

#include <loom/debug.hpp>
#include <loom/error.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

using namespace loom;

namespace {
// bufs[0], bufs[1]: int64 slice begin and end per index; bufs[2]: int32 visit count.
void record_slices(void* const* bufs, const int64_t*, int64_t begin, int64_t end) {
  auto* slice_begin = static_cast<int64_t*>(bufs[0]);
  auto* slice_end = static_cast<int64_t*>(bufs[1]);
  auto* visits = static_cast<int32_t*>(bufs[2]);
  for (int64_t i = begin; i < end; ++i) {
    slice_begin[i] = begin;
    slice_end[i] = end;
    visits[i] += 1;
  }
}

// Slices entered in the current run of wait_for_a_second_thread.
std::atomic<int> slices_entered{0};

// Each slice waits (a second at most) until another slice has started, so the
// calling thread cannot run every slice while the worker is still waking up on a
// loaded machine (a fixed 2 ms spin per slice sometimes lost that race).
void wait_for_a_second_thread(void* const*, const int64_t*, int64_t, int64_t) {
  slices_entered.fetch_add(1);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (slices_entered.load() < 2 && std::chrono::steady_clock::now() < until) {
  }
}

// bufs[0]: the std::thread::id the (single) call ran on.
void record_thread(void* const* bufs, const int64_t*, int64_t begin, int64_t end) {
  *static_cast<std::thread::id*>(bufs[0]) = std::this_thread::get_id();
  static_cast<int64_t*>(bufs[1])[0] = begin;
  static_cast<int64_t*>(bufs[1])[1] = end;
}

// out[i] = vars[0] * i + vars[1]
void affine(void* const* bufs, const int64_t* vars, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) static_cast<int64_t*>(bufs[0])[i] = vars[0] * i + vars[1];
}

struct Slices {
  std::vector<int64_t> begin, end;
  std::vector<int32_t> visits;
};

Slices run_recording(int64_t extent) {
  const auto n = static_cast<size_t>(extent);
  Slices s{std::vector<int64_t>(n, -1), std::vector<int64_t>(n, -1), std::vector<int32_t>(n, 0)};
  run_kernel(record_slices, {s.begin.data(), s.end.data(), s.visits.data()}, {}, extent);
  return s;
}

// Restores the thread count a test changed.
struct KeepThreads {
  int saved = num_threads();
  ~KeepThreads() { set_num_threads(saved); }
};
}  // namespace

TEST_CASE("the grain depends only on the extent: at most 64 slices") {
  CHECK(slice_grain(0) == 1);
  CHECK(slice_grain(1) == 1);
  CHECK(slice_grain(64) == 1);
  CHECK(slice_grain(65) == 2);
  CHECK(slice_grain(1024) == 16);
  CHECK(slice_grain(1025) == 17);
}

TEST_CASE("a known work raises the grain to the Target's slice_work; below its serial_work, one call") {
  Target t;  // wake_work 2^17: serial below 131072 ops, slices of 32768 at least
  const RunWork w = run_work(1 << 20, t);
  CHECK(w.serial == 131072);
  CHECK(w.slice == 32768);
  // 2^20 ops over 1024 iterations: 1024 per iteration, so 32 iterations per slice (not 16).
  CHECK(slice_grain(1024, w) == 32);
  t.wake_work = 1 << 19;  // a machine where waking a thread costs 4 times more
  CHECK(slice_grain(1024, run_work(1 << 20, t)) == 128);
  CHECK(slice_grain(1024, run_work(kUnknownWork, t)) == 16);  // unknown work: the extent's grain
  // The same run below one Target's serial work and above the other's.
  KeepThreads keep;
  set_num_threads(2);
  std::thread::id ran_on;
  int64_t range[2] = {-1, -1};
  run_kernel(record_thread, {&ran_on, range}, {}, 1024, {}, run_work(1 << 18, t));  // under 2^19
  CHECK(ran_on == std::this_thread::get_id());
  CHECK(range[0] == 0);
  CHECK(range[1] == 1024);
  slices_entered = 0;
  run_kernel(wait_for_a_second_thread, {}, {}, 1024, {}, run_work(1 << 18, Target{}));  // over 2^17
  CHECK(last_run_distinct_threads() == 2);
}

TEST_CASE("every index of [0, extent) runs exactly once, in slices of at most the grain") {
  KeepThreads keep;
  set_num_threads(2);
  for (int64_t extent : {2, 3, 63, 64, 65, 100, 1000, 1024, 4097}) {
    CAPTURE(extent);
    const Slices s = run_recording(extent);
    int64_t slices = 0;
    for (int64_t i = 0; i < extent; ++i) {
      CHECK(s.visits[i] == 1);
      CHECK(s.begin[i] <= i);
      CHECK(i < s.end[i]);
      CHECK(s.end[i] - s.begin[i] <= slice_grain(extent));
      if (s.begin[i] == i) ++slices;
    }
    if (extent <= 64)
      CHECK(slices == extent);
    else {
      CHECK(slices >= 33);
      CHECK(slices <= 64);
    }
  }
}

TEST_CASE("the slices are the same for one thread and for two") {
  KeepThreads keep;
  for (int64_t extent : {5, 1000, 1024}) {
    CAPTURE(extent);
    set_num_threads(1);
    const uint64_t dispatched = counters().kernels_dispatched;
    const Slices one = run_recording(extent);
    CHECK(last_run_distinct_threads() == 1);
    CHECK(counters().kernels_dispatched == dispatched);  // run on the calling thread, not through TBB
    set_num_threads(2);
    const Slices two = run_recording(extent);
    CHECK(one.begin == two.begin);
    CHECK(one.end == two.end);
    CHECK(one.visits == two.visits);
  }
}

TEST_CASE(
    "a shared run is one task per task_work of its work, at least one per thread, at most one per slice") {
  KeepThreads keep;
  set_num_threads(2);
  Target t;  // wake_work 2^17: tasks of 2^19 ops at least
  CHECK(run_work(1 << 20, t).task == 524288);
  CHECK(shared_run_tasks(32, run_work(1 << 20, t)) == 2);        // a GEMV's few microseconds: one per thread
  CHECK(shared_run_tasks(32, run_work(3 << 19, t)) == 3);        // 3 x 2^19 ops
  CHECK(shared_run_tasks(32, run_work(1 << 19, t)) == 2);        // fewer tasks than threads: one per thread
  CHECK(shared_run_tasks(1, run_work(1 << 19, t)) == 1);         // but no more than there are slices
  CHECK(shared_run_tasks(64, run_work(1e9, t)) == 64);           // a large product: every slice a task
  CHECK(shared_run_tasks(64, run_work(kUnknownWork, t)) == 64);  // unknown work: every slice a task
  set_num_threads(4);
  CHECK(shared_run_tasks(32, run_work(1 << 20, t)) == 4);
}

TEST_CASE("slices grouped into tasks are the same slices, each index run once, for one thread and for two") {
  KeepThreads keep;
  for (const double ops : {double{1 << 20}, 1e7, 1e9}) {  // 2, 19 and every slice a task of 2 threads
    CAPTURE(ops);
    const int64_t extent = 1000;
    const RunWork work = run_work(ops, Target{});
    auto record = [&] {
      Slices s{std::vector<int64_t>(extent, -1), std::vector<int64_t>(extent, -1),
               std::vector<int32_t>(extent, 0)};
      run_kernel(record_slices, {s.begin.data(), s.end.data(), s.visits.data()}, {}, extent, {}, work);
      return s;
    };
    set_num_threads(1);
    const Slices one = record();
    set_num_threads(2);
    const uint64_t dispatched = counters().kernels_dispatched;
    const Slices two = record();
    CHECK(counters().kernels_dispatched == dispatched + 1);
    CHECK(one.begin == two.begin);
    CHECK(one.end == two.end);
    CHECK(two.visits == std::vector<int32_t>(extent, 1));
  }
}

TEST_CASE("with two threads a 1024-extent kernel runs on both") {
  KeepThreads keep;
  set_num_threads(2);
  CHECK(num_threads() == 2);
  slices_entered = 0;
  run_kernel(wait_for_a_second_thread, {}, {}, 1024);
  CHECK(last_run_distinct_threads() == 2);
}

TEST_CASE("extent 0 or 1 is one direct call on the calling thread") {
  for (int64_t extent : {0, 1}) {
    CAPTURE(extent);
    std::thread::id ran_on;
    int64_t range[2] = {-1, -1};
    run_kernel(record_thread, {&ran_on, range}, {}, extent);
    CHECK(ran_on == std::this_thread::get_id());
    CHECK(range[0] == 0);
    CHECK(range[1] == extent);
    CHECK(last_run_distinct_threads() == 1);
  }
}

TEST_CASE("buffers and variables reach the kernel") {
  std::vector<int64_t> out(300, 0);
  run_kernel(affine, {out.data()}, {3, -7}, 300);
  for (int64_t i = 0; i < 300; ++i) CHECK(out[i] == 3 * i - 7);
}

TEST_CASE("each run counts one executed kernel") {
  reset_counters();
  std::vector<int64_t> out(100, 0);
  run_kernel(affine, {out.data()}, {1, 0}, 100);
  run_kernel(affine, {out.data()}, {1, 0}, 1);
  run_kernel(affine, {out.data()}, {1, 0}, 0);
  CHECK(counters().kernels_executed == 3);
  CHECK(counters().kernels_compiled == 0);
  detail::count_kernel_compiled();
  detail::count_schedule_built();
  detail::count_schedule_built();
  CHECK(counters().kernels_compiled == 1);
  CHECK(counters().schedules_built == 2);
  reset_counters();
  CHECK(counters().kernels_executed == 0);
  CHECK(counters().schedules_built == 0);
}

TEST_CASE("bad arguments are loom::Errors") {
  CHECK_THROWS_WITH_AS(run_kernel(nullptr, {}, {}, 4), doctest::Contains("null"), Error);
  CHECK_THROWS_WITH_AS(run_kernel(affine, {}, {}, -1), doctest::Contains("-1"), Error);
  CHECK_THROWS_WITH_AS(set_num_threads(0), doctest::Contains("set_num_threads: 0"), Error);
  CHECK_THROWS_AS(set_num_threads(-3), Error);
}

TEST_CASE("set_num_threads changes num_threads") {
  KeepThreads keep;
  set_num_threads(3);
  CHECK(num_threads() == 3);
  std::vector<int64_t> out(1000, 0);
  run_kernel(affine, {out.data()}, {2, 1}, 1000);
  CHECK(out[999] == 1999);
  CHECK(last_run_distinct_threads() <= 3);
}

TEST_CASE("a Context's LOOM_THREADS overrides set_num_threads while it lasts") {
  KeepThreads keep;
  CHECK(default_num_threads() >= 1);
  set_num_threads(2);
  {
    const uint64_t token = detail::push_flag_overrides({{"THREADS", "1"}});
    CHECK(num_threads() == 1);
    std::vector<int64_t> out(1000, 0);
    run_kernel(affine, {out.data()}, {2, 1}, 1000);
    CHECK(out[999] == 1999);
    CHECK(last_run_distinct_threads() == 1);
    detail::pop_flag_overrides(token);
  }
  CHECK(num_threads() == 2);
}

TEST_CASE("runs on several threads while the thread count changes stay correct") {
  KeepThreads keep;
  std::vector<std::thread> callers;
  std::vector<int> wrong(3, 0);
  for (int t = 0; t < 3; ++t)
    callers.emplace_back([t, &wrong] {
      for (int round = 0; round < 20; ++round) {
        if (t == 0) set_num_threads(1 + round % 2);
        const Slices s = run_recording(777);
        for (int32_t v : s.visits) wrong[t] += v != 1;
      }
    });
  for (auto& c : callers) c.join();
  CHECK(wrong == std::vector<int>(3, 0));
}
