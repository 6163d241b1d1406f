#pragma once
// Device memory on the CPU: 64-byte aligned, reference counted, recycled by size
// class. Freed (returned to the pool) when no tensor or kernel launch holds it.
#include <cstddef>
#include <memory>

namespace loom {

class Buffer {
public:
  static std::shared_ptr<Buffer> allocate(size_t bytes);  // contents zeroed
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

private:
  Buffer(void* data, size_t bytes, size_t capacity) : data_(data), bytes_(bytes), capacity_(capacity) {}
  void* data_;
  size_t bytes_, capacity_;
};

// Bytes currently held by live buffers (for leak tests).
size_t live_buffer_bytes();

}  // namespace loom
