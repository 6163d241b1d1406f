#pragma once
// loom::Tensor: a cheap, lazy handle. Operations build a graph; realize() (or
// reading the data) schedules, compiles and runs it. Copies share one tensor,
// like torch::Tensor. docs/api.md is the reference; docs/semantics.md the
// promotion, division and cast rules and every deviation from PyTorch.
#include <loom/dtype.hpp>
#include <loom/error.hpp>
#include <loom/half.hpp>

#include <concepts>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace loom {

namespace detail {
struct TensorNode;
}

// A C++ number usable beside a tensor (bool is not a number here).
template <class T>
concept Number = (std::integral<T> || std::floating_point<T>)&&!std::same_as<T, bool>;

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() == false; using it throws loom::Error
  bool defined() const { return node_ != nullptr; }

  // ---- creation ----
  template <class T>
  static Tensor from_vector(const std::vector<T>& data, Shape shape);
  static Tensor scalar(double value, DType dtype = DType::Float32);
  static Tensor full(Shape shape, double value, DType dtype = DType::Float32);
  static Tensor zeros(Shape shape, DType dtype = DType::Float32);
  static Tensor ones(Shape shape, DType dtype = DType::Float32);
  static Tensor arange(int64_t stop);                                   // Int32
  static Tensor arange(int64_t start, int64_t stop, int64_t step = 1);  // Int32 (values must fit)
  static Tensor arange(int64_t start, int64_t stop, int64_t step, DType dtype);
  // Up to a symbolic size (a bound variable, docs/symbolic.md): one kernel for every value.
  static Tensor arange(const Dim& stop);                                   // Int32
  static Tensor arange(int64_t start, const Dim& stop, int64_t step = 1);  // Int32
  static Tensor arange(int64_t start, const Dim& stop, int64_t step, DType dtype);
  static Tensor eye(int64_t n, DType dtype = DType::Float32);
  static Tensor rand(Shape shape, DType dtype = DType::Float32);   // uniform [0, 1)
  static Tensor randn(Shape shape, DType dtype = DType::Float32);  // standard normal
  static Tensor randint(int64_t low, int64_t high, Shape shape);   // Int32 in [low, high)

  // A copy of the data in a buffer of its own.
  Tensor clone() const;
  // Writes `value` into this tensor (through a view, into the tensor it was cut from), as
  // PyTorch's copy_: the value broadcasts to this tensor's shape and is cast to its dtype.
  // Graphs built from this tensor before the assign keep seeing the old value.
  Tensor& assign(const Tensor& value);
  template <Number T>
  Tensor& assign(T v) {  // every element becomes v (PyTorch's fill_)
    return assign(like_scalar(v));
  }
  // In place, as PyTorch's `a += b`: `a.assign(a + b)`, so copies of the handle and the tensor
  // a view was cut from see it. The result must keep this tensor's shape, and its dtype must
  // cast to this tensor's by PyTorch's rule: no float result into an integer tensor, and only
  // Bool into Bool.
  Tensor& operator+=(const Tensor& other);
  Tensor& operator-=(const Tensor& other);
  Tensor& operator*=(const Tensor& other);
  Tensor& operator/=(const Tensor& other);
#define LOOM_COMPOUND_WITH_NUMBER(op) \
  template <Number T>                 \
  Tensor& operator op(T v) {          \
    return *this op like_scalar(v);   \
  }
  LOOM_COMPOUND_WITH_NUMBER(+=)
  LOOM_COMPOUND_WITH_NUMBER(-=)
  LOOM_COMPOUND_WITH_NUMBER(*=)
  LOOM_COMPOUND_WITH_NUMBER(/=)
#undef LOOM_COMPOUND_WITH_NUMBER
  // PyTorch's in-place methods, by the rules above (src/tensor_compound_assign.cpp):
  // add_ and sub_ scale `other` by alpha; copy_ and fill_ are assign; zero_ is fill_(0).
  Tensor& add_(const Tensor& other, double alpha = 1);
  Tensor& sub_(const Tensor& other, double alpha = 1);
  Tensor& mul_(const Tensor& other);
  Tensor& div_(const Tensor& other);
