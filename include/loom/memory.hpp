#pragma once
// The buffer pool: freed buffers are kept by size class for reuse (up to 256 MiB
// in all), so a training loop allocates nothing after its first steps. Buffers
// of 2 MiB or more are 2 MiB-aligned and use transparent huge pages.
// counters().pooled_buffer_bytes shows what the pool holds (<loom/debug.hpp>).

namespace loom {

// Releases every buffer the pool keeps to the system (like torch.cuda.empty_cache):
// live tensors are untouched. Thread-safe.
void empty_cache();

}  // namespace loom
