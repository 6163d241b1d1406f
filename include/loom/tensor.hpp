#pragma once
// loom::Tensor: a cheap, lazy handle. Operations build a graph; realize() (or
// reading the data) schedules, compiles and runs it. Copies share one tensor.
#include <loom/dtype.hpp>
#include <loom/error.hpp>

#include <concepts>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace loom {

namespace detail {
struct TensorNode;
}

template <class T>
concept Number = (std::integral<T> || std::floating_point<T>) && !std::same_as<T, bool>;

class Tensor {
public:
  Tensor() = default;  // undefined: defined() == false
  bool defined() const { return node_ != nullptr; }

  // ---- creation ----
  template <class T>
  static Tensor from_vector(const std::vector<T>& data, Shape shape);
  static Tensor scalar(double value, DType dtype = DType::Float32);
  static Tensor full(Shape shape, double value, DType dtype = DType::Float32);
  static Tensor zeros(Shape shape, DType dtype = DType::Float32);
  static Tensor ones(Shape shape, DType dtype = DType::Float32);
  static Tensor arange(int64_t stop);
  static Tensor arange(int64_t start, int64_t stop, int64_t step = 1);

  // ---- properties ----
  const Shape& shape() const;
  DType dtype() const;
  int64_t ndim() const { return static_cast<int64_t>(shape().size()); }
  int64_t numel() const;

  // ---- elementwise ----
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor exp2() const;
  Tensor log2() const;
  Tensor sqrt() const;
  Tensor relu() const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  template <Number T> Tensor lt(T v) const { return lt(like_scalar(v)); }
  template <Number T> Tensor le(T v) const { return le(like_scalar(v)); }
  template <Number T> Tensor gt(T v) const { return gt(like_scalar(v)); }
  template <Number T> Tensor ge(T v) const { return ge(like_scalar(v)); }
  template <Number T> Tensor eq(T v) const { return eq(like_scalar(v)); }
  template <Number T> Tensor ne(T v) const { return ne(like_scalar(v)); }
  Tensor where(const Tensor& a, const Tensor& b) const;  // this is the condition
  Tensor cast(DType dtype) const;

  // ---- reductions ----
  Tensor sum() const { return sum(std::vector<int>{}, false); }
  Tensor sum(int axis, bool keepdim = false) const { return sum(std::vector<int>{axis}, keepdim); }
  Tensor sum(std::vector<int> axes, bool keepdim = false) const;
  Tensor max() const { return max(std::vector<int>{}, false); }
  Tensor max(int axis, bool keepdim = false) const { return max(std::vector<int>{axis}, keepdim); }
  Tensor max(std::vector<int> axes, bool keepdim = false) const;
  template <class A, class B>
    requires(!std::same_as<B, bool>)
  Tensor sum(A, B) const = delete;  // keepdim is a bool: t.sum(1, 2) must not compile
  template <class A, class B>
    requires(!std::same_as<B, bool>)
  Tensor max(A, B) const = delete;

  // ---- movement ----
  Tensor reshape(Shape shape) const;
  Tensor permute(std::vector<int> order) const;
  Tensor expand(Shape shape) const;
  Tensor pad(std::vector<std::pair<int64_t, int64_t>> padding) const;
  Tensor shrink(std::vector<std::pair<int64_t, int64_t>> bounds) const;
  Tensor flip(std::vector<int> axes) const;
  Tensor flip(int axis) const { return flip(std::vector<int>{axis}); }

  // ---- realization and reading ----
  Tensor& realize() &;
  Tensor realize() &&;
  Tensor contiguous() const;
  template <class T>
  std::vector<T> to_vector() const;
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
  Tensor reduce(int op, std::vector<int> axes, bool keepdim, const char* name) const;
  std::vector<unsigned char> read_bytes(DType expected, const char* op) const;
  friend struct TensorAccess;
};

// ---- operators: tensors, and C++ numbers on either side ----
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);  // true division
Tensor operator-(const Tensor& a);

// A number takes the tensor's dtype within its category (shared/DESIGN.md §2).
Tensor scalar_for(const Tensor& like, double v, bool is_float);
template <Number T> Tensor operator+(const Tensor& a, T b) { return a + scalar_for(a, double(b), std::floating_point<T>); }
template <Number T> Tensor operator+(T a, const Tensor& b) { return scalar_for(b, double(a), std::floating_point<T>) + b; }
template <Number T> Tensor operator-(const Tensor& a, T b) { return a - scalar_for(a, double(b), std::floating_point<T>); }
template <Number T> Tensor operator-(T a, const Tensor& b) { return scalar_for(b, double(a), std::floating_point<T>) - b; }
template <Number T> Tensor operator*(const Tensor& a, T b) { return a * scalar_for(a, double(b), std::floating_point<T>); }
template <Number T> Tensor operator*(T a, const Tensor& b) { return scalar_for(b, double(a), std::floating_point<T>) * b; }
template <Number T> Tensor operator/(const Tensor& a, T b) { return a / scalar_for(a, double(b), std::floating_point<T>); }
template <Number T> Tensor operator/(T a, const Tensor& b) { return scalar_for(b, double(a), std::floating_point<T>) / b; }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor exp(const Tensor& t);
Tensor log(const Tensor& t);
Tensor sqrt(const Tensor& t);
Tensor relu(const Tensor& t);

// Realizes several tensors in one schedule.
void realize(std::vector<Tensor> tensors);

}  // namespace loom
