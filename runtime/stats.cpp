// The engine's counters (include/loom/debug.hpp): process-wide relaxed atomics,
// since they only count and order nothing; the levels are read from their owners.
#include "ir/uop.hpp"
#include "runtime/buffer.hpp"
#include "runtime/jit.hpp"
#include "runtime/kernel_cache.hpp"

#include <loom/debug.hpp>

#include <atomic>

namespace loom {

namespace {
std::atomic<uint64_t> g_kernels_compiled{0};
std::atomic<uint64_t> g_kernels_loaded{0};
std::atomic<uint64_t> g_kernels_executed{0};
std::atomic<uint64_t> g_kernels_dispatched{0};
std::atomic<uint64_t> g_schedules_built{0};
std::atomic<uint64_t> g_schedule_cache_hits{0};
std::atomic<uint64_t> g_schedule_cache_misses{0};
std::atomic<uint64_t> g_capture_replays{0};
std::atomic<uint64_t> g_beam_searches{0};
std::atomic<uint64_t> g_beam_cache_hits{0};
}  // namespace

Counters counters() {
  Counters c;
  c.kernels_compiled = g_kernels_compiled.load(std::memory_order_relaxed);
  c.kernels_loaded = g_kernels_loaded.load(std::memory_order_relaxed);
  c.kernels_executed = g_kernels_executed.load(std::memory_order_relaxed);
  c.kernels_dispatched = g_kernels_dispatched.load(std::memory_order_relaxed);
  c.schedules_built = g_schedules_built.load(std::memory_order_relaxed);
  c.schedule_cache_hits = g_schedule_cache_hits.load(std::memory_order_relaxed);
  c.schedule_cache_misses = g_schedule_cache_misses.load(std::memory_order_relaxed);
  c.capture_replays = g_capture_replays.load(std::memory_order_relaxed);
  c.beam_searches = g_beam_searches.load(std::memory_order_relaxed);
  c.beam_cache_hits = g_beam_cache_hits.load(std::memory_order_relaxed);
  c.live_uops = intern_table_size();
  c.live_buffers = live_buffer_count();
  c.live_buffer_bytes = live_buffer_bytes();
  c.pooled_buffer_bytes = pooled_buffer_bytes();
  c.kernel_cache_entries = kernel_cache().size();
  c.kernel_cache_bytes = kernel_cache().bytes();
  c.jit_code_bytes = Jit::live_code_bytes_if_any();
  return c;
}

void reset_counters() {
  g_kernels_compiled.store(0, std::memory_order_relaxed);
  g_kernels_loaded.store(0, std::memory_order_relaxed);
  g_kernels_executed.store(0, std::memory_order_relaxed);
  g_kernels_dispatched.store(0, std::memory_order_relaxed);
  g_schedules_built.store(0, std::memory_order_relaxed);
  g_schedule_cache_hits.store(0, std::memory_order_relaxed);
  g_schedule_cache_misses.store(0, std::memory_order_relaxed);
  g_capture_replays.store(0, std::memory_order_relaxed);
  g_beam_searches.store(0, std::memory_order_relaxed);
  g_beam_cache_hits.store(0, std::memory_order_relaxed);
}

namespace detail {
void count_kernel_compiled() { g_kernels_compiled.fetch_add(1, std::memory_order_relaxed); }
void count_kernel_loaded() { g_kernels_loaded.fetch_add(1, std::memory_order_relaxed); }
void count_capture_replay() { g_capture_replays.fetch_add(1, std::memory_order_relaxed); }
void count_kernel_executed() { g_kernels_executed.fetch_add(1, std::memory_order_relaxed); }
void count_kernel_dispatched() { g_kernels_dispatched.fetch_add(1, std::memory_order_relaxed); }
void count_schedule_built() { g_schedules_built.fetch_add(1, std::memory_order_relaxed); }
void count_schedule_cache(bool hit) {
  (hit ? g_schedule_cache_hits : g_schedule_cache_misses).fetch_add(1, std::memory_order_relaxed);
}
void count_beam_search() { g_beam_searches.fetch_add(1, std::memory_order_relaxed); }
void count_beam_cache_hit() { g_beam_cache_hits.fetch_add(1, std::memory_order_relaxed); }
}  // namespace detail

}  // namespace loom
