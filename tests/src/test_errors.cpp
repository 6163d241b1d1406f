// Bad input: every case throws loom::Error whose message names the op and the
// shapes, axes or dtypes involved. Nothing aborts.
#include "check.hpp"
#include "support/error_message.hpp"

#include <string>

using namespace loom;
using test::check_message;
using test::error_of;
using test::make;

TEST_CASE("every kind of bad input gets a loom::Error that names the op and what was wrong") {
  Tensor a = make(DType::Float32, {1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = make(DType::Float32, {1, 2, 3, 4}, {4});
  Tensor undefined;

  check_message(error_of([&] { a + b; }), {"add", "[2, 3]", "[4]", "broadcast"});
  check_message(error_of([&] { a.matmul(a); }), {"matmul", "[2, 3]", "3", "2"});
  check_message(error_of([&] { a.reshape({4, 2}); }), {"reshape", "[2, 3]", "[4, 2]", "6", "8"});
  check_message(error_of([&] { a.sum(2); }), {"sum", "axis 2", "2 dimensions"});
  check_message(error_of([&] { a.flip(-3); }), {"flip", "axis -3"});
  check_message(error_of([&] { a.permute({0, 0}); }), {"permute", "not a permutation"});
  check_message(error_of([&] { a.permute({0}); }), {"permute", "[2, 3]"});
  check_message(error_of([&] { a.pad({{0, 1}}); }), {"pad", "[2, 3]", "one per axis"});
  check_message(error_of([&] { a.pad({{-1, 0}, {0, 0}}); }), {"pad", "axis 0", "negative"});
  check_message(error_of([&] { a.shrink({{0, 3}, {0, 1}}); }), {"shrink", "axis 0", "size 2"});
  check_message(error_of([&] { a.expand({4, 3}); }), {"expand", "[2, 3]", "[4, 3]"});
  Tensor idx = make(DType::Int32, {0, 1}, {2});
  check_message(error_of([&] { a.gather(1, idx); }), {"gather", "[2]", "[2, 3]"});
  check_message(error_of([&] { a.to_vector<int32_t>(); }), {"to_vector", "Float32", "Int32"});
  check_message(error_of([&] { a.item<float>(); }), {"item", "[2, 3]", "6 elements"});
  check_message(error_of([&] { make(DType::Int32, {1}, {1}).item<double>(); }), {"item", "Int32", "Float64"});
  check_message(error_of([&] { undefined + a; }), {"add", "undefined"});
  check_message(error_of([&] { undefined * 2.5f; }), {"operator", "2.5", "undefined"});
  check_message(error_of([&] { undefined.realize(); }), {"realize", "undefined"});
  check_message(error_of([&] { undefined.shape(); }), {"shape", "undefined"});
  check_message(error_of([&] {
                  Tensor::from_vector<float>({1, 2, 3}, {2, 2});
                }),
                {"from_vector", "3", "[2, 2]"});
  check_message(error_of([&] { Tensor::zeros({2, -1}); }), {"zeros", "negative"});
  check_message(error_of([&] { make(DType::Bool, {1}, {1}).neg(); }), {"neg", "Bool"});
  check_message(error_of([&] { Tensor::zeros({2, 0}).max(1); }), {"max", "axis 1", "size 0"});
  check_message(error_of([&] { Tensor::arange(0, 5, 0); }), {"arange", "step"});
  check_message(error_of([&] { a.assign(b); }), {"assign", "[4]", "[2, 3]"});
}

TEST_CASE("after an error the engine keeps working") {
  Tensor a = make(DType::Float32, {1, 2}, {2});
  CHECK_THROWS_AS(a + make(DType::Float32, {1, 2, 3}, {3}), Error);
  test::check_values(a * 3, {3, 6});
}
