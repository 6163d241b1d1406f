#pragma once
// The buffer pool: freed buffers are kept by size class for reuse (up to 256 MiB
// in all), so a training loop allocates nothing after its first steps. Buffers
// of 2 MiB or more are 2 MiB-aligned and use transparent huge pages.
// counters().pooled_buffer_bytes shows what the pool holds (<loom/debug.hpp>).

namespace loom {

// Gives back what loom keeps only for reuse: every buffer the pool keeps (like
// torch.cuda.empty_cache), the spare buffers of live Captures, the schedule
// cache's plans and the in-memory kernel cache's kernels (the next realize of
// a graph schedules and compiles, or reloads from LOOM_CACHE_DIR, again), and
// every IR node only those held; then malloc's free pages go back to the
// system. Live tensors, and kernels a Capture holds, are untouched. Thread-safe.
void empty_cache();

}  // namespace loom
