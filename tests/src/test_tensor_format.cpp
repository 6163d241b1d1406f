#include "check.hpp"

#include <loom/format.hpp>

#include <cmath>
#include <limits>
#include <sstream>

using namespace loom;
using loom::test::make;

namespace {
std::string streamed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}
Tensor ints(int64_t n, Shape shape) { return Tensor::arange(n).reshape(std::move(shape)); }
}  // namespace

// Expected strings are PyTorch's repr of the same values (its layout rules
// applied by hand) with ", shape=[...], dtype=..." in place of torch's suffixes.
TEST_CASE("format: integral floats print as '1.' in aligned columns") {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  CHECK(streamed(t) ==
        "tensor([[1., 2.],\n"
        "        [3., 4.]], shape=[2, 2], dtype=Float32)");
  CHECK(streamed(Tensor::from_vector<float>({0, 100}, {2})) ==
        "tensor([  0., 100.], shape=[2], dtype=Float32)");
  CHECK(streamed(Tensor::zeros({3})) == "tensor([0., 0., 0.], shape=[3], dtype=Float32)");
}

TEST_CASE("format: other floats get 4 decimals, right-aligned to the widest") {
  CHECK(streamed(Tensor::from_vector<float>({1.5f, -2.25f, 10}, {3})) ==
        "tensor([ 1.5000, -2.2500, 10.0000], shape=[3], dtype=Float32)");
  CHECK(streamed(Tensor::from_vector<float>({0.1f, 0.123456f}, {2})) ==
        "tensor([0.1000, 0.1235], shape=[2], dtype=Float32)");
  // the width counts nonzero finite values only, so -0 sticks out as in torch
  CHECK(streamed(Tensor::from_vector<double>({-0.0, 1.5}, {2})) ==
        "tensor([-0.0000, 1.5000], shape=[2], dtype=Float64)");
}

TEST_CASE("format: scientific notation when magnitudes span > 1000x, exceed 1e8 or go below 1e-4") {
  CHECK(streamed(Tensor::from_vector<double>({1e-5, 1}, {2})) ==
        "tensor([1.0000e-05, 1.0000e+00], shape=[2], dtype=Float64)");
  CHECK(streamed(Tensor::from_vector<float>({1, 100000}, {2})) ==
        "tensor([1.0000e+00, 1.0000e+05], shape=[2], dtype=Float32)");
  CHECK(streamed(Tensor::from_vector<double>({2e8, 3e8}, {2})) ==
        "tensor([2.0000e+08, 3.0000e+08], shape=[2], dtype=Float64)");
  CHECK(streamed(Tensor::from_vector<double>({0, -1.5e-7}, {2})) ==
        "tensor([ 0.0000e+00, -1.5000e-07], shape=[2], dtype=Float64)");
}

TEST_CASE("format: nan and inf print bare and do not set the width") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(streamed(Tensor::from_vector<float>({nan, inf, -inf, 1}, {4})) ==
        "tensor([nan, inf, -inf, 1.], shape=[4], dtype=Float32)");
  CHECK(streamed(Tensor::from_vector<float>({-nan, 0.5f}, {2})) ==
        "tensor([   nan, 0.5000], shape=[2], dtype=Float32)");
}

TEST_CASE("format: integers and bools print like Python's str, right-aligned") {
  CHECK(streamed(ints(12, {3, 4})) ==
        "tensor([[ 0,  1,  2,  3],\n"
        "        [ 4,  5,  6,  7],\n"
        "        [ 8,  9, 10, 11]], shape=[3, 4], dtype=Int32)");
  CHECK(streamed(Tensor::from_vector<bool>({true, false}, {2})) ==
        "tensor([ True, False], shape=[2], dtype=Bool)");
  CHECK(streamed(Tensor::from_vector<uint8_t>({0, 255}, {2})) ==
        "tensor([  0, 255], shape=[2], dtype=UInt8)");
  // Int64 values beyond 2^53 print exactly
  CHECK(streamed(Tensor::from_vector<int64_t>({9007199254740993, -7}, {2})) ==
        "tensor([9007199254740993, " + std::string(14, ' ') + "-7], shape=[2], dtype=Int64)");
}

