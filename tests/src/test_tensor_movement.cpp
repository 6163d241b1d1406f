// Movement ops and their chains, compiled, against the reference interpreter
// and hand-computed values.
#include "check.hpp"
#include "gradcheck.hpp"
#include "torch_table.hpp"

#include <cmath>
#include <limits>

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

// ---- transpose, squeeze, unsqueeze, flatten, slice ------------------------------------------------

namespace {
std::vector<double> fit(DType dt, std::vector<double> v) {
  if (dt.is_bool())
    for (double& e : v) e = e != 0;
  return v;
}
}  // namespace

TEST_CASE("transpose, squeeze, unsqueeze and flatten on every dtype") {
  for (DType dt : test::all_dtypes()) {
    CAPTURE(to_string(dt));
    Tensor a = make(dt, fit(dt, {1, 2, 3, 4, 5, 6}), {1, 2, 3});
    check_values(a.transpose(), fit(dt, {1, 4, 2, 5, 3, 6}));
    CHECK(a.transpose().shape() == Shape{1, 3, 2});
    check_values(a.transpose(0, 2), fit(dt, {1, 4, 2, 5, 3, 6}));
    CHECK(a.transpose(0, 2).shape() == Shape{3, 2, 1});
    check_values(a.squeeze(0).transpose(1, 0), fit(dt, {1, 4, 2, 5, 3, 6}));
    check_values(a.unsqueeze(-1).flatten(1).transpose(0, 1), fit(dt, {1, 2, 3, 4, 5, 6}));
  }
  Tensor a = Tensor::zeros({2, 1, 3});
  CHECK(a.squeeze(1).shape() == Shape{2, 3});
  CHECK(a.squeeze(-2).shape() == Shape{2, 3});
  CHECK(a.squeeze(0).shape() == Shape{2, 1, 3});  // size 2: a no-op
  CHECK(a.unsqueeze(0).shape() == Shape{1, 2, 1, 3});
  CHECK(a.unsqueeze(3).shape() == Shape{2, 1, 3, 1});
  CHECK(a.unsqueeze(-1).shape() == Shape{2, 1, 3, 1});
  CHECK(a.unsqueeze(-4).shape() == Shape{1, 2, 1, 3});
  CHECK(Tensor::scalar(2).unsqueeze(0).shape() == Shape{1});
  CHECK(a.flatten().shape() == Shape{6});
  CHECK(a.flatten(1).shape() == Shape{2, 3});
  CHECK(a.flatten(0, 1).shape() == Shape{2, 3});
  CHECK(a.flatten(-2, -2).shape() == Shape{2, 1, 3});
  CHECK(a.transpose(0, -1).shape() == Shape{3, 1, 2});
}

TEST_CASE("movement errors name the op and the axes") {
  Tensor a = Tensor::zeros({2, 1, 3});
  CHECK_THROWS_WITH_AS(a.squeeze(3), doctest::Contains("squeeze: axis 3 is out of range"), Error);
  CHECK_THROWS_WITH_AS(a.unsqueeze(4), doctest::Contains("unsqueeze: axis 4 is out of range"), Error);
  CHECK_THROWS_WITH_AS(a.unsqueeze(-5), doctest::Contains("unsqueeze: axis -5 is out of range"), Error);
  CHECK_THROWS_WITH_AS(a.transpose(0, 3), doctest::Contains("transpose: axis 3 is out of range"), Error);
  CHECK_THROWS_WITH_AS(a.flatten(2, 1), doctest::Contains("flatten: start axis 2 comes after end axis 1"),
                       Error);
  CHECK_THROWS_WITH_AS(a.slice(1, 0, 1, 0), doctest::Contains("slice: step must be positive, got 0"), Error);
  CHECK_THROWS_WITH_AS(a.slice(0, 0, 1, -1), doctest::Contains("slice: step must be positive, got -1"),
                       Error);
  CHECK_THROWS_WITH_AS(a.slice(3, 0, 1), doctest::Contains("slice: axis 3 is out of range"), Error);
  CHECK_THROWS_WITH_AS(a.expand({-1, 2, 1, 3}), doctest::Contains("expand: cannot expand shape [2, 1, 3]"),
                       Error);
}