#define LOOM_IN_PLACE_WITH_NUMBER(name) \
  template <Number T>                   \
  Tensor& name(T v) {                   \
    return name(like_scalar(v));        \
  }
  LOOM_IN_PLACE_WITH_NUMBER(add_)
  LOOM_IN_PLACE_WITH_NUMBER(sub_)
  LOOM_IN_PLACE_WITH_NUMBER(mul_)
  LOOM_IN_PLACE_WITH_NUMBER(div_)
#undef LOOM_IN_PLACE_WITH_NUMBER
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(double value);
  Tensor& zero_();
  Tensor& clamp_(double lo, double hi);
  Tensor& masked_fill_(const Tensor& mask, double value);

  // ---- properties ----
  const Shape& shape() const;
  DType dtype() const;
  int64_t ndim() const;
  int64_t numel() const;

  // ---- elementwise ----
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor exp2() const;
  Tensor log2() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor abs() const;
  Tensor sign() const;
  Tensor reciprocal() const;
  Tensor square() const;
  // Rounding, as PyTorch's: integer tensors come back unchanged (Bool is an error). round
  // rounds half to even, and with `decimals` rounds x * 10^decimals.
  Tensor floor() const;
  Tensor ceil() const;
  Tensor trunc() const;
  Tensor round(int decimals = 0) const;
  // log(1 + x) and e^x - 1, accurate where x is near 0 (integers compute in Float32).
  Tensor log1p() const;
  Tensor expm1() const;
  // Activations (PyTorch's torch.nn.functional forms; float tensors only but erf).
  Tensor erf() const;                                        // integers compute in Float32
  Tensor gelu(std::string_view approximate = "none") const;  // "none" (erf) or "tanh"
  Tensor silu() const;
  Tensor softplus(double beta = 1, double threshold = 20) const;  // x where beta * x > threshold
  Tensor leaky_relu(double negative_slope = 0.01) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(double exponent) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor clamp(double lo, double hi) const;
  Tensor clamp_min(double lo) const;  // clamp with one bound (PyTorch's clamp(min=lo))
  Tensor clamp_max(double hi) const;
  Tensor floor_div(const Tensor& other) const;  // floors like Python
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  // The same ops with a C++ number, which takes this tensor's dtype within its category.
#define LOOM_WITH_NUMBER(name)   \
  template <Number T>            \
  Tensor name(T v) const {       \
    return name(like_scalar(v)); \
  }
  LOOM_WITH_NUMBER(floor_div)
  LOOM_WITH_NUMBER(maximum)
  LOOM_WITH_NUMBER(minimum)
  LOOM_WITH_NUMBER(lt)
  LOOM_WITH_NUMBER(le)
  LOOM_WITH_NUMBER(gt)
  LOOM_WITH_NUMBER(ge)
  LOOM_WITH_NUMBER(eq)
  LOOM_WITH_NUMBER(ne)
