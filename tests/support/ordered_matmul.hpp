#pragma once
// A float32 matmul summed one term at a time in the order of k, and bfloat16-exact test
// values: what a sum of bfloat16 products on the pair-dot unit (codegen/pair_dot.hpp) or a
// float32 register tile over the same values gives, bit for bit.
#include "ir/target.hpp"

#include <loom/error.hpp>
#include <loom/half.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace loom::test {

// bfloat16 values of both signs and of magnitudes 2^-8 to 2^8, as floats.
inline std::vector<float> bf16_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-8, 8), sign(0, 1);
  std::vector<float> v(n);
  for (auto& x : v)
    x = static_cast<float>(bfloat16((sign(rng) ? -1.0f : 1.0f) * std::ldexp(mantissa(rng), exponent(rng))));
  return v;
}

// out[t, i, j] = sum_k a[t, i, k] b[t, k, j] in float32, one term at a time in the order of
// k; with `block` > 0 in blocks of that many terms, each summed from 0 and added to the sum
// of the blocks before it (a register tile's blocks of k, codegen/recipes.cpp's k_blocks).
inline std::vector<float> ordered_matmul(const std::vector<float>& a, const std::vector<float>& b,
                                         int64_t batch, int64_t m, int64_t k, int64_t n, int64_t block = 0) {
  const int64_t step = block > 0 ? block : k;
  std::vector<float> out(static_cast<size_t>(batch * m * n));
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float total = 0;
        for (int64_t first = 0; first < k; first += step) {
          float acc = 0;
          for (int64_t s = first; s < std::min(k, first + step); ++s)
            acc += a[static_cast<size_t>((t * m + i) * k + s)] * b[static_cast<size_t>((t * k + s) * n + j)];
          total = first == 0 ? acc : acc + total;
        }
        out[static_cast<size_t>((t * m + i) * n + j)] = total;
      }
  return out;
}

inline std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> out;
  for (float x : v) out.push_back(std::bit_cast<uint32_t>(x));
  return out;
}

// The host runs vdpbf16ps (the native Target sums bfloat16 pairs on it).
inline bool host_pair_dot() {
  try {
    return target_named("native").pair_dot();
  } catch (const Error&) {
    return false;
  }
}

}  // namespace loom::test
