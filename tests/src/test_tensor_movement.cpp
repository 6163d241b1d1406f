// Movement ops and their chains, compiled, against the reference interpreter
// and hand-computed values.
#include "check.hpp"

using namespace loom;
using test::check_ref;
using test::check_values;
using test::iota;
using test::make;

TEST_CASE("reshape, permute, expand, pad, shrink, flip on every dtype") {
  for (DType dt : test::all_dtypes()) {
    CAPTURE(to_string(dt));
    const bool b = dt.is_bool();
    auto v = [&](std::vector<double> x) {
      if (b)
        for (double& e : x) e = e != 0;
      return x;
    };
    Tensor a = make(dt, v({1, 2, 3, 4, 5, 6}), {2, 3});
    check_values(a.permute({1, 0}), v({1, 4, 2, 5, 3, 6}));
    check_values(a.reshape({3, 2}).permute({1, 0}), v({1, 3, 5, 2, 4, 6}));
    check_values(a.flip(1), v({3, 2, 1, 6, 5, 4}));
    check_values(a.flip(std::vector<int>{0, 1}), v({6, 5, 4, 3, 2, 1}));
    check_values(a.shrink({{1, 2}, {0, 2}}), v({4, 5}));
    check_values(a.pad({{0, 1}, {1, 0}}), v({0, 1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0}));
    check_values(make(dt, v({1, 2}), {2, 1}).expand({2, 3}), v({1, 1, 1, 2, 2, 2}));
    check_values(make(dt, v({7}), {1}).expand({2, 2}), v({7, 7, 7, 7}));
  }
}

TEST_CASE("negative axes") {
  Tensor a = make(DType::Float32, iota(6), {2, 3});
  check_values(a.permute({-1, -2}), {0, 3, 1, 4, 2, 5});
  check_values(a.flip(-1), {2, 1, 0, 5, 4, 3});
  check_values(a.reshape({-1, 2}) * 1, {0, 1, 2, 3, 4, 5});
  CHECK(a.reshape({-1}).shape() == Shape{6});
}

TEST_CASE("chains: reshape of a permute, pad then shrink, flip of an expand") {
  Tensor a = make(DType::Float32, iota(24), {2, 3, 4});
  check_ref(a.permute({2, 0, 1}).reshape({4, 6}));
  check_ref(a.permute({1, 2, 0}).reshape({12, 2}).permute({1, 0}));
  check_values(a.pad({{0, 0}, {1, 1}, {2, 0}}).shrink({{0, 1}, {1, 2}, {2, 4}}), {0, 1});
  Tensor col = make(DType::Int32, {1, 2, 3}, {3, 1});
  check_values(col.expand({3, 2}).flip(0), {3, 3, 2, 2, 1, 1});
  check_values(col.expand({3, 2}).flip(1), {1, 1, 2, 2, 3, 3});
}

TEST_CASE("a reshape that merges and splits axes of a permuted tensor") {
  Tensor a = make(DType::Float32, iota(2 * 3 * 4 * 5), {2, 3, 4, 5});
  Tensor p = a.permute({3, 1, 0, 2});     // [5, 3, 2, 4]
  check_ref(p.reshape({15, 8}));          // merges (5,3) and (2,4)
  check_ref(p.reshape({5, 6, 4}));        // merges (3,2)
  check_ref(p.reshape({5, 3, 2, 2, 2}));  // splits 4
  check_ref(p.reshape({10, 12}));         // merges and splits across boundaries
  check_ref(p.reshape({120}).reshape({4, 30}).permute({1, 0}));
}

TEST_CASE("pad and shrink over odd sizes, with arithmetic around them") {
  for (int64_t n : {1, 7, 1023}) {
    CAPTURE(n);
    Tensor x = make(DType::Float32, iota(n, 0.5, -1), {n});
    Tensor padded = x.pad({{3, 2}});
    check_ref(padded * 2 + 1);
    check_ref(padded.shrink({{2, n + 4}}) - x.pad({{1, 2}}).shrink({{0, n + 2}}));
    check_ref(x.flip(0) + x);
  }
}

TEST_CASE("contiguous makes a buffer and the result is still right") {
  Tensor a = make(DType::Float32, iota(6), {2, 3});
  Tensor t = a.permute({1, 0}).contiguous();
  check_values(t * t, {0, 9, 1, 16, 4, 25});
}

TEST_CASE("creation: zeros, ones, full, scalar, arange") {
  check_values(Tensor::ones({2, 2}) * 3, {3, 3, 3, 3});
  check_values(Tensor::full({3}, 2.5, DType::Float64) + Tensor::zeros({3}, DType::Float64), {2.5, 2.5, 2.5});
  check_values(Tensor::scalar(4, DType::Int32) * make(DType::Int32, {1, 2}, {2}), {4, 8});
  Tensor r = Tensor::arange(5);
  CHECK(r.dtype() == DType::Int32);
  check_values(r * 2, {0, 2, 4, 6, 8});
  check_values(Tensor::arange(10, 0, -3) + 0, {10, 7, 4, 1});
  check_values(Tensor::arange(1, 8, 3) + 0, {1, 4, 7});
  CHECK(Tensor::arange(3, 3).numel() == 0);
}
