// UOp::make's up-front check (ir/infer.hpp): each op's source count, the dtypes
// its sources and result must have, and the kind of its arg, so a malformed
// node is a loom::Error naming the op where it is built, not a wrong kernel or
// a crash stages later. Tensor-level ops are checked fully (shapes included);
// kernel-level ops by count and arg kind, the contract of docs/kernel-ir.md.
#include "ir/infer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace loom {

namespace {

[[noreturn]] void reject(Op op, DType dt, const std::string& what) {
  throw Error(fmt::format("UOp::make: {} {}: {}", op_name(op), to_string(dt), what));
}

struct Check {
  Op op;
  DType dt;
  const std::vector<UOpPtr>& src;
  const Arg& arg;

  void sources(size_t lo, size_t hi) const {
    if (src.size() < lo || src.size() > hi)
      reject(op, dt,
             fmt::format("{} source{}, expected {}", src.size(), src.size() == 1 ? "" : "s",
                         lo == hi         ? fmt::format("{}", lo)
                         : hi == SIZE_MAX ? fmt::format("at least {}", lo)
                                          : fmt::format("{} to {}", lo, hi)));
  }
  template <class T>
  const T& arg_of(const char* kind) const {
    if (!std::holds_alternative<T>(arg)) reject(op, dt, fmt::format("expected {} as its arg", kind));
    return std::get<T>(arg);
  }
  void no_arg() const {
    if (!std::holds_alternative<std::monostate>(arg)) reject(op, dt, "takes no arg");
  }
  void same_scalar(const UOpPtr& s, const char* which) const {
    if (s->dtype.scalar != dt.scalar)
      reject(op, dt,
             fmt::format("{} is {}, expected {}", which, to_string(s->dtype), scalar_name(dt.scalar)));
  }
  void collective() const {  // ir/collective.hpp: (kind reduce root ranks)
    const auto& v = arg_of<std::vector<int64_t>>("the ints (kind reduce root ranks)");
    if (v.size() != 4 || v[0] < 0 || v[0] > 4 || v[1] < 0 || v[1] > 1 || v[2] < 0 || v[3] < 1)
      reject(
          op, dt,
          fmt::format(
              "arg {}: expected (kind reduce root ranks), kind 0-4, reduce 0-1, root >= 0, ranks >= 1", v));
    if (src.size() > 1 && v[0] != 0)  // a bucket (ir/collective.hpp)
      reject(
          op, dt,
          fmt::format("{} sources: only all_reduce (kind 0) takes a bucket, got kind {}", src.size(), v[0]));
    const Shape* s = shape_of_source();
    if (v[0] == 4 && s && (s->empty() || s->front() != v[3]))  // reduce_scatter: one row per rank
      reject(op, dt,
             fmt::format("reduce_scatter of shape [{}]: expected a leading axis of {} (the ranks)",
                         fmt::join(*s, ", "), v[3]));
  }
  // Null for a source without a shape: shape inference then names the op.
  const Shape* shape_of_source() const { return src[0]->shape() ? &*src[0]->shape() : nullptr; }
  void axes_in_range(const std::vector<int64_t>& axes, size_t rank) const {
    std::vector<int64_t> seen;
    for (int64_t a : axes) {
      if (a < 0 || a >= static_cast<int64_t>(rank))
        reject(op, dt, fmt::format("axis {} is out of range for rank {}", a, rank));
      if (std::find(seen.begin(), seen.end(), a) != seen.end())
        reject(op, dt, fmt::format("axis {} appears twice in {} (the axes must be distinct)", a, axes));
      seen.push_back(a);
    }
  }
};

void check_movement(const Check& c) {
  c.sources(1, 1);
  if (c.op == Op::PERMUTE || c.op == Op::FLIP) {
    const auto& a = c.arg_of<std::vector<int64_t>>("a list of ints");
    if (!c.shape_of_source()) return;
    const Shape& in = *c.shape_of_source();
    if (c.op == Op::FLIP) return c.axes_in_range(a, in.size());
    std::vector<int64_t> sorted = a;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i)
      if (sorted.size() != in.size() || sorted[i] != static_cast<int64_t>(i))
        reject(c.op, c.dt,
               fmt::format("order {} is not a permutation of the {} axes of {}", a, in.size(), in));
    return;
  }
  const auto& a = c.arg_of<Shape>("a list of sizes");
  if (!c.shape_of_source()) return;
  const Shape& in = *c.shape_of_source();
  switch (c.op) {
    case Op::RESHAPE:
      if (element_count(a) != element_count(in))
        reject(c.op, c.dt, fmt::format("cannot view shape {} as {}", in, a));
      break;
    case Op::EXPAND:
      if (a.size() != in.size()) reject(c.op, c.dt, fmt::format("shape {} and {} differ in rank", in, a));
      for (size_t i = 0; i < a.size(); ++i)
        if (in[i] != a[i] && in[i] != 1) reject(c.op, c.dt, fmt::format("cannot expand {} to {}", in, a));
      break;
    case Op::PAD:
    case Op::SHRINK:
      if (a.size() != 2 * in.size())
        reject(c.op, c.dt, fmt::format("{} bounds for shape {}, expected two per axis", a.size(), in));
      for (size_t i = 0; i < in.size(); ++i) {
        const Dim &lo = a[2 * i], &hi = a[2 * i + 1];
        if (c.op == Op::PAD && (lo < 0 || hi < 0))
          reject(c.op, c.dt, fmt::format("axis {} padding ({}, {}) must be non-negative", i, lo, hi));
        if (c.op == Op::SHRINK && (lo < 0 || lo > hi || hi > in[i]))
          reject(c.op, c.dt, fmt::format("axis {} bounds ({}, {}) do not fit shape {}", i, lo, hi, in));
      }
      break;
    default: break;
  }
  for (const Dim& d : a)
    if (d.min() < 0) reject(c.op, c.dt, fmt::format("negative size in {}", a));
}

