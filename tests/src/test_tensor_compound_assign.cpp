// a += b and its siblings (src/tensor_compound_assign.cpp): in place as in PyTorch, through
// every handle and view, with PyTorch's shape and dtype rules for an in-place result and its
// rule for leaves that require grad.
#include "check.hpp"

#include <loom/gradient.hpp>

using namespace loom;
using test::buffer_address;
using test::check_values;
using test::make;
using test::values;

TEST_CASE("+=, -=, *= and /= with tensors and numbers change the tensor every handle shows") {
  Tensor x = make(DType::Float32, {1, 2, 3, 4, 5, 6}, {2, 3}).realize();
  const Tensor same_tensor = x;  // a copy of the handle, as in PyTorch
  const void* memory = buffer_address(x);
  x += make(DType::Float32, {10, 20, 30}, {3});  // broadcast over the rows
  x -= 1;
  x *= make(DType::Float32, {2, -1}, {2, 1});
  x /= 2.0;
  x.realize();
  CHECK(buffer_address(x) == memory);  // written in place
  check_values(same_tensor * 1, {10, 21, 32, -6.5, -12, -17.5});
}

TEST_CASE("an in-place op on a slice or a reshape writes into the tensor it was cut from") {
  Tensor x = Tensor::zeros({3, 4});
  x.slice(0, 1, 2) += 5;                                           // x[1] += 5
  x.slice(1, 0, 4, 2) -= make(DType::Float32, {1, 2, 3}, {3, 1});  // x[:, ::2] -= column
  x.reshape({12}).slice(0, 8, 12) *= 0;  // x[2] through a reshape: -0 where it was negative
  check_values(x * 1, {-1, 0, -1, 0, 3, 5, 3, 5, -0.0, 0, -0.0, 0});
}

TEST_CASE("in place keeps the tensor's dtype: integer results cast back, float into integer refused") {
  Tensor i = make(DType::Int32, {7, -7}, {2});
  i *= 3;
  i += make(DType::UInt8, {1, 1}, {2});
  CHECK(i.dtype() == DType::Int32);
  check_values(i * 1, {22, -20});
  Tensor f = make(DType::Float32, {1, 2}, {2});
  f += make(DType::Float64, {0.5, 0.25}, {2});  // Float64 result, cast to Float32 as PyTorch does
  f *= make(DType::Int32, {2, 2}, {2});
  CHECK(f.dtype() == DType::Float32);
  check_values(f * 1, {3, 4.5});
  CHECK_THROWS_WITH_AS(i += 0.5,
                       doctest::Contains("operator+=: the result's dtype Float32 cannot be written in "
                                         "place into a tensor of dtype Int32"),
                       Error);
  CHECK_THROWS_WITH_AS(i /= 2, doctest::Contains("operator/=: the result's dtype Float32"), Error);
  Tensor b = make(DType::Bool, {1, 0}, {2});
  CHECK_THROWS_WITH_AS(b += b,
                       doctest::Contains("dtype Int32 cannot be written in place into a tensor of dtype "
                                         "Bool"),
                       Error);
  check_values(i * 1, {22, -20});  // a refused op changes nothing
}

TEST_CASE("an in-place result keeps the tensor's shape: the tensor never broadcasts") {
  Tensor x = Tensor::zeros({3});
  CHECK_THROWS_WITH_AS(
      x += Tensor::ones({2, 3}),
      doctest::Contains("operator+=: the result's shape [2, 3] differs from the tensor's [3]"), Error);
  CHECK_THROWS_WITH_AS(x *= Tensor::ones({4}), doctest::Contains("cannot be broadcast"), Error);
}

TEST_CASE("in place and gradients: recorded on a computed tensor, refused on a leaf, free under NoGrad") {
  Tensor w = make(DType::Float64, {1, 2, 3}, {3}).requires_grad_();
  Tensor h = w * 2;
  h += 1;
  h.slice(0, 0, 1) *= 3;
  (h * h).sum().backward();  // h = [9, 5, 7]; dh/dw = [6, 2, 2]
  check_values(w.grad(), {108, 20, 28});
  CHECK_THROWS_WITH_AS(w += 1, doctest::Contains("operator+=: a leaf that requires grad"), Error);
  CHECK_THROWS_WITH_AS(w.slice(0, 0, 1) -= 1, doctest::Contains("operator-=: a leaf that requires grad"),
                       Error);
  {
    NoGrad no_grad;
    w -= 0.5 * w.grad();  // SGD by hand, as under torch.no_grad()
  }
  CHECK(w.requires_grad());
  check_values(w * 1, {-53, -8, -11});
  w.zero_grad();
  (w * w).sum().backward();
  check_values(w.grad(), {-106, -16, -22});
}

TEST_CASE(
    "PyTorch's in-place methods: add_ and sub_ with alpha, mul_, div_, clamp_, masked_fill_, copy_, fill_, "
    "zero_") {
  Tensor x = make(DType::Float32, {1, 2, 3, 4}, {2, 2}).realize();
  const Tensor same_tensor = x;
  const void* memory = buffer_address(x);
  x.add_(make(DType::Float32, {1, 10}, {2}), 2);  // x + 2 * [1, 10], the row broadcast
  x.sub_(1).mul_(make(DType::Float32, {1, -1}, {2, 1})).div_(2);
  check_values(same_tensor * 1, {1, 10.5, -2, -11.5});
  x.clamp_(-3, 3);
  check_values(same_tensor * 1, {1, 3, -2, -3});
  x.masked_fill_(make(DType::Bool, {1, 0}, {2}), 7);
  check_values(same_tensor * 1, {7, 3, 7, -3});
  x.sub_(make(DType::Float32, {1, 1, 1, 1}, {2, 2}), -0.5);
  check_values(same_tensor * 1, {7.5, 3.5, 7.5, -2.5});
  x.realize();
  CHECK(buffer_address(x) == memory);
  Tensor i = make(DType::Int32, {5, 6}, {2});
  i.copy_(make(DType::Float64, {2.75, -1.5}, {2}));  // copy_ casts whatever it is given
  check_values(i * 1, {2, -1});
  i.fill_(9);
  check_values(i * 1, {9, 9});
  Tensor rows = Tensor::ones({2, 3});
  rows.slice(0, 1, 2).zero_();  // through a view
  check_values(rows * 1, {1, 1, 1, 0, 0, 0});
  CHECK_THROWS_WITH_AS(i.mul_(0.5), doctest::Contains("mul_: the result's dtype Float32 cannot be written"),
                       Error);
  CHECK_THROWS_WITH_AS(Tensor::zeros({2}).add_(Tensor::ones({3, 2})),
                       doctest::Contains("add_: the result's shape [3, 2] differs from the tensor's [2]"),
                       Error);
}

TEST_CASE("an in-place method on a leaf that requires grad is refused while recording, as PyTorch") {
  Tensor w = Tensor::ones({2}).requires_grad_();
  CHECK_THROWS_WITH_AS(w.zero_(), doctest::Contains("zero_: a leaf that requires grad"), Error);
  CHECK_THROWS_WITH_AS(w.copy_(Tensor::zeros({2})), doctest::Contains("copy_: a leaf that requires grad"),
                       Error);
  CHECK_THROWS_WITH_AS(w.add_(1), doctest::Contains("add_: a leaf that requires grad"), Error);
  {
    const NoGrad no_grad;
    w.sub_(make(DType::Float32, {0.5, 0.25}, {2}), 2);  // an SGD step by hand
  }
  check_values(w * 1, {0, 0.5});
}
