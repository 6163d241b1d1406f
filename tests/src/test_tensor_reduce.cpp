// sum and max over every axis subset, keepdim, odd sizes, every dtype.
#include "check.hpp"

#include <limits>

using namespace loom;
using test::check_ref;
using test::check_values;
using test::iota;
using test::make;

TEST_CASE("sum and max over every axis subset of a 4-D tensor, with and without keepdim") {
  Shape s{2, 3, 4, 5};
  Tensor a = make(DType::Float32, iota(120, 0.25, -7), s);
  for (int mask = 0; mask < 16; ++mask) {
    std::vector<int> axes;
    for (int i = 0; i < 4; ++i)
      if (mask & (1 << i)) axes.push_back(i);
    for (bool keep : {false, true}) {
      CAPTURE(mask);
      CAPTURE(keep);
      check_ref(a.sum(axes, keep));
      check_ref(a.max(axes, keep));
      Shape want;
      for (int i = 0; i < 4; ++i) {
        bool reduced = axes.empty() || (mask & (1 << i));
        if (!reduced) want.push_back(s[i]);
        else if (keep) want.push_back(1);
      }
      CHECK(a.sum(axes, keep).shape() == want);
    }
  }
}

TEST_CASE("hand-computed sums and maxes, negative axes") {
  Tensor a = make(DType::Float32, {1, 5, 3, 4, 2, 6}, {2, 3});
  check_values(a.sum(), {21});
  check_values(a.sum(0), {5, 7, 9});
  check_values(a.sum(-1), {9, 12});
  check_values(a.sum(1, true), {9, 12});
  CHECK(a.sum(1, true).shape() == Shape{2, 1});
  check_values(a.max(), {6});
  check_values(a.max(-2), {4, 5, 6});
  check_values(a.max(1), {5, 6});
  CHECK(a.sum().shape() == Shape{});
}

TEST_CASE("reduce dtypes: Bool and UInt8 sums give Int32, others keep theirs") {
  check_values(make(DType::Bool, {1, 1, 0, 1}, {4}).sum(), {3});
  CHECK(make(DType::Bool, {1}, {1}).sum().dtype() == DType::Int32);
  check_values(make(DType::UInt8, {200, 100, 50}, {3}).sum(), {350});
  CHECK(make(DType::UInt8, {1}, {1}).sum().dtype() == DType::Int32);
  check_values(make(DType::UInt8, {200, 100, 50}, {3}).max(), {200});
  for (DType dt : {DType::Int32, DType::Int64, DType::Float64}) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, {-4, 9, 2, -1}, {2, 2});
    CHECK(x.sum().dtype() == dt);
    check_values(x.sum(0), {-2, 8});
    check_values(x.max(1), {9, 2});
  }
  check_values(make(DType::Bool, {0, 1, 0, 0}, {2, 2}).max(1), {1, 0});
}

TEST_CASE("NaN propagates through max; an empty sum is 0; an empty max is an error") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  check_values(make(DType::Float32, {1, nan, 3, 4}, {2, 2}).max(1), {nan, 4});
  Tensor empty = Tensor::zeros({3, 0});
  check_values(empty.sum(1) + 1, {1, 1, 1});
  CHECK_THROWS_AS(empty.max(1), Error);
}

TEST_CASE("reductions over odd sizes 1, 7 and 1023 feeding elementwise ops") {
  for (int64_t n : {1, 7, 1023}) {
    CAPTURE(n);
    Tensor x = make(DType::Float32, iota(n * 3, 0.001, -0.5), {3, n});
    check_ref(x.sum(1).exp());
    check_ref(x / x.sum(1, true), 2);
    check_ref(x - x.max(1, true));
    check_ref(x.max(0) * x.sum(0));
  }
}
