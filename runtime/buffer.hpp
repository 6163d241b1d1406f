#pragma once
// Device memory on the CPU: aligned to the host Target's buffer_alignment, at least
// the kernel ABI's 64 bytes (to its huge page, 2 MiB on x86, on transparent huge
// pages from that size up), reference counted, recycled by size class. Freed (returned to the pool) when no
// tensor or kernel launch holds it.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace loom {

class Buffer {
 public:
  // Kernel outputs are written whole before anything reads them, so they skip
  // zeroing (Fill::Uninitialized); everything else starts zeroed.
  enum class Fill { Zeros, Uninitialized };
  static std::shared_ptr<Buffer> allocate(size_t bytes, Fill fill = Fill::Zeros);
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // An assign wrote the tensor that held this memory into another buffer (copy
  // on write, something else still read this one): whatever reads it now reads
  // an old value. Set by the engine; a loom::Capture recording that reads the
  // memory in place of the tensor can then no longer replay.
  void retire() { retired_.store(true, std::memory_order_relaxed); }
  bool retired() const { return retired_.load(std::memory_order_relaxed); }
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

 private:
  Buffer(void* data, size_t bytes, size_t capacity) : data_(data), bytes_(bytes), capacity_(capacity) {}
  void* data_;
  size_t bytes_, capacity_;
  std::atomic<bool> retired_{false};
};

// The machine's physical memory in bytes: no buffer, and no schedule's
// buffers together, may be larger (loom::Error before allocating).
size_t physical_memory_bytes();

// Bytes currently held by live buffers (for leak tests).
size_t live_buffer_bytes();
// Buffers currently alive.
size_t live_buffer_count();

// The capacity of the block a request of `bytes` gets: its size class. Classes
// are multiples of the alignment (64 on x86), four per power of two (waste under a
// third), the alignment for 0.
size_t buffer_size_class(size_t bytes);
// Bytes of freed blocks the pool keeps for reuse, and a way to give them back.
size_t pooled_buffer_bytes();
void trim_buffer_pool();
// The most bytes the pool keeps (LOOM_POOL_BYTES, set by each realize): a freed block
// beyond it goes back to the system, and the least recently freed blocks leave to make
// room. By default an eighth of physical memory, at least 256 MiB: a step's largest
// buffers (attention's [B, H, T, T] scores) are reused, not mapped and zeroed afresh.
size_t buffer_pool_limit();
size_t default_buffer_pool_limit();
void set_buffer_pool_limit(size_t bytes);

// Holders of what is kept only for reuse (loom::Capture's spare outputs and
// scratch, which its next replay allocates again when they are gone; the
// schedule cache's plans) register a release function; loom::empty_cache()
// (runtime/memory.cpp) calls each one, then drops the rest of loom's caches.
// Thread-safe: remove_spare_holder waits for a release that is running, so a
// holder removes itself first thing in its destructor.
uint64_t add_spare_holder(std::function<void()> release);
void remove_spare_holder(uint64_t id);

}  // namespace loom