TEST_CASE("slice: steps, negative and out-of-range bounds clamp like PyTorch") {
  Tensor a = make(DType::Int32, iota(10), {10});
  check_values(a.slice(0, 2, 5), {2, 3, 4});
  check_values(a.slice(0, 1, 8, 3), {1, 4, 7});
  check_values(a.slice(0, 1, 9, 3), {1, 4, 7});
  check_values(a.slice(0, 1, 10, 3), {1, 4, 7});
  check_values(a.slice(0, 0, 10, 4), {0, 4, 8});
  check_values(a.slice(0, -3, 100), {7, 8, 9});
  check_values(a.slice(0, -100, 2), {0, 1});
  check_values(a.slice(0, -4, -1, 2), {6, 8});
  check_values(a.slice(0, 0, 100, 7), {0, 7});
  check_values(a.slice(0, 5, 6, 10), {5});
  CHECK(a.slice(0, 5, 2).shape() == Shape{0});
  CHECK(a.slice(0, 12, 20, 2).shape() == Shape{0});
  CHECK(a.slice(0, -1, -3, 3).shape() == Shape{0});
  Tensor m = make(DType::Float32, iota(20), {4, 5});
  check_values(m.slice(1, 0, 5, 2), {0, 2, 4, 5, 7, 9, 10, 12, 14, 15, 17, 19});
  check_values(m.slice(-2, 1, 4, 2), {5, 6, 7, 8, 9, 15, 16, 17, 18, 19});
  check_values(m.slice(0, 1, 4, 2).slice(1, -2, 5, 2) * 2, {16, 36});
  for (DType dt : test::all_dtypes()) {
    CAPTURE(to_string(dt));
    check_values(make(dt, fit(dt, {1, 0, 2, 3, 0, 5, 0}), {7}).slice(0, 1, 7, 2), fit(dt, {0, 3, 5}));
  }
}

TEST_CASE("expand with -1 keeps a size; pad with a value on every dtype") {
  check_values(make(DType::Float32, {1, 2}, {2, 1}).expand({-1, 3}), {1, 1, 1, 2, 2, 2});
  check_values(make(DType::Float32, {1, 2}, {2, 1}).expand({2, -1, 2}), {1, 1, 2, 2, 1, 1, 2, 2});
  for (DType dt : test::all_dtypes()) {
    CAPTURE(to_string(dt));
    const double v = dt.is_bool() ? 1 : 7;
    Tensor a = make(dt, fit(dt, {1, 0, 3, 4}), {2, 2});
    check_values(a.pad({{1, 0}, {0, 1}}, v), fit(dt, {v, v, v, 1, 0, v, 3, 4, v}));
  }
  check_values(make(DType::Float64, {1, 2}, {2}).pad({{2, 1}}, -0.5), {-0.5, -0.5, 1, 2, -0.5});
}

// ---- cat and stack ---------------------------------------------------------------------------

