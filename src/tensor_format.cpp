// Printing tensors the way PyTorch's repr does (torch/_tensor_str.py with its
// default print options), with the shape and dtype always shown as suffixes.
#include "src/tensor_ops.hpp"

#include <loom/format.hpp>

#include <cmath>
#include <ostream>

namespace loom {

using namespace detail;

namespace {

// PyTorch's default print options.
constexpr int64_t kThreshold = 1000;  // more elements than this are summarized
constexpr int64_t kEdgeItems = 3;     // a summarized axis shows its first and last 3
constexpr int64_t kLineWidth = 80;
constexpr int64_t kIndent = 7;  // "tensor("

// The values in row-major order: floats as doubles (exact), the rest as int64 (exact).
struct Flat {
  DType dtype;
  std::vector<double> floats;
  std::vector<int64_t> ints;
};

template <class T, class Out>
std::vector<Out> widened(const Tensor& t) {
  const std::vector<T> v = t.to_vector<T>();
  std::vector<Out> out;
  out.reserve(v.size());
  for (const T& x : v) out.push_back(static_cast<Out>(x));  // halves convert explicitly
  return out;
}

Flat read(const Tensor& t) {
  Flat f{t.dtype(), {}, {}};
  switch (f.dtype.scalar) {
    case Scalar::Float32: f.floats = widened<float, double>(t); break;
    case Scalar::Float64: f.floats = t.to_vector<double>(); break;
    case Scalar::BFloat16: f.floats = widened<bfloat16, double>(t); break;
    case Scalar::Float16: f.floats = widened<float16, double>(t); break;
    case Scalar::Int32: f.ints = widened<int32_t, int64_t>(t); break;
    case Scalar::Int64: f.ints = t.to_vector<int64_t>(); break;
    case Scalar::UInt8: f.ints = widened<uint8_t, int64_t>(t); break;
    case Scalar::Bool: f.ints = widened<bool, int64_t>(t); break;
  }
  return f;
}

bool summarized(int64_t size, bool summarize) { return summarize && size > 2 * kEdgeItems; }

// The indices shown along an axis of `size`: all, or the first and last kEdgeItems.
std::vector<int64_t> shown_along(int64_t size, bool summarize) {
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < size; ++i)
    if (!summarized(size, summarize) || i < kEdgeItems || i >= size - kEdgeItems) idx.push_back(i);
  return idx;
}

// Flat indices of every element that is printed (torch's get_summarized_data).
std::vector<int64_t> shown_elements(const Shape& shape, bool summarize) {
  std::vector<int64_t> flat{0};
  for (int64_t size : shape) {
    std::vector<int64_t> next;
    for (int64_t base : flat)
      for (int64_t i : shown_along(size, summarize)) next.push_back(base * size + i);
    flat = std::move(next);
  }
  return flat;
}

// How one element is written, chosen from all printed elements like torch's
// _Formatter: integral floats as "3.", else 4 decimals, or scientific notation
// when magnitudes span more than 1000x or leave [1e-4, 1e8]; right-aligned.
class ElementFormat {
 public:
  ElementFormat(const Flat& f, const std::vector<int64_t>& shown) : dtype_(f.dtype) {
    if (dtype_.is_float()) choose_float_mode(f, shown);
    for (int64_t i : shown)
      if (!dtype_.is_float() || (std::isfinite(f.floats[i]) && f.floats[i] != 0))
        width_ = std::max(width_, text(f, i).size());
  }
  size_t width() const { return width_; }
  std::string operator()(const Flat& f, int64_t i) const {
    const std::string s = text(f, i);
    return std::string(width_ > s.size() ? width_ - s.size() : 0, ' ') + s;
  }

