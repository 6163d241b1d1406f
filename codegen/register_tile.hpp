#pragma once
// Matmul-like kernels and the register tile the optimiser gives them
// (codegen/register_tile.cpp; docs/performance.md explains the constants).
//
//   out[.., i, j] = epilogue(sum_k a(.., i, k) * b(.., k, j))
//
// a's loads do not depend on j (one value broadcast over the lanes), b's loads
// do not depend on i and are contiguous along j (one vector). Matmul, batched
// matmul and the gradient matmuls with a transposed a all have this form.
#include "ir/uop.hpp"

#include <optional>

namespace loom {

struct MatmulAxes {
  UOpPtr rows;    // i: output range a depends on and b does not
  UOpPtr cols;    // j: output range b and the output are contiguous along, a does not use
  UOpPtr reduce;  // k: the float sum's (innermost) range
  int64_t a_ops;  // float ALU ops computing one a value (0: a plain load)
};

// The step of an INDEX's address when `range` steps by one, if constant (0: the
// address does not use it).
std::optional<int64_t> address_stride(const UOpPtr& index, const UOpPtr& range);

// The axes of a kernel of the form above, if it is one: one END over one
// STORE, one float ADD REDUCE (over one or more ranges), whose value is a product of two
// sides that each read memory; constant trip counts.
std::optional<MatmulAxes> matmul_axes(const UOpPtr& kernel);

struct RegisterTile {
  int64_t rows;     // output rows computed at once (an unroll range)
  int64_t vectors;  // SIMD vectors of output columns computed at once (an unroll range)
  int64_t lanes;    // columns per vector (the upcast range)
};

// The tile for an [m, n] output with `lanes` float lanes per vector and
// `registers` vector registers: rows x vectors accumulators, `vectors` b
// registers and one a broadcast within the register file. An a that costs
// `a_ops` ALU ops per value is computed again for every column tile, so a
// costly one (a fused softmax) gets tiles as wide as the columns allow.
RegisterTile register_tile(int64_t m, int64_t n, int64_t lanes, int registers, int64_t a_ops = 0);

}  // namespace loom
