// Shape of a tensor-level node, derived from its sources and arg. The front end
// validates user input (with messages naming the op); this only derives.
#include "ir/infer.hpp"

#include "ir/collective.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace loom {

namespace {
const Shape* first_shape(const std::vector<UOpPtr>& src, size_t from = 0) {
  for (size_t i = from; i < src.size(); ++i)
    if (src[i]->shape()) return &*src[i]->shape();
  return nullptr;
}
// A movement or reduce op's input shape; a kernel-level source has none, and
// reading it anyway would be undefined behaviour, so it is an error.
const Shape& src_shape(Op op, const std::vector<UOpPtr>& src) {
  if (src.empty() || !src[0]->shape())
    throw Error(std::string(op_name(op)) + ": expected a tensor-level source with a shape, got " +
                (src.empty() ? "no source" : std::string(op_name(src[0]->op)) + " (no shape)"));
  return *src[0]->shape();
}
}  // namespace

std::optional<Shape> infer_shape(Op op, const std::vector<UOpPtr>& src, const Arg& arg) {
  switch (op) {
    case Op::BUFFER: return Shape{std::get<std::vector<int64_t>>(arg).at(1)};
    case Op::CONST:
    case Op::DEFINE_VAR:
    case Op::BIND: return Shape{};
    case Op::IOTA:
    case Op::RESHAPE:
    case Op::EXPAND: return std::get<Shape>(arg);
    case Op::PERMUTE: {
      const Shape& in = src_shape(op, src);
      Shape out;
      for (int64_t a : std::get<std::vector<int64_t>>(arg)) out.push_back(in.at(a));
      return out;
    }
    case Op::PAD:
    case Op::SHRINK: {
      Shape out = src_shape(op, src);
      const auto& b = std::get<Shape>(arg);  // flat (lo, hi) pairs
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = op == Op::PAD ? out[i] + b.at(2 * i) + b.at(2 * i + 1) : b.at(2 * i + 1) - b.at(2 * i);
      return out;
    }
    case Op::FLIP: return src.at(0)->shape();
    case Op::REDUCE_AXIS: {
      Shape out = src_shape(op, src);
      for (int64_t a : std::get<ReduceArg>(arg).axes) out.at(a) = 1;
      return out;
    }
    case Op::COLLECTIVE: {  // ir/collective.hpp: (kind reduce root ranks)
      if (src.size() > 1) return Shape{bucket_layout(src).elements};
      const Shape* s = first_shape(src, 0);
      if (!s) return std::nullopt;
      const auto& v = std::get<std::vector<int64_t>>(arg);
      Shape out = *s;
      if (v.at(0) == 3) out.insert(out.begin(), v.at(3));        // all_gather: a row per rank
      if (v.at(0) == 4 && !out.empty()) out.erase(out.begin());  // reduce_scatter: this rank's row
      return out;
    }
    case Op::WHERE:
    case Op::MULACC:
    case Op::CAST:
    case Op::BITCAST:
    case Op::CONTIGUOUS:
    case Op::DETACH:
    case Op::ASSIGN:
    case Op::COPY: {
      const Shape* s = first_shape(src, op == Op::WHERE ? 1 : 0);
      return s ? std::optional<Shape>(*s) : std::nullopt;
    }
    default:
      if (is_alu(op)) {
        // Kernel-level index math (over RANGEs) has no shape.
        for (const auto& s : src)
          if (!s->shape()) return std::nullopt;
        return *src.at(0)->shape();
      }
      return std::nullopt;
  }
}

void check_size(Op op, DType dtype, const std::optional<Shape>& shape) {
  if (!shape) return;
  int64_t n = 1, bytes = 0;  // at the largest values of the variables
  for (const Dim& d : *shape)
    if (__builtin_mul_overflow(n, d.max(), &n))
      throw Error(fmt::format("{}: shape {} has more elements than int64 can count", op_name(op), *shape));
  if (__builtin_mul_overflow(n, int64_t{dtype.itemsize()}, &bytes))
    throw Error(fmt::format("{}: shape {} of {} is {} elements, more than 2^63 bytes", op_name(op), *shape,
                            to_string(dtype), n));
}

}  // namespace loom
