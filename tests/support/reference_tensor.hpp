#pragma once
// A tensor's value as the reference interpreter holds it: a shape, a dtype and
// one flat row-major vector of elements.
#include <loom/dtype.hpp>

#include <cstdint>
#include <vector>

namespace loom::ref {

// Shapes here are numbers: the interpreter evaluates a graph at its variables' bindings.
using RefShape = std::vector<int64_t>;

// Float dtypes fill `f` (a Float32 value is an exact float);
// Bool and integer dtypes fill `i`, normalised to the dtype (Bool 0 or 1,
// UInt8 0..255, Int32 sign-extended). The other vector stays empty.
struct RefTensor {
  RefShape shape;
  DType dtype;
  std::vector<double> f;
  std::vector<int64_t> i;

  // A tensor of `shape` filled with zeros of `dtype`.
  static RefTensor zeros(DType dtype, RefShape shape);
  // Reads size(shape) elements of `dtype` laid out as in memory (Bool: one
  // byte, nonzero is true).
  static RefTensor from_bytes(DType dtype, RefShape shape, const void* bytes);

  int64_t size() const;        // number of elements
  double at(int64_t k) const;  // element k (row-major) as a double (Int64 beyond 2^53 rounds)
  std::vector<double> as_doubles() const;
  std::vector<int64_t> as_int64s() const;  // Bool and integer dtypes only
  std::vector<uint8_t> to_bytes() const;   // the in-memory layout of `dtype`
};

// Element count of a shape (1 for a scalar).
int64_t numel(const RefShape& shape);
// Row-major strides of a shape, in elements.
RefShape row_major_strides(const RefShape& shape);
// Steps a row-major multi-index to the next element (an odometer); wraps to 0 after the last.
void next_index(std::vector<int64_t>& idx, const RefShape& shape);

}  // namespace loom::ref
