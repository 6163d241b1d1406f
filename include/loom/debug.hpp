#pragma once
// Counters that tests and tools read to see what the engine did, and a look
// at the kernels a realize would run.
#include <loom/tensor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

// The first nine count events since reset_counters(); the rest are levels:
// what is alive at the moment counters() is called.
struct Counters {
  uint64_t kernels_compiled = 0;  // by LLVM, in this process
  uint64_t kernels_loaded = 0;    // from the disk cache (LOOM_CACHE_DIR) instead
  uint64_t kernels_executed = 0;
  uint64_t kernels_dispatched = 0;     // runs split across threads by TBB (the rest ran on the caller)
  uint64_t schedules_built = 0;        // graphs scheduled (rangeify, stages, kernel split)
  uint64_t schedule_cache_hits = 0;    // realizes that reused a plan: no scheduling
  uint64_t schedule_cache_misses = 0;  // realizes that scheduled their graph
  uint64_t capture_replays = 0;        // loom::Capture calls that replayed a recording
  uint64_t beam_searches = 0;          // LOOM_BEAM searches run (kernels compiled and timed)
  uint64_t beam_cache_hits = 0;        // LOOM_BEAM winners read from LOOM_CACHE_DIR instead
  uint64_t live_uops = 0;              // interned IR nodes
  uint64_t live_buffers = 0;           // device buffers held by tensors or graphs
  uint64_t live_buffer_bytes = 0;      // their requested bytes
  uint64_t pooled_buffer_bytes = 0;    // freed blocks the pool keeps for reuse
  uint64_t kernel_cache_entries = 0;   // compiled kernels in the in-memory cache
  uint64_t kernel_cache_bytes = 0;     // memory those kernels hold: code pages, JIT bookkeeping, ASTs
  uint64_t jit_code_bytes = 0;         // all live JIT code pages: the cache's, and evicted code still held
};
Counters counters();
void reset_counters();

// One kernel of a schedule: its name (as LOOM_DEBUG prints it) and the buffers
// it binds, its `outputs` outputs first, then each buffer it reads.
struct ScheduledBuffer {
  DType dtype;
  int64_t numel;
};
struct ScheduledKernelInfo {
  std::string name;
  std::vector<ScheduledBuffer> buffers;
  size_t outputs = 1;  // buffers[0, outputs) are the ones the kernel stores
};
// The kernels realizing `tensors` together would run, in order, without
// running, compiling or allocating anything: the tensors stay lazy. Shows
// which intermediate tensors a graph materialises (their buffer sizes).
std::vector<ScheduledKernelInfo> schedule_of(const std::vector<Tensor>& tensors);

namespace detail {
void count_kernel_compiled();
void count_kernel_loaded();
void count_kernel_executed();
void count_capture_replay();
void count_kernel_dispatched();
void count_schedule_built();
void count_schedule_cache(bool hit);
void count_beam_search();
void count_beam_cache_hit();
}  // namespace detail

}  // namespace loom
