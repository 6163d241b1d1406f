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

// AVX-512 (x86-64-v4) on two cores of 1 MiB L2 each, 48 KiB 12-way L1d and a 32 MiB L3
// complex (a Zen 5): the machine split_reduceop's expectations were derived on.
inline Target avx512_l2_1m_two_cores() {
  Target t = target_named("x86-64-v4");
  t.l1d_bytes = 48 << 10;
  t.l1d_ways = 12;
  t.line_bytes = 64;
  t.l2_bytes = 1 << 20;
  t.l3_bytes = t.l3_complex_bytes = 32 << 20;
  t.cores = 2;
  return t;
}

}  // namespace loom::test
