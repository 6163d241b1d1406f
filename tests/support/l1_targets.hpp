#pragma once
// Targets whose L1 a schedule test's expectations were derived for, explicit so that they
// hold on any host.
#include "ir/target.hpp"

namespace loom::test {

// AVX2 (x86-64-v3: 2 vectors of 8 float32 lanes a tile step) with an L1 of 32 KiB, 8 ways of
// 64-byte lines: 64 sets, so rows 4 KiB apart start in one set.
inline Target avx2_l1_32k_8way() {
  Target t = target_named("x86-64-v3");
  t.l1d_bytes = 32 << 10;
  t.l1d_ways = 8;
  t.line_bytes = 64;
  return t;
}

}  // namespace loom::test
