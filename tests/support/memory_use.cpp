#include "tests/support/memory_use.hpp"

// Defined by AddressSanitizer's runtime, which the sanitizer build links into every
// test binary; weak, so in the plain build the address is null.
extern "C" void __asan_init() __attribute__((weak));

namespace loom::test {

bool address_sanitizer() { return &__asan_init != nullptr; }

}  // namespace loom::test
