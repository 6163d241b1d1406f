// matmul: numpy's rules (1-D operands, broadcast batch dimensions), dtype
// promotion as for *, against hand values, an independent loop and the reference.
#include "check.hpp"

#include <numeric>

using namespace loom;
using test::check_ref;
using test::check_values;
using test::iota;
using test::make;

namespace {
// The row-major offset in `shape` of the output index `idx`: aligned right, a size-1 axis broadcasts.
int64_t offset(const Shape& shape, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  const size_t lead = idx.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + (shape[d] == 1 ? 0 : idx[lead + d]);
  return off;
}

// Plain loops over the output [batch..., m, n], summing over k; operands of at least two dimensions.
std::vector<double> naive_matmul(const std::vector<double>& a, const Shape& as, const std::vector<double>& b,
                                 const Shape& bs, const Shape& out) {
  const int64_t k = as.back();
  const int64_t total = std::accumulate(out.begin(), out.end(), int64_t{1}, std::multiplies<>());
  std::vector<double> r;
  for (int64_t flat = 0; flat < total; ++flat) {
    std::vector<int64_t> idx(out.size());
    for (int64_t d = static_cast<int64_t>(out.size()) - 1, rem = flat; d >= 0; --d) {
      idx[d] = rem % out[d];
      rem /= out[d];
    }
    double s = 0;
    for (int64_t j = 0; j < k; ++j) {
      std::vector<int64_t> ai(idx), bi(idx);
      ai.back() = j;          // a[..., i, j]
      bi[bi.size() - 2] = j;  // b[..., j, n]
      s += a[offset(as, ai)] * b[offset(bs, bi)];
    }
    r.push_back(s);
  }
  return r;
}
}  // namespace

TEST_CASE("matmul of matrices against hand values, on every number dtype") {
  for (DType dt : test::number_dtypes()) {
    CAPTURE(to_string(dt));
    Tensor a = make(dt, {1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor b = make(dt, {7, 8, 9, 10, 11, 12}, {3, 2});
    CHECK(a.matmul(b).dtype() == dt);
    check_values(a.matmul(b), {58, 64, 139, 154});
    check_values(matmul(b, a), {39, 54, 69, 49, 68, 87, 59, 82, 105});
  }
}

TEST_CASE("matmul with 1-D operands: dot product, row and column vectors") {
  Tensor v = make(DType::Float32, {1, 2, 3}, {3});
  Tensor w = make(DType::Float32, {4, -5, 6}, {3});
  Tensor m = make(DType::Float32, {1, 2, 3, 4, 5, 6}, {3, 2});
  CHECK(v.matmul(w).shape() == Shape{});
  check_values(v.matmul(w), {12});
  CHECK(v.matmul(m).shape() == Shape{2});
  check_values(v.matmul(m), {22, 28});
  CHECK(m.transpose().matmul(v).shape() == Shape{2});
  check_values(m.transpose().matmul(v), {22, 28});
  Tensor batch = make(DType::Float64, iota(12), {2, 3, 2});  // [2, 3, 2]
  CHECK(v.cast(DType::Float64).matmul(batch).shape() == Shape{2, 2});
  check_values(v.cast(DType::Float64).matmul(batch), {16, 22, 52, 58});
  Tensor batch_t = batch.transpose();  // [2, 2, 3]
  CHECK(batch_t.matmul(v).shape() == Shape{2, 2});
  check_values(batch_t.matmul(v), {16, 22, 52, 58});
}

TEST_CASE("matmul broadcasts batch dimensions: [2,1,3,4] @ [5,4,6] -> [2,5,3,6]") {
  const Shape as{2, 1, 3, 4}, bs{5, 4, 6}, out{2, 5, 3, 6};
  const std::vector<double> av = iota(24, 0.25, -3), bv = iota(120, -0.125, 7);
  Tensor a = make(DType::Float32, av, as), b = make(DType::Float32, bv, bs);
  Tensor r = a.matmul(b);
  CHECK(r.shape() == out);
  const auto before = counters().kernels_executed;
  check_values(r, naive_matmul(av, as, bv, bs, out), 4);
  CHECK(counters().kernels_executed == before + 1);  // one kernel: a REDUCE over k, operands read in place
  const Shape cs{3, 4, 2};                           // Int64, and a batch of [2, 1] against [3]
  const std::vector<double> cv = iota(24, 1, -10), dv = iota(24, 1, -5);
  Tensor c = make(DType::Int64, cv, cs), d = make(DType::Int64, dv, as);
  CHECK(d.matmul(c).shape() == Shape{2, 3, 3, 2});
  check_values(d.matmul(c), naive_matmul(dv, as, cv, cs, {2, 3, 3, 2}));
}

TEST_CASE("matmul promotes like *: Bool counts in Int32, UInt8 wraps, Int32 with Float32 is Float32") {
  Tensor t = make(DType::Bool, {1, 1, 0, 1, 0, 1}, {2, 3});
  Tensor u = make(DType::Bool, {1, 0, 1, 1, 1, 1}, {3, 2});
  CHECK(t.matmul(u).dtype() == DType::Int32);
  check_values(t.matmul(u), {2, 1, 2, 1});
  Tensor big = make(DType::UInt8, {16, 16}, {1, 2});
  CHECK(big.matmul(big.transpose()).dtype() == DType::UInt8);
  check_values(big.matmul(big.transpose()), {0});  // 512 wraps to 0, as uint8 matmul in PyTorch
  Tensor i = make(DType::Int32, {1, 2}, {1, 2});
  Tensor f = make(DType::Float32, {0.5, 0.25}, {2, 1});
  CHECK(i.matmul(f).dtype() == DType::Float32);
  check_values(i.matmul(f), {1});
  check_values(f.matmul(i.cast(DType::Float64)), {0.5, 1, 0.25, 0.5});
}

TEST_CASE("matmul feeds and is fed by other ops; an empty inner dimension gives zeros") {
  Tensor a = make(DType::Float32, iota(12, 0.5, -2), {3, 4});
  Tensor b = make(DType::Float32, iota(20, -0.25, 2), {4, 5});
  check_ref((a * 2 + 1).matmul(b.exp()).sum(1), 8);
  check_ref(a.transpose().matmul(a) - 1, 2);
  Tensor e = Tensor::zeros({2, 0}).matmul(Tensor::zeros({0, 3}));
  CHECK(e.shape() == Shape{2, 3});
  check_values(e + 1, {1, 1, 1, 1, 1, 1});
}

TEST_CASE("matmul errors name the op and the shapes") {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4, 5});
  CHECK_THROWS_WITH_AS(a.matmul(b), "matmul: inner dimensions do not match: [2, 3] @ [4, 5] (3 vs 4)", Error);
  CHECK_THROWS_WITH_AS(Tensor::zeros({3}).matmul(Tensor::zeros({4})),
                       "matmul: inner dimensions do not match: [3] @ [4] (3 vs 4)", Error);
  CHECK_THROWS_WITH_AS(
      matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 1})),
      "matmul: batch dimensions [2] and [3] of [2, 2, 3] @ [3, 3, 1] cannot be broadcast together", Error);
  CHECK_THROWS_WITH_AS(a.matmul(Tensor::scalar(2)),
                       "matmul: both operands need at least one dimension, got [2, 3] @ []", Error);
  CHECK_THROWS_WITH_AS(a.matmul(Tensor()), doctest::Contains("matmul: the tensor is undefined"), Error);
}
