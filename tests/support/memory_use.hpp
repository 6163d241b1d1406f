#pragma once
// What the process holds, for the tests of what loom frees: resident memory
// from /proc/self/statm and the bytes malloc has handed out (mallinfo2, which
// sees every glibc arena). Under AddressSanitizer neither means what it does
// in a plain build (its allocator keeps freed blocks in quarantine and maps
// its own shadow memory), so tests that assert them skip those checks there.
#include <cstddef>
#include <fstream>

#include <malloc.h>
#include <unistd.h>

namespace loom::test {

// Whether the process runs on AddressSanitizer's runtime. Under -DLOOM_SANITIZE only
// libloom is instrumented (CMakeLists.txt), so the preprocessor cannot say in a test
// file: the linked runtime does (memory_use.cpp).
bool address_sanitizer();

inline size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Bytes in blocks malloc has handed out and not yet been given back.
inline size_t heap_bytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

}  // namespace loom::test