 private:
  void choose_float_mode(const Flat& f, const std::vector<int64_t>& shown) {
    double lo = INFINITY, hi = 0;
    for (int64_t i : shown) {
      const double v = f.floats[i];
      if (!std::isfinite(v) || v == 0) continue;
      lo = std::min(lo, std::abs(v));
      hi = std::max(hi, std::abs(v));
      integral_ = integral_ && v == std::ceil(v);
    }
    if (hi == 0) return;  // nothing finite and nonzero: integral mode
    scientific_ = hi / lo > 1000 || hi > 1e8 || (!integral_ && lo < 1e-4);
  }
  std::string text(const Flat& f, int64_t i) const {
    if (dtype_.is_bool()) return f.ints[i] ? "True" : "False";
    if (!dtype_.is_float()) return std::to_string(f.ints[i]);
    const double v = f.floats[i];
    if (std::isnan(v)) return "nan";  // Python prints no sign on NaN
    if (scientific_) return fmt::format("{:.4e}", v);
    if (integral_) return fmt::format("{:.0f}", v) + (std::isinf(v) ? "" : ".");
    return fmt::format("{:.4f}", v);
  }

  DType dtype_;
  bool integral_ = true, scientific_ = false;
  size_t width_ = 1;
};

struct Printer {
  const Flat& flat;
  const Shape& shape;
  const ElementFormat& element;
  bool summarize;

  // The sub-tensor at `axis` whose first element is `offset`, torch's
  // _tensor_str_with_formatter: rows wrap at the line width, axes nest with
  // one more space of indent, and a blank line per extra dimension between slices.
  std::string at(size_t axis, int64_t offset, int64_t indent) const {
    if (axis == shape.size()) return element(flat, offset);
    if (axis + 1 == shape.size()) return row(offset, indent);
    const int64_t size = shape[axis], stride = count(Shape(shape.begin() + axis + 1, shape.end()));
    std::vector<std::string> slices;
    for (int64_t i : shown_along(size, summarize)) {
      if (summarized(size, summarize) && i == size - kEdgeItems) slices.push_back("...");
      slices.push_back(at(axis + 1, offset + i * stride, indent + 1));
    }
    const std::string sep =
        fmt::format(",{}{:{}}", std::string(shape.size() - axis - 1, '\n'), "", indent + 1);
    return fmt::format("[{}]", fmt::join(slices, sep));
  }

  std::string row(int64_t offset, int64_t indent) const {
    const int64_t size = shape.back();
    const int64_t per_line =
        std::max<int64_t>(1, (kLineWidth - indent) / static_cast<int64_t>(element.width() + 2));
    std::vector<std::string> items;
    for (int64_t i : shown_along(size, summarize)) {
      if (summarized(size, summarize) && i == size - kEdgeItems) items.push_back(" ...");
      items.push_back(element(flat, offset + i));
    }
    std::vector<std::string> lines;
    for (size_t i = 0; i < items.size(); i += per_line) {
      const auto end = items.begin() + static_cast<int64_t>(std::min(items.size(), i + per_line));
      lines.push_back(fmt::format("{}", fmt::join(items.begin() + static_cast<int64_t>(i), end, ", ")));
    }
    return fmt::format("[{}]", fmt::join(lines, fmt::format(",\n{:{}}", "", indent + 1)));
  }
};

std::string values_text(const Tensor& t) {
  if (t.numel() == 0) return "[]";
  const Flat flat = read(t);
  const bool summarize = t.numel() > kThreshold;
  const ElementFormat element(flat, shown_elements(t.shape(), summarize));
  return Printer{flat, t.shape(), element, summarize}.at(0, 0, kIndent);
}

// torch's _add_suffixes: ", suffix" on the last line while it fits the line
// width (with torch's count of that line's length), else on a line of its own.
std::string with_suffixes(std::string text, const std::vector<std::string>& suffixes) {
  const size_t newline = text.rfind('\n');
  int64_t last = static_cast<int64_t>(text.size()) -
                 (newline == std::string::npos ? -1 : static_cast<int64_t>(newline)) + 1;
  for (const std::string& s : suffixes) {
    const auto len = static_cast<int64_t>(s.size());
    if (last + len + 2 > kLineWidth) {
      text += ",\n" + std::string(kIndent, ' ') + s;
      last = kIndent + len;
    } else {
      text += ", " + s;
      last += len + 2;
    }
  }
  return text + ")";
}

}  // namespace

std::string to_string(const Tensor& t) {
  if (!t.defined()) return "tensor(undefined)";
  return with_suffixes("tensor(" + values_text(t),
                       {"shape=" + str(t.shape()), fmt::format("dtype={}", scalar_name(t.dtype().scalar))});
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << to_string(t); }

}  // namespace loom
