#pragma once
// Scaled dot-product attention and its gradient in float64, written as plain loops
// from the formula (softmax(q k^T * scale + mask) v) and the hand-derived backward,
// sharing nothing with loom's graph: the attention tests check loom's
// Float32 forward and gradients against it at sizes (T = 2048) where finite
// differences through loom would cost minutes. Built with the build type's
// flags (not the test binaries' -O0), so T = 2048 takes a fraction of a second.
// Tests-only.
#include <cstdint>
#include <functional>
#include <vector>

namespace loom::test {

struct AttentionSizes {
  int64_t n = 1;  // batch x heads, flattened: each of the n problems is independent
  int64_t L = 1, S = 1, E = 1, Ev = 1;
};

struct AttentionReference {
  std::vector<double> out;         // [n, L, Ev]
  std::vector<double> dq, dk, dv;  // the gradient of sum(out * w): [n, L, E], [n, S, E], [n, S, Ev]
};

// q [n, L, E], k [n, S, E], v [n, S, Ev] and w [n, L, Ev], row-major. allowed(b, i, j)
// says whether query i of problem b sees key j (false: the score is -inf). A row with
// no key allowed is NaN, as the formula gives.
AttentionReference attention_reference(const AttentionSizes& z, const std::vector<double>& q,
                                       const std::vector<double>& k, const std::vector<double>& v,
                                       const std::vector<double>& w, double scale,
                                       const std::function<bool(int64_t b, int64_t i, int64_t j)>& allowed);

}  // namespace loom::test