void check_alu(const Check& c) {
  c.no_arg();
  if (is_unary(c.op)) c.sources(1, 1);
  if (is_binary(c.op)) c.sources(2, 2);
  if (is_ternary(c.op)) c.sources(3, 3);
  // Codegen has TANH's, SIGMOID's and ERF's forms for Float32 only (the front end builds
  // other floats' from EXP).
  if ((c.op == Op::TANH || c.op == Op::SIGMOID || c.op == Op::ERF) && c.dt.scalar != Scalar::Float32)
    reject(c.op, c.dt, fmt::format("{} of {}, expected float32", op_name(c.op), to_string(c.dt)));
  if (c.op == Op::WHERE) {
    if (!c.src[0]->dtype.is_bool())
      reject(c.op, c.dt, fmt::format("condition is {}, expected bool", to_string(c.src[0]->dtype)));
    c.same_scalar(c.src[1], "the first branch");
    c.same_scalar(c.src[2], "the second branch");
    return;
  }
  if (is_comparison(c.op)) {
    if (!c.dt.is_bool()) reject(c.op, c.dt, "a comparison gives bool");
    if (c.src[0]->dtype.scalar != c.src[1]->dtype.scalar)
      reject(c.op, c.dt,
             fmt::format("compares {} with {}", to_string(c.src[0]->dtype), to_string(c.src[1]->dtype)));
    return;
  }
  for (size_t i = 0; i < c.src.size(); ++i)
    c.same_scalar(c.src[i], i == 0 ? "source 0" : i == 1 ? "source 1" : "source 2");
}

void check_kernel_op(const Check& c) {
  constexpr size_t any = SIZE_MAX;
  switch (c.op) {
    case Op::DEFINE_GLOBAL:
      c.sources(0, 0);
      if (c.arg_of<int64_t>("an argument slot") < 0) reject(c.op, c.dt, "a negative argument slot");
      if (!c.dt.ptr) reject(c.op, c.dt, "a buffer parameter has a pointer dtype");
      break;
    case Op::RANGE:
      c.sources(1, 1);
      c.arg_of<AxisArg>("an axis");
      if (!c.src[0]->dtype.is_int()) reject(c.op, c.dt, "its end must be an integer");
      break;
    case Op::INDEX: c.sources(1, any); break;  // a 0-d BUFFERIZE is indexed by nothing
    case Op::LOAD: c.sources(1, any); break;
    case Op::STORE: c.sources(2, any); break;
    case Op::REDUCE: {
      c.sources(1, any);
      const Op r = c.arg_of<ReduceArg>("a reduce op").op;
      if (r != Op::ADD && r != Op::MUL && r != Op::MAX)
        reject(c.op, c.dt, fmt::format("cannot reduce by {}", op_name(r)));
      break;
    }
    case Op::END:
    case Op::BUFFERIZE:
    case Op::AFTER:
    case Op::VECTORIZE: c.sources(1, any); break;
    case Op::GEP: c.sources(1, 1); break;
    case Op::DEFINE_REG: c.sources(0, 0); break;
    case Op::DOT2:
      c.sources(3, 3);
      if (!c.dt.is_float() || c.src[2]->dtype != c.dt || c.src[0]->dtype.lanes != 2 * c.dt.lanes ||
          c.src[1]->dtype.lanes != 2 * c.dt.lanes || !c.src[0]->dtype.is_float() ||
          !c.src[1]->dtype.is_float())
        reject(
            c.op, c.dt,
            fmt::format("sums pairs of {} and {} into {}: expected floats, twice its lanes",
                        to_string(c.src[0]->dtype), to_string(c.src[1]->dtype), to_string(c.src[2]->dtype)));
      break;
    default: break;  // SINK: any roots
  }
}