#undef LOOM_WITH_NUMBER
  Tensor logical_and(const Tensor& other) const;  // Bool only
  Tensor logical_or(const Tensor& other) const;
  Tensor logical_not() const;
  Tensor where(const Tensor& a, const Tensor& b) const;  // this is the condition
  // A number takes the other branch's dtype within its category, as in `t + v`.
  template <Number T>
  Tensor where(const Tensor& a, T b) const {
    return where(a, a.like_scalar(b));
  }
  template <Number T>
  Tensor where(T a, const Tensor& b) const {
    return where(b.like_scalar(a), b);
  }
  Tensor cast(DType dtype) const;
  // value (in this tensor's dtype) where the Bool mask is true; both broadcast, as in PyTorch.
  Tensor masked_fill(const Tensor& mask, double value) const;
  // The upper (lower) triangle of the last two axes: kept where col - row >= k (<= k), else 0.
  Tensor triu(int64_t k = 0) const;
  Tensor tril(int64_t k = 0) const;

  // ---- reductions ----
  // An empty axis list reduces all axes. keepdim is a bool: t.sum(1, 2) does not compile.
  Tensor sum() const { return sum(std::vector<int>{}, false); }
  Tensor sum(int axis, bool keepdim = false) const { return sum(std::vector<int>{axis}, keepdim); }
  Tensor sum(std::vector<int> axes, bool keepdim = false) const;
  Tensor max() const { return max(std::vector<int>{}, false); }
  Tensor max(int axis, bool keepdim = false) const { return max(std::vector<int>{axis}, keepdim); }
  Tensor max(std::vector<int> axes, bool keepdim = false) const;
  Tensor min() const { return min(std::vector<int>{}, false); }
  Tensor min(int axis, bool keepdim = false) const { return min(std::vector<int>{axis}, keepdim); }
  Tensor min(std::vector<int> axes, bool keepdim = false) const;
  Tensor mean() const { return mean(std::vector<int>{}, false); }
  Tensor mean(int axis, bool keepdim = false) const { return mean(std::vector<int>{axis}, keepdim); }
  Tensor mean(std::vector<int> axes, bool keepdim = false) const;
  Tensor prod() const { return prod(std::vector<int>{}, false); }
  Tensor prod(int axis, bool keepdim = false) const { return prod(std::vector<int>{axis}, keepdim); }
  Tensor prod(std::vector<int> axes, bool keepdim = false) const;
  // Variance over `dims` (all when empty) divided by max(0, N - correction), as PyTorch's
  // var(dim, correction=, keepdim=): N - correction <= 0 gives inf, or NaN where all are equal.
  Tensor var(std::vector<int> dims = {}, double correction = 1, bool keepdim = false) const;
  Tensor var(int dim, double correction = 1, bool keepdim = false) const {
    return var(std::vector<int>{dim}, correction, keepdim);
  }
  Tensor std(std::vector<int> dims = {}, double correction = 1, bool keepdim = false) const;
  Tensor std(int dim, double correction = 1, bool keepdim = false) const {
    return std(std::vector<int>{dim}, correction, keepdim);
  }
  // Whether any (every) element is nonzero, over `axes` (all when empty): Bool. Over no
  // elements any is false and all true.
  Tensor any() const { return any(std::vector<int>{}, false); }
  Tensor any(int axis, bool keepdim = false) const { return any(std::vector<int>{axis}, keepdim); }
  Tensor any(std::vector<int> axes, bool keepdim = false) const;
  Tensor all() const { return all(std::vector<int>{}, false); }
  Tensor all(int axis, bool keepdim = false) const { return all(std::vector<int>{axis}, keepdim); }
  Tensor all(std::vector<int> axes, bool keepdim = false) const;
  // The running sum along `dim`, as PyTorch's cumsum: integers and Bool sum in Int64.
  Tensor cumsum(int dim) const;
  // The k largest (smallest) elements along `dim`, sorted, and their Int64 indices; NaN is
  // the largest, as in PyTorch. Among equal values the lower index comes first
  // (docs/semantics.md: PyTorch's CPU order at ties is that of std::nth_element).
  std::pair<Tensor, Tensor> topk(int64_t k, int dim = -1, bool largest = true) const;
  // The values sorted along `dim` and their Int64 indices, stable (equal values keep their
  // order), NaN last ascending and first descending, as torch.sort(stable=True). O(n^2) along
  // the axis, as topk.
  std::pair<Tensor, Tensor> sort(int dim = -1, bool descending = false) const;
  Tensor argsort(int dim = -1, bool descending = false) const;
  // torch.linalg.vector_norm: (sum |x|^p)^(1/p) over `dims` (all when empty); p = inf, -inf, 0,
  // 1 and 2 as PyTorch computes them. Float tensors only.
  Tensor norm(double p = 2, std::vector<int> dims = {}, bool keepdim = false) const;
  Tensor argmax(int axis) const;  // Int32, first index on ties
  Tensor argmin(int axis) const;
  Tensor softmax(int axis = -1) const;
  Tensor log_softmax(int axis = -1) const;
  Tensor logsumexp(int axis) const;
