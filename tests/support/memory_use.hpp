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

// The test files are built without instrumentation under -DLOOM_SANITIZE (tests/
// CMakeLists.txt), so the build says so: the process runs on ASan's allocator all the same.
#if defined(__SANITIZE_ADDRESS__) || defined(LOOM_TEST_ADDRESS_SANITIZER)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

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