void check_tensor_op(const Check& c) {
  switch (c.op) {
    case Op::BUFFER: {
      c.sources(0, 0);
      const auto& a = c.arg_of<std::vector<int64_t>>("(id size)");
      if (a.size() != 2 || a[1] < 0)
        reject(c.op, c.dt, fmt::format("expected (id size) with size >= 0, got {}", a));
      break;
    }
    case Op::CONST: {
      c.sources(0, 0);
      const bool ok =
          c.dt.is_float() ? std::holds_alternative<double>(c.arg) : std::holds_alternative<int64_t>(c.arg);
      if (!ok)
        reject(
            c.op, c.dt,
            c.dt.is_float() ? "a float constant holds a double" : "an integer or bool constant holds an int");
      break;
    }
    case Op::BIND: {
      c.sources(2, 2);
      if (c.src[0]->op != Op::DEFINE_VAR || c.src[1]->op != Op::CONST)
        reject(c.op, c.dt, "expected (DEFINE_VAR, CONST value)");
      const auto& v = c.src[0]->get<VarArg>();
      const int64_t n = c.src[1]->const_int();
      if (n < v.min || n > v.max)
        reject(
            c.op, c.dt,
            fmt::format("variable '{}' bound to {}, outside its bounds [{}, {}]", v.name, n, v.min, v.max));
      break;
    }
    case Op::DEFINE_VAR: {
      c.sources(0, 0);
      const auto& v = c.arg_of<VarArg>("a variable");
      if (v.min > v.max)
        reject(c.op, c.dt, fmt::format("variable '{}' has min {} > max {}", v.name, v.min, v.max));
      break;
    }
    case Op::IOTA: {
      c.sources(0, 0);
      const auto& a = c.arg_of<Shape>("sizes (n)");
      if (a.size() != 1 || a[0].min() < 0)
        reject(c.op, c.dt, fmt::format("expected (n) with n >= 0, got {}", a));
      break;
    }
    case Op::REDUCE_AXIS: {
      c.sources(1, 1);
      const auto& r = c.arg_of<ReduceArg>("a reduce op and axes");
      if (r.op != Op::ADD && r.op != Op::MUL && r.op != Op::MAX)
        reject(c.op, c.dt, fmt::format("cannot reduce by {}", op_name(r.op)));
      if (c.shape_of_source()) c.axes_in_range(r.axes, c.shape_of_source()->size());
      break;
    }
    case Op::CAST:
      c.sources(1, 1);
      c.no_arg();
      break;
    case Op::BITCAST:
      c.sources(1, 1);
      c.no_arg();
      if (c.src[0]->dtype.itemsize() != c.dt.itemsize())
        reject(c.op, c.dt,
               fmt::format("cannot reinterpret {} as {}: sizes differ", to_string(c.src[0]->dtype),
                           to_string(c.dt)));
      break;
    case Op::CONTIGUOUS:
    case Op::DETACH:
    case Op::COPY:
      c.sources(1, 1);
      c.same_scalar(c.src[0], "the source");
      break;
    case Op::COLLECTIVE:
      c.sources(1, SIZE_MAX);
      for (const UOpPtr& s : c.src) c.same_scalar(s, "a source");
      c.collective();
      break;
    case Op::ASSIGN:
      c.sources(2, 2);
      c.same_scalar(c.src[0], "the target");
      c.same_scalar(c.src[1], "the value");
      break;
    default:
      if (is_movement(c.op)) return check_movement(c);
      if (is_alu(c.op)) return check_alu(c);
      check_kernel_op(c);
  }
}

}  // namespace

void validate_uop(Op op, DType dtype, const std::vector<UOpPtr>& src, const Arg& arg) {
  if (static_cast<int>(op) >= kNumOps)
    throw Error(fmt::format("UOp::make: op {} does not exist", static_cast<int>(op)));
  check_tensor_op(Check{op, dtype, src, arg});
}

}  // namespace loom