#define LOOM_NO_INT_KEEPDIM(name)                    \
  template <class A, class B>                        \
  requires(!std::same_as<B, bool>) Tensor name(A, B) \
  const = delete;
  LOOM_NO_INT_KEEPDIM(sum)
  LOOM_NO_INT_KEEPDIM(max)
  LOOM_NO_INT_KEEPDIM(min)
  LOOM_NO_INT_KEEPDIM(mean)
  LOOM_NO_INT_KEEPDIM(prod)
  LOOM_NO_INT_KEEPDIM(any)
  LOOM_NO_INT_KEEPDIM(all)
#undef LOOM_NO_INT_KEEPDIM

  // ---- movement ----
  Tensor reshape(Shape shape) const;  // one size may be -1
  Tensor permute(std::vector<int> order) const;
  Tensor transpose(int a = -2, int b = -1) const;
  Tensor expand(Shape shape) const;                                                      // -1 keeps a size
  Tensor pad(std::vector<std::pair<int64_t, int64_t>> padding, double value = 0) const;  // (lo, hi) per axis
  Tensor shrink(std::vector<std::pair<Dim, Dim>> bounds) const;  // [start, end) per axis
  template <std::integral I>
  Tensor shrink(const std::vector<std::pair<I, I>>& bounds) const {
    return shrink(std::vector<std::pair<Dim, Dim>>(bounds.begin(), bounds.end()));
  }
  Tensor flip(std::vector<int> axes) const;
  Tensor flip(int axis) const { return flip(std::vector<int>{axis}); }
  // Tiles the tensor: repeats[i] copies along axis i; extra leading repeats add axes (PyTorch's repeat).
  Tensor repeat(Shape repeats) const;
  Tensor squeeze(int axis) const;  // a no-op on an axis whose size is not 1
  Tensor unsqueeze(int axis) const;
  Tensor flatten(int start = 0, int end = -1) const;
  Tensor slice(int axis, Dim start, Dim stop, int64_t step = 1) const;
  // Views of consecutive pieces along `axis`, as PyTorch's: split into pieces of `size` (the
  // last one smaller), or of the given sizes (which must add up to the axis); chunk into at
  // most `chunks` pieces of ceil(n / chunks); unbind into every index, the axis removed.
  // Writes through a piece reach this tensor.
  std::vector<Tensor> split(int64_t size, int axis = 0) const;
  std::vector<Tensor> split(const std::vector<int64_t>& sizes, int axis = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int axis = 0) const;
  std::vector<Tensor> unbind(int axis = 0) const;
  Tensor gather(int axis, const Tensor& index) const;
  Tensor index_select(int axis, const Tensor& index) const;
  Tensor one_hot(int64_t num_classes) const;  // integer tensors; Int32 result

  // numpy semantics: 1-D operands, broadcast batch dimensions.
  Tensor matmul(const Tensor& other) const;

  // ---- autodiff (docs/api.md, "Autodiff") ----
  // Marks a float tensor as a leaf whose gradient backward() accumulates. A
  // leaf is realized into a buffer of its own, so it never merges with an equal
  // constant. Error on an integer or Bool tensor, or on turning it off for a
  // tensor that only depends on a leaf (use detach()).
  Tensor& requires_grad_(bool on = true);
  // A leaf marked by requires_grad_, or a tensor whose graph depends on one.
  bool requires_grad() const;
  // Accumulates d(this)/d(leaf) into the grad() of every leaf this tensor
  // depends on. Error unless this tensor has one element and depends on a leaf.
  void backward() const;
  // The accumulated gradient (a lazy tensor of this leaf's shape and dtype), or
  // an undefined tensor when there is none.
  Tensor grad() const;
  // The gradient becomes undefined (PyTorch's set_to_none).
  void zero_grad();
  // The same values, cut from the graph: no gradient flows through it.
  Tensor detach() const;

  // ---- realization and reading ----
  Tensor& realize() &;
  Tensor realize() &&;
  Tensor contiguous() const;
  template <class T>
  std::vector<T> to_vector() const;  // T must match dtype(); Bool reads as bool
  template <class T>
  T item() const;

  // Internal: the node behind the handle (src/ only).
  const std::shared_ptr<detail::TensorNode>& node() const { return node_; }
  explicit Tensor(std::shared_ptr<detail::TensorNode> node) : node_(std::move(node)) {}

 private:
  std::shared_ptr<detail::TensorNode> node_;
  const detail::TensorNode& checked(const char* op) const;
  template <Number T>
  Tensor like_scalar(T v) const {
    return scalar_like(static_cast<double>(v), std::floating_point<T>);
  }
  Tensor scalar_like(double v, bool is_float) const;
  std::vector<unsigned char> read_bytes(DType expected, const char* op) const;
};

