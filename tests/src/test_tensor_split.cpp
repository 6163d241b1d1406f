// split, chunk and unbind (src/tensor_split.cpp): PyTorch's piece sizes, views that write
// through to the tensor they were cut from, and errors that name the op.
#include "check.hpp"

#include <loom/variable.hpp>

using namespace loom;
using test::check_values;
using test::make;
using test::values;

namespace {
std::vector<int64_t> sizes_along(const std::vector<Tensor>& pieces, int axis) {
  std::vector<int64_t> out;
  for (const Tensor& p : pieces) out.push_back(p.shape()[static_cast<size_t>(axis)].value());
  return out;
}
}  // namespace

TEST_CASE("split into pieces of a size, the last one smaller, or into given sizes") {
  const Tensor x = make(DType::Float32, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {2, 5});
  const std::vector<Tensor> by_two = x.split(2, 1);
  CHECK(sizes_along(by_two, 1) == std::vector<int64_t>{2, 2, 1});
  check_values(by_two[1], {2, 3, 7, 8});
  check_values(by_two[2], {4, 9});
  const std::vector<Tensor> given = x.split({1, 0, 4}, -1);
  CHECK(sizes_along(given, 1) == std::vector<int64_t>{1, 0, 4});
  check_values(given[2], {1, 2, 3, 4, 6, 7, 8, 9});
  CHECK(x.split(7, 1).size() == 1);
  // As PyTorch: one empty piece of an empty axis, for any size (0 included).
  CHECK(sizes_along(Tensor::zeros({0}).split(3), 0) == std::vector<int64_t>{0});
  CHECK(sizes_along(Tensor::zeros({0}).split(0), 0) == std::vector<int64_t>{0});
}

TEST_CASE("chunk gives at most n pieces of ceil(size / n), as PyTorch's") {
  const Tensor x = Tensor::zeros({5, 6});
  CHECK(sizes_along(x.chunk(4, 0), 0) == std::vector<int64_t>{2, 2, 1});  // 3 pieces, not 4
  CHECK(sizes_along(x.chunk(4, 1), 1) == std::vector<int64_t>{2, 2, 2});
  CHECK(sizes_along(x.chunk(1, 1), 1) == std::vector<int64_t>{6});
  CHECK(sizes_along(x.chunk(9, 0), 0) == std::vector<int64_t>{1, 1, 1, 1, 1});
  CHECK(sizes_along(Tensor::zeros({0}).chunk(3), 0) == std::vector<int64_t>{0, 0, 0});
}

TEST_CASE("unbind drops the axis; every piece is a view that writes through") {
  Tensor x = make(DType::Float32, {0, 1, 2, 3, 4, 5}, {2, 3});
  const std::vector<Tensor> columns = x.unbind(1);
  REQUIRE(columns.size() == 3);
  CHECK(columns[2].shape() == Shape{2});
  check_values(columns[2], {2, 5});
  // nanoGPT's q, k, v = qkv.split(n, dim=2): writing one piece changes the tensor.
  std::vector<Tensor> pieces = x.split(1, 0);
  pieces[1].assign(Tensor::full({1, 3}, -1));
  Tensor column = x.unbind(1)[0];
  column.assign(make(DType::Float32, {9, 8}, {2}));
  check_values(x * 1, {9, 1, 2, 8, -1, -1});
}

TEST_CASE("split, chunk and unbind: errors name the op and the sizes") {
  const Tensor x = Tensor::zeros({4, 3});
  CHECK_THROWS_WITH_AS(x.split({1, 2}, 0),
                       doctest::Contains("split: piece sizes [1, 2] add up to 3, but axis 0 has size 4"),
                       Error);
  CHECK_THROWS_WITH_AS(x.split(-1), doctest::Contains("split: the piece size must be positive, got -1"),
                       Error);
  CHECK_THROWS_WITH_AS(x.split(0), doctest::Contains("split: the piece size must be positive, got 0"), Error);
  CHECK_THROWS_WITH_AS(x.chunk(0), doctest::Contains("chunk: the number of chunks must be positive"), Error);
  CHECK_THROWS_WITH_AS(x.unbind(2), doctest::Contains("unbind: axis 2 is out of range"), Error);
  CHECK_THROWS_WITH_AS(Tensor::scalar(1).split(1), doctest::Contains("split: cannot cut a 0-d tensor"),
                       Error);
  const Variable n("n", 1, 8);
  const Tensor symbolic = Tensor::zeros({n.bind(4), 3});
  CHECK_THROWS_WITH_AS(symbolic.unbind(0), doctest::Contains("unbind: axis 0 of shape [n=4, 3] is symbolic"),
                       Error);
  CHECK(symbolic.split(1, 1).size() == 3);  // a concrete axis of a symbolic tensor is fine
}