TEST_CASE("cat and stack on every dtype, along every axis") {
  for (DType dt : test::all_dtypes()) {
    CAPTURE(to_string(dt));
    Tensor a = make(dt, fit(dt, {1, 2, 3, 4}), {2, 2});
    Tensor b = make(dt, fit(dt, {5, 0, 7, 8, 9, 0}), {2, 3});
    Tensor c = make(dt, fit(dt, {0, 6}), {1, 2});
    check_values(cat({a, b}, 1), fit(dt, {1, 2, 5, 0, 7, 3, 4, 8, 9, 0}));
    check_values(cat({a, c, a}, 0), fit(dt, {1, 2, 3, 4, 0, 6, 1, 2, 3, 4}));
    check_values(cat({c, a}, -2), fit(dt, {0, 6, 1, 2, 3, 4}));
    check_values(stack({a, a.flip(0)}), fit(dt, {1, 2, 3, 4, 3, 4, 1, 2}));
    check_values(stack({a, a.flip(0)}, 1), fit(dt, {1, 2, 3, 4, 3, 4, 1, 2}));
    check_values(stack({a, a.flip(0)}, -1), fit(dt, {1, 3, 2, 4, 3, 1, 4, 2}));
    CHECK(stack({a, a, a}, 2).shape() == Shape{2, 2, 3});
  }
}

TEST_CASE("cat promotes dtypes, keeps -0.0 and NaN, skips empty pieces, runs as one kernel") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor i = make(DType::Int32, {1, 2}, {2});
  Tensor f = make(DType::Float32, {-0.0, nan}, {2});
  Tensor joined = cat({i, f, Tensor::zeros({0}, DType::Int64)});
  CHECK(joined.dtype() == DType::Float32);
  const auto before = counters().kernels_executed;
  check_values(joined, {1, 2, -0.0, nan});
  CHECK(counters().kernels_executed == before + 1);
  CHECK(std::signbit(joined.to_vector<float>()[2]));
  CHECK(cat({make(DType::Bool, {1}, {1}), make(DType::UInt8, {200}, {1})}).dtype() == DType::UInt8);
  check_values(cat({make(DType::Bool, {1}, {1}), make(DType::UInt8, {200}, {1})}), {1, 200});
  check_values(cat({i}) * 1, {1, 2});
  CHECK(cat({Tensor::zeros({2, 0}), Tensor::zeros({2, 0})}, 1).shape() == Shape{2, 0});
  Tensor x = make(DType::Float32, iota(6), {2, 3});
  check_ref(cat({x * 2, x.exp(), x - 1}, 1) + 1, 2);
}

// 200 pieces make one kernel of thousands of lines of LLVM IR, which the engine
// compiles at JitLevel::Bulk (O0 code generation): its values must not change.
TEST_CASE("stack of 200 tensors runs as one kernel and puts every value in place") {
  std::vector<Tensor> parts;
  for (int i = 0; i < 200; ++i) {
    std::vector<double> v(8);
    for (int j = 0; j < 8; ++j) v[j] = i * 8 + j;
    parts.push_back(make(DType::Float32, v, {2, 4}));
  }
  const auto before = counters().kernels_executed;
  const std::vector<float> got = (stack(parts, 0) * 2).to_vector<float>();
  CHECK(counters().kernels_executed == before + 1);
  REQUIRE(got.size() == 1600);
  for (size_t k = 0; k < got.size(); ++k) REQUIRE(got[k] == 2.0f * static_cast<float>(k));
}

TEST_CASE("cat and stack errors name the op, the tensors and the shapes") {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({2, 4}), c = Tensor::zeros({2});
  CHECK_THROWS_WITH_AS(
      cat({a, b}, 0),
      doctest::Contains(
          "cat: tensor 1 has shape [2, 4] but tensor 0 has shape [2, 3]; shapes must match except on axis 0"),
      Error);
  CHECK_NOTHROW(cat({a, b}, 1));
  CHECK_THROWS_WITH_AS(cat({a, c}, 1), doctest::Contains("cat: tensor 1 has shape [2]"), Error);
  CHECK_THROWS_WITH_AS(cat({a, b}, 2), doctest::Contains("cat: axis 2 is out of range"), Error);
  CHECK_THROWS_WITH_AS(cat({}, 0), doctest::Contains("cat: expected at least one tensor"), Error);
  CHECK_THROWS_WITH_AS(cat({Tensor::scalar(1)}), doctest::Contains("cat: tensor 0 is 0-d"), Error);
  CHECK_THROWS_WITH_AS(stack({a, b}),
                       doctest::Contains("stack: tensor 1 has shape [2, 4] but tensor 0 has shape [2, 3]"),
                       Error);
  CHECK_THROWS_WITH_AS(stack({a, a}, 3), doctest::Contains("stack: axis 3 is out of range"), Error);
  CHECK_THROWS_WITH_AS(stack({}), doctest::Contains("stack: expected at least one tensor"), Error);
}