// ---- operators: tensors, and C++ numbers on either side ----
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);  // true division
Tensor operator%(const Tensor& a, const Tensor& b);  // floors like Python: the sign of the divisor
Tensor operator-(const Tensor& a);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator&(const Tensor& a, const Tensor& b);  // Bool: logical; integers: bitwise
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);
// == and != are not overloaded: use eq and ne.

// A number takes the tensor's dtype within its category (docs/semantics.md).
Tensor scalar_for(const Tensor& like, double v, bool is_float);
#define LOOM_SCALAR_OPERATOR(op)                                               \
  template <Number T>                                                          \
  Tensor operator op(const Tensor& a, T b) {                                   \
    return a op scalar_for(a, static_cast<double>(b), std::floating_point<T>); \
  }                                                                            \
  template <Number T>                                                          \
  Tensor operator op(T a, const Tensor& b) {                                   \
    return scalar_for(b, static_cast<double>(a), std::floating_point<T>) op b; \
  }
LOOM_SCALAR_OPERATOR(+)
LOOM_SCALAR_OPERATOR(-)
LOOM_SCALAR_OPERATOR(*)
LOOM_SCALAR_OPERATOR(/)
LOOM_SCALAR_OPERATOR(%)
LOOM_SCALAR_OPERATOR(<)
LOOM_SCALAR_OPERATOR(<=)
LOOM_SCALAR_OPERATOR(>)
LOOM_SCALAR_OPERATOR(>=)
#undef LOOM_SCALAR_OPERATOR

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
template <Number T>
Tensor where(const Tensor& cond, const Tensor& a, T b) {
  return cond.where(a, b);
}
template <Number T>
Tensor where(const Tensor& cond, T a, const Tensor& b) {
  return cond.where(a, b);
}
Tensor exp(const Tensor& t);
Tensor log(const Tensor& t);
Tensor sqrt(const Tensor& t);
Tensor relu(const Tensor& t);
Tensor matmul(const Tensor& a, const Tensor& b);
// torch.einsum: "bij,bjk->bik", an implicit output ("ij,jk" sums j and keeps i, k in
// alphabetical order), "..." for broadcast leading axes, a letter repeated in one operand for
// its diagonal ("ii->i"; "ii" alone is the trace). Contractions run as matmuls, left to right.
Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands);
Tensor cat(const std::vector<Tensor>& tensors, int axis = 0);
Tensor stack(const std::vector<Tensor>& tensors, int axis = 0);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);

// Realizes several tensors in one schedule.
void realize(std::vector<Tensor> tensors);

// Seeds the random generator: after it, the same program draws the same numbers
// for every thread count.
void manual_seed(uint64_t seed);
// Threads the runtime uses (LOOM_THREADS sets the default: the cores available).
void set_num_threads(int n);
int get_num_threads();

// Prints like PyTorch: values (elided when large), shape and dtype.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace loom

// Identity hash, as for torch::Tensor: copies of a handle hash alike.
// Identity hash and equality, as for torch::Tensor: copies of a handle are the
// same key, so tensors work in unordered containers (== itself is not overloaded).
template <>
struct std::hash<loom::Tensor> {
  size_t operator()(const loom::Tensor& t) const noexcept { return std::hash<const void*>()(t.node().get()); }
};
template <>
struct std::equal_to<loom::Tensor> {
  bool operator()(const loom::Tensor& a, const loom::Tensor& b) const noexcept {
    return a.node() == b.node();
  }
};