TEST_CASE("format: 3-D tensors separate their slices with a blank line") {
  CHECK(streamed(ints(8, {2, 2, 2})) ==
        "tensor([[[0, 1],\n"
        "         [2, 3]],\n"
        "\n"
        "        [[4, 5],\n"
        "         [6, 7]]], shape=[2, 2, 2], dtype=Int32)");
}

TEST_CASE("format: long rows wrap at 80 columns") {
  CHECK(streamed(make(DType::Float32, loom::test::iota(20, 0.5, 0.25), {20})) ==
        "tensor([0.2500, 0.7500, 1.2500, 1.7500, 2.2500, 2.7500, 3.2500, 3.7500, 4.2500,\n"
        "        4.7500, 5.2500, 5.7500, 6.2500, 6.7500, 7.2500, 7.7500, 8.2500, 8.7500,\n"
        "        9.2500, 9.7500], shape=[20], dtype=Float32)");
}

TEST_CASE("format: more than 1000 elements print the first and last 3 per axis") {
  CHECK(streamed(ints(2000, {2000})) ==
        "tensor([   0,    1,    2,  ..., 1997, 1998, 1999], shape=[2000], dtype=Int32)");
  // the suffix that no longer fits the last line goes on a line of its own
  CHECK(streamed(ints(2000, {40, 50})) ==
        "tensor([[   0,    1,    2,  ...,   47,   48,   49],\n"
        "        [  50,   51,   52,  ...,   97,   98,   99],\n"
        "        [ 100,  101,  102,  ...,  147,  148,  149],\n"
        "        ...,\n"
        "        [1850, 1851, 1852,  ..., 1897, 1898, 1899],\n"
        "        [1900, 1901, 1902,  ..., 1947, 1948, 1949],\n"
        "        [1950, 1951, 1952,  ..., 1997, 1998, 1999]], shape=[40, 50],\n"
        "       dtype=Int32)");
  // exactly 1000 elements are not summarized
  CHECK(streamed(ints(1000, {1000})).find("...") == std::string::npos);
}

TEST_CASE("format: a summarized tensor's column width comes from the printed values only") {
  std::vector<float> v;
  for (int i = 0; i < 2000; ++i) v.push_back(static_cast<float>(1000 + i));
  v[1000] = 1e9f;  // hidden by the summary: neither scientific mode nor a wider column
  CHECK(streamed(Tensor::from_vector<float>(v, {2000})) ==
        "tensor([1000., 1001., 1002.,  ..., 2997., 2998., 2999.], shape=[2000],\n"
        "       dtype=Float32)");
  // torch's rule: integral values spanning more than 1000x switch to scientific notation
  CHECK(streamed(Tensor::arange(2000).cast(DType::Float32)) ==
        "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
        "        1.9990e+03], shape=[2000], dtype=Float32)");
}

TEST_CASE("format: 0-d, empty and undefined tensors") {
  CHECK(streamed(Tensor::scalar(2.5)) == "tensor(2.5000, shape=[], dtype=Float32)");
  CHECK(streamed(Tensor::scalar(-3, DType::Int64)) == "tensor(-3, shape=[], dtype=Int64)");
  CHECK(streamed(Tensor::zeros({0, 3})) == "tensor([], shape=[0, 3], dtype=Float32)");
  CHECK(streamed(Tensor()) == "tensor(undefined)");
}

TEST_CASE("format: a lazy tensor is realized to print it, and fmt prints the same text") {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor t = a * a + 0.5f;
  CHECK(fmt::format("{}", t) ==
        "tensor([[ 1.5000,  4.5000],\n"
        "        [ 9.5000, 16.5000]], shape=[2, 2], dtype=Float32)");
  CHECK(streamed(t) == fmt::format("{}", t));
  CHECK(fmt::format("{:>30}", Tensor()) == "             tensor(undefined)");
  CHECK(to_string(Tensor()) == "tensor(undefined)");
}
