#pragma once
// Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3",
// SC11) built from tensor-level UOps, so random numbers are computed inside
// kernels, element by element. src/random.cpp and its tests use it.
#include "ir/uop.hpp"

#include <array>
#include <cstdint>

namespace loom::detail {

// loom has no unsigned 32-bit dtype: a word is an Int64 UOp holding a value in
// [0, 2^32). All words of one call share a shape.
using Words4 = std::array<UOpPtr, 4>;
using Words2 = std::array<UOpPtr, 2>;

// The four output words of Philox4x32-10 for `counter` under `key`.
Words4 philox4x32_10(const Words4& counter, const Words2& key);

// Random draws (rand, randn, randint, dropout's mask) this thread has made: a
// Capture whose recorded call drew cannot replay it (the draw's seed and counter
// are host data, so a replay would repeat the recorded numbers).
uint64_t thread_random_draws();

}  // namespace loom::detail
