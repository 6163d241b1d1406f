// The Tensor handle: copies share one tensor, identity hashing, undefined
// tensors, properties and reading.
#include "check.hpp"

#include <unordered_set>

using namespace loom;
using test::make;

TEST_CASE("copies of a handle share the tensor; std::hash hashes identity") {
  Tensor a = make(DType::Float32, {1, 2}, {2});
  Tensor b = a;
  Tensor c = make(DType::Float32, {1, 2}, {2});
  CHECK(std::hash<Tensor>()(a) == std::hash<Tensor>()(b));
  std::unordered_set<Tensor> set{a, b, c};
  CHECK(set.size() == 2);
  b.assign(a * 3);
  CHECK(a.to_vector<float>() == std::vector<float>{3, 6});  // b is a, like torch::Tensor
}

TEST_CASE("a default-constructed tensor is undefined, and using it is a loom::Error") {
  Tensor t;
  CHECK_FALSE(t.defined());
  CHECK(make(DType::Int32, {1}, {1}).defined());
  CHECK_THROWS_AS(t.shape(), Error);
  CHECK_THROWS_AS(t.dtype(), Error);
  CHECK_THROWS_AS(t.exp(), Error);
  CHECK_THROWS_AS(t.to_vector<float>(), Error);
}

TEST_CASE("shape, ndim, numel, dtype, item and to_vector of every dtype") {
  Tensor a = make(DType::Int64, {1, 2, 3, 4, 5, 6}, {2, 1, 3});
  CHECK(a.shape() == Shape{2, 1, 3});
  CHECK(a.ndim() == 3);
  CHECK(a.numel() == 6);
  CHECK(a.dtype() == DType::Int64);
  CHECK((a.sum() * 1).item<int64_t>() == 21);
  CHECK(Tensor::scalar(2.5, DType::Float64).item<double>() == 2.5);
  CHECK((make(DType::Bool, {1, 0}, {2}).logical_not()).to_vector<bool>() == std::vector<bool>{false, true});
  CHECK((make(DType::UInt8, {7}, {1}) * 2).item<uint8_t>() == 14);
  CHECK((make(DType::Int32, {-7}, {1}) * 2).item<int32_t>() == -14);
  CHECK(Tensor::zeros({0, 4}).numel() == 0);
  CHECK(Tensor::zeros({0, 4}).to_vector<float>().empty());
}

TEST_CASE("realize is ref-qualified: an lvalue realizes in place, an rvalue is returned") {
  Tensor a = make(DType::Float32, {1, 2}, {2});
  Tensor b = a * 2;
  Tensor& same = b.realize();
  CHECK(&same == &b);
  Tensor c = (a + 1).realize();
  CHECK(c.to_vector<float>() == std::vector<float>{2, 3});
}
