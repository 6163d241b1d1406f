#pragma once
// Scalars of the kernel-IR interpreter and the ALU semantics of docs/kernel-ir.md,
// written plainly so they can serve as the oracle for codegen. Tests-only.
#include "ir/uop.hpp"

#include <cstdint>

namespace loom::kernel_scalar {

// One scalar tagged with its dtype. Bool and integers live in `i`, canonical:
// wrapped to the dtype's width, sign-extended for Int32/Int64, zero-extended for
// UInt8/Bool. Floats live in `f`; a Float32 value is always exactly a float.
struct Value {
  DType dtype = DType::Int64;
  int64_t i = 0;
  double f = 0;
};

Value of_int(DType dt, int64_t v);   // wraps to dt's width (floats: converted)
Value of_float(DType dt, double v);  // rounds to float for Float32 (ints: cast rules)
Value zero(DType dt);
Value of_const(const UOp& c);
bool truthy(const Value& v);  // a Bool's value

Value unary(Op op, const Value& a);
Value binary(Op op, const Value& a, const Value& b);  // comparisons give Bool
Value mulacc(const Value& a, const Value& b, const Value& c);
Value cast(const Value& a, DType to);
Value bitcast(const Value& a, DType to);

// REDUCE's starting value: 0, 1, or the lowest value (-inf for floats).
Value reduce_identity(Op op, DType dt);

// Memory: the element of type `dt` at `p`.
Value load(DType dt, const void* p);
void store(void* p, const Value& v);

}  // namespace loom::kernel_scalar
