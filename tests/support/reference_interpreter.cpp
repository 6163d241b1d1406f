#include "support/reference_interpreter.hpp"

#include "support/reference_movement.hpp"
#include "support/reference_scalar.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>
#include <unordered_map>

namespace loom::ref {

namespace {
[[noreturn]] void fail(const UOp& n, std::string_view what) {
  throw Error(fmt::format("reference interpreter: {} {}: {}", op_name(n.op), to_string(n.dtype), what));
}

template <class T>
const T& arg_of(const UOp& n, std::string_view expected) {
  if (const T* a = std::get_if<T>(&n.arg)) return *a;
  fail(n, fmt::format("expected an arg holding {}", expected));
}

const std::vector<int64_t>& int_list_arg(const UOp& n) {
  return arg_of<std::vector<int64_t>>(n, "a list of ints");
}
// Movement sizes at their bindings.
std::vector<int64_t> sizes_arg(const UOp& n) {
  std::vector<int64_t> out;
  for (const Dim& d : arg_of<Shape>(n, "a list of sizes")) out.push_back(d.value());
  return out;
}

// The sources a node's value is computed from: an ASSIGN's value is its value
// source; the target is only written, so it is not evaluated.
std::vector<const UOp*> inputs_of(const UOp& n) {
  if (n.op == Op::BIND) return {n.src.at(1).get()};  // the value; the variable is its name
  if (n.op == Op::ASSIGN) {
    if (n.src.size() != 2) fail(n, fmt::format("expected 2 sources (target, value), got {}", n.src.size()));
    return {n.src[1].get()};
  }
  std::vector<const UOp*> in;
  for (const auto& s : n.src) in.push_back(s.get());
  return in;
}

// ---- leaves ------------------------------------------------------------------------
RefTensor load_buffer(const UOp& n, const BufferSource& buffers) {
  const auto& arg = int_list_arg(n);
  if (arg.size() != 2 || arg[1] < 0) fail(n, fmt::format("expected arg {{id, size}}, got {}", arg));
  const void* bytes = buffers(n.ptr());
  if (bytes == nullptr && arg[1] > 0)
    fail(n, fmt::format("the buffer source gave no data for buffer {}", arg[0]));
  return RefTensor::from_bytes(n.dtype, {arg[1]}, bytes);
}

// IOTA: element i is i, in the node's integer dtype.
RefTensor iota(const UOp& n) {
  const auto shape = sizes_arg(n);
  if (shape.size() != 1 || n.dtype.is_float() || n.dtype.is_bool()) fail(n, "expected a 1-D integer shape");
  RefTensor t = RefTensor::zeros(n.dtype, shape);
  for (int64_t k = 0; k < shape[0]; ++k) t.i[k] = cast_int_to_int(n.dtype, k);
  return t;
}

RefTensor constant(const UOp& n) {
  RefTensor t = RefTensor::zeros(n.dtype, {});
  if (const double* d = std::get_if<double>(&n.arg)) {
    if (n.dtype.is_float())
      t.f[0] = cast_float_to_float(n.dtype, *d);
    else
      t.i[0] = cast_float_to_int(n.dtype, *d);
  } else if (const int64_t* v = std::get_if<int64_t>(&n.arg)) {
    if (n.dtype.is_float())
      t.f[0] = cast_int_to_float(n.dtype, *v);
    else
      t.i[0] = cast_int_to_int(n.dtype, *v);
  } else {
    fail(n, "expected an int64 or double arg");
  }
  return t;
}

RefTensor variable(const UOp& n, const std::map<std::string, int64_t>& vars) {
  const auto& var = arg_of<VarArg>(n, "a VarArg");
  if (n.dtype.is_float()) fail(n, fmt::format("variable '{}' must have an integer dtype", var.name));
  const auto it = vars.find(var.name);
  if (it == vars.end()) fail(n, fmt::format("no value given for variable '{}'", var.name));
  if (it->second < var.min || it->second > var.max)
    fail(n, fmt::format("value {} of variable '{}' is outside its bounds [{}, {}]", it->second, var.name,
                        var.min, var.max));
  RefTensor t = RefTensor::zeros(n.dtype, {});
  t.i[0] = wrap_int(n.dtype, it->second);
  return t;
}

// ---- casts -------------------------------------------------------------------------
RefTensor cast_to(const RefTensor& in, DType to) {
  RefTensor out = RefTensor::zeros(to, in.shape);
  for (int64_t k = 0, n = in.size(); k < n; ++k) {
    if (in.dtype.is_float() && to.is_float()) out.f[k] = cast_float_to_float(to, in.f[k]);
    if (in.dtype.is_float() && !to.is_float()) out.i[k] = cast_float_to_int(to, in.f[k]);
    if (!in.dtype.is_float() && to.is_float()) out.f[k] = cast_int_to_float(to, in.i[k]);
    if (!in.dtype.is_float() && !to.is_float()) out.i[k] = cast_int_to_int(to, in.i[k]);
  }
  return out;
}

// Same-size reinterpretation. Bool is one bit, not a byte, so it bitcasts only to itself.
RefTensor bitcast_to(const UOp& n, const RefTensor& in) {
  const bool same_bits = in.dtype == n.dtype || (in.dtype.itemsize() == n.dtype.itemsize() &&
                                                 !in.dtype.is_bool() && !n.dtype.is_bool());
  if (!same_bits)
    fail(n, fmt::format("cannot reinterpret {} as {}: expected types of the same size, not Bool",
                        to_string(in.dtype), to_string(n.dtype)));
  return RefTensor::from_bytes(n.dtype, in.shape, in.to_bytes().data());
}

// ---- reduce ------------------------------------------------------------------------
RefTensor reduce_identity(const UOp& n, Op op, const RefShape& shape) {
  RefTensor out = RefTensor::zeros(n.dtype, shape);
  const bool is_signed = n.dtype.scalar == Scalar::Int32 || n.dtype.scalar == Scalar::Int64;
  const int64_t int_lowest = !is_signed                        ? 0
                             : n.dtype.scalar == Scalar::Int32 ? std::numeric_limits<int32_t>::min()
                                                               : std::numeric_limits<int64_t>::min();
  if (op == Op::MUL) {
    out.f.assign(out.f.size(), 1.0);
    out.i.assign(out.i.size(), 1);
  } else if (op == Op::MAX) {
    out.f.assign(out.f.size(), -std::numeric_limits<double>::infinity());
    out.i.assign(out.i.size(), int_lowest);
  }
  return out;
}

// Folds every input element, in row-major order, into the output element with
// its reduced axes at 0. Accumulates in the node's dtype.
RefTensor reduce_axis(const UOp& n, const RefTensor& src) {
  const auto& arg = arg_of<ReduceArg>(n, "a ReduceArg");
  if (arg.op != Op::ADD && arg.op != Op::MUL && arg.op != Op::MAX)
    fail(n, fmt::format("reduce op {}: expected ADD, MUL or MAX", op_name(arg.op)));
  std::vector<bool> reduced(src.shape.size(), false);
  for (int64_t a : arg.axes) {
    if (a < 0 || a >= static_cast<int64_t>(src.shape.size()) || reduced[a])
      fail(n, fmt::format("axes {} of shape {}: expected distinct axes", arg.axes, src.shape));
    reduced[a] = true;
  }
  RefShape out_shape = src.shape;
  for (int64_t a : arg.axes) out_shape[a] = 1;
  RefShape out_strides = row_major_strides(out_shape);
  for (int64_t a : arg.axes) out_strides[a] = 0;  // every index along a reduced axis folds into 0

  const RefTensor converted = src.dtype == n.dtype ? RefTensor{} : cast_to(src, n.dtype);
  const RefTensor& in = src.dtype == n.dtype ? src : converted;
  RefTensor out = reduce_identity(n, arg.op, out_shape);
  std::vector<int64_t> idx(in.shape.size(), 0);
  for (int64_t k = 0, count = in.size(); k < count; ++k) {
    int64_t o = 0;
    for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * out_strides[d];
    if (n.dtype.is_float())
      out.f[o] = float_alu(arg.op, n.dtype, out.f[o], in.f[k]);
    else
      out.i[o] = int_alu(arg.op, n.dtype, out.i[o], in.i[k]);
    next_index(idx, in.shape);
  }
  return out;
}

// ---- elementwise ---------------------------------------------------------------------
void check_alu_operands(const UOp& n, const std::vector<const RefTensor*>& in) {
  const size_t arity = is_unary(n.op) ? 1 : is_binary(n.op) ? 2 : 3;
  if (in.size() != arity) fail(n, fmt::format("expected {} sources, got {}", arity, in.size()));
  for (const RefTensor* t : in)
    if (t->shape != in[0]->shape)
      fail(n, fmt::format("source shapes {} and {}: expected equal shapes", in[0]->shape, t->shape));
  const size_t first_value = n.op == Op::WHERE ? 1 : 0;
  if (n.op == Op::WHERE && !in[0]->dtype.is_bool())
    fail(n, fmt::format("condition is {}: expected bool", to_string(in[0]->dtype)));
  for (size_t s = first_value; s < in.size(); ++s)
    if (in[s]->dtype != in[first_value]->dtype)
      fail(n, fmt::format("source dtypes {} and {}: expected equal dtypes", to_string(in[first_value]->dtype),
                          to_string(in[s]->dtype)));
  const DType expected = is_comparison(n.op) ? DType::Bool : in[first_value]->dtype;
  if (n.dtype != expected) fail(n, fmt::format("expected the node's dtype to be {}", to_string(expected)));
}

RefTensor elementwise(const UOp& n, const std::vector<const RefTensor*>& in) {
  check_alu_operands(n, in);
  RefTensor out = RefTensor::zeros(n.dtype, in[0]->shape);
  const DType dt = in.back()->dtype;  // the operands' dtype (WHERE's condition is in[0])
  double fx[3] = {0, 0, 0};
  int64_t ix[3] = {0, 0, 0};
  for (int64_t k = 0, count = out.size(); k < count; ++k) {
    for (size_t s = 0; s < in.size(); ++s) {
      if (in[s]->dtype.is_float())
        fx[s] = in[s]->f[k];
      else
        ix[s] = in[s]->i[k];
    }
    if (n.op == Op::WHERE) {
      if (dt.is_float())
        out.f[k] = ix[0] ? fx[1] : fx[2];
      else
        out.i[k] = ix[0] ? ix[1] : ix[2];
    } else if (is_comparison(n.op)) {
      out.i[k] = dt.is_float() ? float_compare(n.op, fx[0], fx[1]) : int_compare(n.op, ix[0], ix[1]);
    } else if (dt.is_float()) {
      out.f[k] = float_alu(n.op, dt, fx[0], fx[1], fx[2]);
    } else {
      out.i[k] = int_alu(n.op, dt, ix[0], ix[1], ix[2]);
    }
  }
  return out;
}

// ---- one node ------------------------------------------------------------------------
bool is_tensor_level(Op op) {
  switch (op) {
    case Op::BUFFER:
    case Op::CONST:
    case Op::DEFINE_VAR:
    case Op::BIND:
    case Op::IOTA:
    case Op::REDUCE_AXIS:
    case Op::CAST:
    case Op::BITCAST:
    case Op::CONTIGUOUS:
    case Op::DETACH:
    case Op::ASSIGN:
    case Op::COPY: return true;
    default: return is_movement(op) || is_alu(op);
  }
}

struct Environment {
  const BufferSource& buffers;
  const std::map<std::string, int64_t>& vars;
};

RefTensor pass_through(const UOp& n, const RefTensor& value) {
  if (value.dtype != n.dtype)
    fail(n, fmt::format("source is {}: expected the node's dtype", to_string(value.dtype)));
  if (n.op == Op::ASSIGN && n.src[0]->shape() != std::optional<Shape>(value.shape))
    fail(n, fmt::format("value of shape {} assigned to a target of another shape", value.shape));
  return value;
}

RefTensor evaluate_node(const UOp& n, const std::vector<const RefTensor*>& in, const Environment& env) {
  const size_t want = n.op == Op::BUFFER || n.op == Op::CONST || n.op == Op::DEFINE_VAR || n.op == Op::IOTA
                          ? 0
                      : is_alu(n.op) ? in.size()
                                     : 1;
  if (in.size() != want) fail(n, fmt::format("expected {} sources, got {}", want, in.size()));
  switch (n.op) {
    case Op::BUFFER: return load_buffer(n, env.buffers);
    case Op::CONST: return constant(n);
    case Op::DEFINE_VAR: return variable(n, env.vars);
    case Op::BIND: return *in[0];  // a size read as a value: the binding (inputs_of)
    case Op::IOTA: return iota(n);
    case Op::RESHAPE: return reshape(*in[0], sizes_arg(n));
    case Op::PERMUTE: return permute(*in[0], int_list_arg(n));
    case Op::EXPAND: return expand(*in[0], sizes_arg(n));
    case Op::PAD: return pad(*in[0], sizes_arg(n));
    case Op::SHRINK: return shrink(*in[0], sizes_arg(n));
    case Op::FLIP: return flip(*in[0], int_list_arg(n));
    case Op::REDUCE_AXIS: return reduce_axis(n, *in[0]);
    case Op::CAST: return cast_to(*in[0], n.dtype);
    case Op::BITCAST: return bitcast_to(n, *in[0]);
    case Op::CONTIGUOUS:
    case Op::DETACH:
    case Op::COPY:
    case Op::ASSIGN: return pass_through(n, *in[0]);
    default: return elementwise(n, in);  // evaluate_checked let only tensor-level ops through
  }
}

// Checks what every tensor-level node must be: a scalar dtype, a shape, and a
// value of that shape and dtype.
RefTensor evaluate_checked(const UOp& n, const std::vector<const RefTensor*>& in, const Environment& env) {
  if (!is_tensor_level(n.op))
    fail(n, "a kernel-level op; the reference interpreter evaluates tensor-level graphs only");
  if (n.dtype.lanes != 1 || n.dtype.ptr) fail(n, "expected a scalar element dtype");
  if (!n.shape()) fail(n, "the node has no shape: expected a tensor-level node");
  RefTensor out = evaluate_node(n, in, env);
  RefShape said;  // symbolic sizes at their bindings
  for (const Dim& d : *n.shape()) said.push_back(d.value());
  if (out.shape != said || out.dtype != n.dtype)
    fail(n, fmt::format("evaluated to shape {} {} but the node says shape {}", out.shape,
                        to_string(out.dtype), *n.shape()));
  return out;
}
}  // namespace

RefTensor evaluate(const UOpPtr& root, const BufferSource& buffers,
                   const std::map<std::string, int64_t>& vars, const NodeObserver& observe) {
  if (!root) throw Error("reference interpreter: evaluate of a null UOp");
  const std::vector<UOpPtr> order = toposort(root);
  // Pending uses of each node the root needs; a value is dropped after its last use.
  std::unordered_map<const UOp*, int64_t> uses{{root.get(), 1}};
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!uses.contains(it->get())) continue;
    for (const UOp* s : inputs_of(**it)) ++uses[s];
  }
  const Environment env{buffers, vars};
  std::unordered_map<const UOp*, RefTensor> values;
  for (const UOpPtr& node : order) {
    if (!uses.contains(node.get())) continue;
    const std::vector<const UOp*> sources = inputs_of(*node);
    std::vector<const RefTensor*> in;
    for (const UOp* s : sources) in.push_back(&values.at(s));
    RefTensor out = evaluate_checked(*node, in, env);
    if (observe) observe(node, out);
    for (const UOp* s : sources)
      if (--uses[s] == 0) values.erase(s);
    values.emplace(node.get(), std::move(out));
  }
  return std::move(values.at(root.get()));
}

}  // namespace loom::ref
