#pragma once
// One element of each tensor-level ALU op and cast, written straight from
// docs/kernel-ir.md "ALU semantics". Values travel as the reference
// interpreter holds them: float dtypes as double (a Float32 value is always an
// exact float), Bool and integer dtypes as int64 normalised to their dtype
// (Bool 0 or 1, UInt8 0..255, Int32 sign-extended).
#include "ir/uop.hpp"

#include <cstdint>

namespace loom::ref {

// v wrapped to dt's width, two's complement (Bool is one bit, UInt8 unsigned).
int64_t wrap_int(DType dt, int64_t v);
// v rounded to dt's precision (Float32: to nearest float; Float64: unchanged).
double round_float(DType dt, double v);

// Unary, binary and ternary ALU ops other than WHERE and the comparisons;
// `dt` is the operands' dtype. Unused operands are ignored. An op the dtype
// does not support (IDIV on floats, EXP2 on ints, ...) throws loom::Error.
// Where the contract leaves a choice, these read it as: MULACC is unfused
// (a*b rounds before the add), and SHR by a count outside [0, bits) gives -1
// for a negative signed value (an arithmetic shift by the whole width).
double float_alu(Op op, DType dt, double a, double b = 0, double c = 0);
int64_t int_alu(Op op, DType dt, int64_t a, int64_t b = 0, int64_t c = 0);
// CMPLT, CMPNE, CMPEQ: ordered on floats except CMPNE (true with NaN).
bool float_compare(Op op, double a, double b);
bool int_compare(Op op, int64_t a, int64_t b);

// CAST of one element to `to`.
int64_t cast_float_to_int(DType to, double v);  // truncates, saturates, NaN -> 0; to Bool: != 0
int64_t cast_int_to_int(DType to, int64_t v);   // wraps; to Bool: != 0
double cast_int_to_float(DType to, int64_t v);  // rounds once, to nearest
double cast_float_to_float(DType to, double v);

}  // namespace loom::ref
