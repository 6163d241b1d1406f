#pragma once
// The fuzzer's tolerances, one place (docs/fuzzing.md states them):
// - Bool and integer dtypes: exactly equal.
// - Float, exact class (no approximate op upstream, fuzz/op_class.hpp): equal
//   as numbers (0.0 == -0.0), NaN matches NaN, inf matches the same inf.
// - Float, approximate class: |got - want| <= rtol * (|want| + scale), rtol
//   2^-12 for Float32 and 2^-36 for Float64 (of the least precise float dtype
//   upstream, fuzz/op_class.hpp tolerance_dtype), where scale is the largest finite
//   magnitude the reference saw anywhere upstream of the value: rounding errors
//   scale with the operands, so a difference of two large numbers near 0 may
//   keep an error relative to them. NaN and inf must still match exactly, but
//   where a product of finite operands overflowed upstream, NaN and ±inf are not
//   told apart: a fused multiply-add does not round the product, so a sum that is
//   already infinite absorbs it where the unfused sum makes inf - inf
//   (docs/semantics.md).
#include <loom/dtype.hpp>

#include <string>

namespace loom {
class Tensor;
}
namespace loom::ref {
struct RefTensor;
}

namespace loom::fuzz {

double relative_tolerance(DType dt);

// How an expected value may differ: exactly, or within the approximate
// class's tolerance for `precision` relative to |want| + scale.
struct Tolerance {
  bool approximate = false;
  DType precision = DType::Float64;
  double scale = 0;
  bool product_overflowed = false;  // a MUL of finite operands made an infinity upstream
};

// "" when they agree, else a message naming the first element that differs.
std::string compare_values(const ref::RefTensor& got, const ref::RefTensor& want, const Tolerance& tolerance);

// What a realized tensor holds (a buffer or a reshaped view of one).
ref::RefTensor realized(const Tensor& t);

// The largest finite magnitude among a float tensor's elements (0 otherwise).
double magnitude(const ref::RefTensor& t);

}  // namespace loom::fuzz
