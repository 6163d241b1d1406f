#pragma once
// The sanitizer pass's budget (docs/performance.md, "CI's time"): under ASan and
// UBSan the interpreters that check a kernel's values run several times slower,
// so a sweep of variants (vector widths, target presets) checks its first
// variant there and every variant in the plain build. What a variant exercises
// in codegen is the same code under either build; the sanitizers look for
// memory and undefined-behaviour faults, which the first variant reaches.
#include "tests/support/memory_use.hpp"

#include <vector>

namespace loom::test {

template <class T>
std::vector<T> sanitizer_budget(std::vector<T> variants) {
  if (address_sanitizer() && variants.size() > 1) variants.resize(1);
  return variants;
}

}  // namespace loom::test