// ---- gather, index_select, one_hot -----------------------------------------------------------

TEST_CASE("gather follows torch.gather on both axes and every dtype") {
  for (DType dt : test::all_dtypes()) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, fit(dt, {1, 2, 0, 4, 5, 6}), {2, 3});
    Tensor i0 = make(DType::Int64, {1, 0, 1, 0, 0, 0}, {2, 3});
    check_values(x.gather(0, i0), fit(dt, {4, 2, 6, 1, 2, 0}));
    Tensor i1 = make(DType::Int32, {2, 2, 0, 1, 0, 0, 2, 1}, {2, 4});
    check_values(x.gather(1, i1), fit(dt, {0, 0, 1, 2, 4, 4, 6, 5}));
    Tensor small = make(DType::Int64, {2}, {1, 1});  // smaller than the input off the gathered axis
    check_values(x.gather(-1, small), fit(dt, {0}));
  }
  Tensor t = make(DType::Float32, iota(24, 0.5), {2, 3, 4});
  Tensor idx = make(DType::Int64, {2, 0, 1, 1, 0, 2, 2, 2, 1, 0, 0, 1}, {2, 2, 3});
  const auto before = counters().kernels_executed;
  check_values(t.gather(1, idx), {4, 0.5, 3, 2, 0.5, 5, 10, 10.5, 9, 6, 6.5, 9});
  CHECK(counters().kernels_executed == before + 1);
}

TEST_CASE("gather and index_select pass values bit-exactly; indices outside [0, n) give 0") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = make(DType::Float64, {-0.0, nan, 3}, {3});
  std::vector<double> got = check_ref(x.gather(0, make(DType::Int32, {0, 1, 2, 3, -1, 0}, {6})));
  CHECK(std::signbit(got[0]));
  CHECK(std::isnan(got[1]));
  CHECK(got[2] == 3);
  CHECK(got[3] == 0);
  CHECK(got[4] == 0);
  CHECK(std::signbit(got[5]));
  check_values(make(DType::Int64, {-5, 6}, {2}).index_select(0, make(DType::Int64, {1, -1, 2, 0}, {4})),
               {6, 0, 0, -5});
  Tensor big = Tensor::from_vector<int64_t>({std::numeric_limits<int64_t>::min(), 1}, {2});
  CHECK(big.gather(0, make(DType::UInt8, {0}, {1})).item<int64_t>() == std::numeric_limits<int64_t>::min());
}

TEST_CASE("index_select on every dtype, along both axes, with Int32, Int64, UInt8 and 0-d indices") {
  for (DType dt : test::all_dtypes()) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, fit(dt, {1, 2, 0, 4, 5, 6}), {2, 3});
    check_values(x.index_select(1, make(DType::Int64, {2, 0, 2, 1}, {4})), fit(dt, {0, 1, 0, 2, 6, 4, 6, 5}));
    check_values(x.index_select(0, make(DType::Int32, {1, 1, 0}, {3})), fit(dt, {4, 5, 6, 4, 5, 6, 1, 2, 0}));
    check_values(x.index_select(-1, make(DType::UInt8, {1}, {1})), fit(dt, {2, 5}));
  }
  Tensor x = make(DType::Float32, iota(6), {2, 3});
  Tensor picked = x.index_select(1, Tensor::scalar(2, DType::Int64));
  CHECK(picked.shape() == Shape{2, 1});
  check_values(picked, {2, 5});
  check_ref(x.index_select(0, Tensor::arange(2).flip(0)) * 3);
}

