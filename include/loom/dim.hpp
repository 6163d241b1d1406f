#pragma once
// loom::Dim: the size of one axis, either a number or a symbolic size: an integer
// expression over bounded variables (loom::Variable), each bound to a value, such
// as `T` or `2*T + 1`. A Shape is a list of them. Graphs built over symbolic sizes
// compile kernels that take the variables' values at run time, so one kernel
// serves every value in the variables' bounds (docs/symbolic.md).
//
// A Dim converts to int64_t only when it is a number: code that needs a concrete
// size and meets a symbolic one throws loom::Error naming the variable, never
// computes with one value as if it were all of them.
#include <loom/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace loom {

class UOp;

class Dim {
 public:
  Dim() = default;
  template <std::integral I>
  Dim(I n) : value_(static_cast<int64_t>(n)) {}  // NOLINT: an integer is a size (a double is not)
  // A symbolic size: an Int64 expression whose leaves are bound variables
  // (BIND) or variables (DEFINE_VAR) and constants. A constant expression
  // becomes a number.
  explicit Dim(std::shared_ptr<const UOp> expr);

  bool is_symbolic() const { return expr_ != nullptr; }
  // A number, or a symbolic size whose every variable is bound.
  bool is_bound() const { return bound_; }
  // The number, or the symbolic size's value under its variables' bindings
  // (Error when a variable in it is not bound).
  int64_t value() const;
  // Bounds over every value the variables may take (the number twice for a number).
  int64_t min() const;
  int64_t max() const;
  // The expression (null for a number).
  const std::shared_ptr<const UOp>& expr() const { return expr_; }
  // The number; Error naming the variable when symbolic.
  int64_t concrete(std::string_view what = {}) const;
  operator int64_t() const { return concrete(); }  // NOLINT: see the file comment

  // "17", "T=17", "2*T+1=35"; unbound: "T".
  std::string str() const;

  // Structural: the same number, or the same expression (bindings included).
  friend bool operator==(const Dim& a, const Dim& b);
  template <std::integral I>
  friend bool operator==(const Dim& a, I b) {
    return !a.is_symbolic() && a.value_ == static_cast<int64_t>(b);
  }

 private:
  int64_t value_ = 0;  // the number; for a symbolic size, its bound value (or 0)
  bool bound_ = true;
  std::shared_ptr<const UOp> expr_;
};

// Arithmetic builds symbolic sizes; on numbers it is integer arithmetic. `/` and
// `%` floor (sizes are non-negative). Comparisons are decided over the variables'
// bounds, and throw loom::Error when the bounds do not decide them.
Dim operator+(const Dim& a, const Dim& b);
Dim operator-(const Dim& a, const Dim& b);
Dim operator*(const Dim& a, const Dim& b);
Dim operator/(const Dim& a, const Dim& b);
Dim operator%(const Dim& a, const Dim& b);
bool operator<(const Dim& a, const Dim& b);
inline bool operator>(const Dim& a, const Dim& b) { return b < a; }
inline bool operator<=(const Dim& a, const Dim& b) { return !(b < a); }
inline bool operator>=(const Dim& a, const Dim& b) { return !(a < b); }
Dim max(const Dim& a, const Dim& b);
Dim min(const Dim& a, const Dim& b);

// Mixed with C++ integers (templates, so they beat the built-in operators on the
// Dim's conversion to int64_t).
#define LOOM_DIM_MIXED(op, R)                 \
  template <std::integral I>                  \
  R operator op(const Dim& a, I b) {          \
    return a op Dim(static_cast<int64_t>(b)); \
  }                                           \
  template <std::integral I>                  \
  R operator op(I a, const Dim& b) {          \
    return Dim(static_cast<int64_t>(a)) op b; \
  }
LOOM_DIM_MIXED(+, Dim)
LOOM_DIM_MIXED(-, Dim)
LOOM_DIM_MIXED(*, Dim)
LOOM_DIM_MIXED(/, Dim)
LOOM_DIM_MIXED(%, Dim)
LOOM_DIM_MIXED(<, bool)
LOOM_DIM_MIXED(>, bool)
LOOM_DIM_MIXED(<=, bool)
LOOM_DIM_MIXED(>=, bool)
#undef LOOM_DIM_MIXED
template <std::integral I>
bool operator==(I a, const Dim& b) {
  return b == a;
}
template <std::integral I>
bool operator!=(const Dim& a, I b) {
  return !(a == b);
}
template <std::integral I>
bool operator!=(I a, const Dim& b) {
  return !(b == a);
}
inline Dim& operator+=(Dim& a, const Dim& b) { return a = a + b; }
inline Dim& operator-=(Dim& a, const Dim& b) { return a = a - b; }
inline Dim& operator*=(Dim& a, const Dim& b) { return a = a * b; }
inline Dim& operator/=(Dim& a, const Dim& b) { return a = a / b; }

// A tensor's sizes. It converts to and from std::vector<int64_t> (the conversion to
// numbers throws loom::Error naming the variable when a size is symbolic), so code
// written for numeric shapes keeps working.
class Shape : public std::vector<Dim> {
 public:
  using std::vector<Dim>::vector;
  Shape() = default;
  Shape(std::initializer_list<Dim> dims) : std::vector<Dim>(dims) {}
  Shape(std::vector<Dim> dims) : std::vector<Dim>(std::move(dims)) {}  // NOLINT
  template <std::integral I>
  Shape(const std::vector<I>& sizes) : std::vector<Dim>(sizes.begin(), sizes.end()) {}  // NOLINT
  operator std::vector<int64_t>() const;                                                // NOLINT

  friend bool operator==(const Shape& a, const Shape& b) {
    return static_cast<const std::vector<Dim>&>(a) == static_cast<const std::vector<Dim>&>(b);
  }
  template <std::integral I>
  friend bool operator==(const Shape& a, const std::vector<I>& b) {
    return a == Shape(b);
  }
};

std::ostream& operator<<(std::ostream& os, const Dim& d);
std::ostream& operator<<(std::ostream& os, const Shape& s);

// The shape's numbers; Error naming the variable when a size is symbolic.
std::vector<int64_t> concrete(const Shape& shape, std::string_view what = {});
// The sizes as a Shape.
Shape to_shape(const std::vector<int64_t>& sizes);
bool is_symbolic(const Shape& shape);
// "[4, T=17, 64]".
std::string str(const Shape& shape);

}  // namespace loom

// fmt: a size was a number that fmt printed, so a Dim and a Shape print too ("T=17",
// "[4, T=17, 64]"), with or without <fmt/ranges.h>.
// No format spec; the text is unquoted inside ranges.
template <>
struct fmt::formatter<loom::Dim> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  auto format(const loom::Dim& d, fmt::format_context& ctx) const {
    const std::string text = d.str();
    return std::copy(text.begin(), text.end(), ctx.out());
  }
};

template <>
struct fmt::formatter<loom::Shape> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  auto format(const loom::Shape& s, fmt::format_context& ctx) const {
    const std::string text = loom::str(s);
    return std::copy(text.begin(), text.end(), ctx.out());
  }
};
