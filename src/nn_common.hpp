#pragma once
// Checks and helpers the nn layers share (src/nn*.cpp).
#include "src/tensor_ops.hpp"

#include <loom/tensor.hpp>

#include <optional>
#include <vector>

namespace loom::nn::detail_nn {

// A realized leaf that requires a gradient, holding `init`.
inline Tensor parameter(Tensor init) {
  init.realize();
  return init.requires_grad_();
}

inline void check_float(const Tensor& t, const char* op) {
  if (!t.defined()) throw Error(fmt::format("{}: the tensor is undefined (default-constructed)", op));
  if (!t.dtype().is_float())
    throw Error(
        fmt::format("{}: expected a Float32 or Float64 tensor, got {}", op, scalar_name(t.dtype().scalar)));
}

// As PyTorch, a layer or loss combines only tensors of one dtype: an input
// whose dtype differs from the parameters' (UInt8 pixels, Float64 data into
// Float32 weights) is an error naming both, never a silent promotion
// (docs/semantics.md, "Where loom is stricter than promotion").
inline void check_same_dtype(const char* op, const Tensor& input, const char* input_name, const Tensor& other,
                             const char* other_name) {
  if (input.dtype() == other.dtype()) return;
  throw Error(
      fmt::format("{}: {} has dtype {} but {} has dtype {}; expected the same dtype (cast the {} with "
                  ".cast(DType::{}) first)",
                  op, input_name, scalar_name(input.dtype().scalar), other_name,
                  scalar_name(other.dtype().scalar), input_name, scalar_name(other.dtype().scalar)));
}

// Integer class indices that are already realized, as int64 (none if lazy). Read straight from
// the buffer: reading must not realize anything else.
std::optional<std::vector<int64_t>> realized_indices(const Tensor& t);
// Every realized index lies in [0, n) or equals `ignored`; `what` names them in the error. Int32
// or Int64 only.
void check_indices(const Tensor& idx, int64_t n, const char* op, const char* what,
                   std::optional<int64_t> ignored = std::nullopt);

}  // namespace loom::nn::detail_nn