TEST_CASE("one_hot gives Int32 rows; values outside [0, n) give all-zero rows") {
  for (DType dt : {DType::UInt8, DType::Int32, DType::Int64}) {
    CAPTURE(to_string(dt));
    Tensor x = make(dt, {2, 0, 1, 3}, {2, 2});
    Tensor h = x.one_hot(3);
    CHECK(h.dtype() == DType::Int32);
    CHECK(h.shape() == Shape{2, 2, 3});
    check_values(h, {0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0});
  }
  check_values(make(DType::Int32, {-1, 1}, {2}).one_hot(2), {0, 0, 0, 1});
  check_values(Tensor::scalar(1, DType::Int64).one_hot(4) * 1, {0, 1, 0, 0});
  CHECK(make(DType::Int32, {1, 2}, {2}).one_hot(0).shape() == Shape{2, 0});
}

TEST_CASE("gather, index_select and one_hot errors name the op, the shapes and the dtypes") {
  Tensor x = Tensor::zeros({2, 3});
  CHECK_THROWS_WITH_AS(
      x.gather(0, Tensor::zeros({2}, DType::Int64)),
      doctest::Contains("gather: index of shape [2] has 1 dimensions but the input of shape [2, 3] has 2"),
      Error);
  CHECK_THROWS_WITH_AS(
      x.gather(0, Tensor::zeros({2, 4}, DType::Int64)),
      doctest::Contains(
          "gather: index of shape [2, 4] is larger than the input of shape [2, 3] on axis 1 (4 > 3)"),
      Error);
  CHECK_NOTHROW(x.gather(1, Tensor::zeros({2, 4}, DType::Int64)));
  CHECK_THROWS_WITH_AS(x.gather(0, Tensor::zeros({2, 3})), doctest::Contains("gather: index has dtype f32"),
                       Error);
  CHECK_THROWS_WITH_AS(x.gather(0, Tensor::zeros({2, 3}, DType::Bool)),
                       doctest::Contains("gather: index has dtype bool"), Error);
  CHECK_THROWS_WITH_AS(x.gather(2, Tensor::zeros({2, 3}, DType::Int32)),
                       doctest::Contains("gather: axis 2 is out of range"), Error);
  CHECK_THROWS_WITH_AS(
      x.index_select(0, Tensor::zeros({2, 1}, DType::Int64)),
      doctest::Contains("index_select: index of shape [2, 1] has 2 dimensions; expected a 1-D"), Error);
  CHECK_THROWS_WITH_AS(x.index_select(0, Tensor::zeros({2})),
                       doctest::Contains("index_select: index has dtype f32"), Error);
  CHECK_THROWS_WITH_AS(
      x.one_hot(3), doctest::Contains("one_hot: the tensor has dtype f32; expected an integer dtype"), Error);
  CHECK_THROWS_WITH_AS(x.cast(DType::Int32).one_hot(-1), doctest::Contains("one_hot: num_classes is -1"),
                       Error);
}

TEST_CASE("repeat matches PyTorch's tiling, with extra leading axes and zero counts") {
  const int n =
      loom::test::check_torch_table("repeat", [](const loom::test::json& a, const std::vector<Tensor>& in) {
        return std::vector<Tensor>{in[0].repeat(a["repeats"].get<std::vector<int64_t>>())};
      });
  CHECK(n == 6);
  loom::test::gradcheck1([](const Tensor& x) { return x.repeat({2, 1, 3}); }, loom::test::Input{{2, 3}});
  CHECK_THROWS_WITH_AS(Tensor::zeros({2, 3}).repeat({2}),
                       doctest::Contains("repeat: 1 repeats given for a tensor of shape [2, 3]"), Error);
  CHECK_THROWS_WITH_AS(Tensor::zeros({2}).repeat({-1}), doctest::Contains("negative"), Error);
}
