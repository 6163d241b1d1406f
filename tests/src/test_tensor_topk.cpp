// topk against PyTorch's values, indices and Float64 gradients (tests/data/nn_table.json), its tie
// order, finite differences, and its errors.
#include "gradcheck.hpp"
#include "torch_table.hpp"

using namespace loom;

namespace {
std::vector<Tensor> run_topk(const test::json& a, const std::vector<Tensor>& in) {
  auto [v, i] = in[0].topk(a["k"].get<int64_t>(), a["dim"].get<int>(), a["largest"].get<bool>());
  return {v, i};
}
}  // namespace

TEST_CASE("topk matches PyTorch's values and indices, NaN the largest, both directions, k = 0 and k = n") {
  CHECK(test::check_torch_table("topk", run_topk) == 17);
}

TEST_CASE("topk at ties: PyTorch's values and gradient, the lower index first") {
  // PyTorch's CPU order at ties is std::nth_element's (here [1, 6, 4] of the four 3s;
  // docs/semantics.md); loom puts the lower index first. Values agree; the gradient goes to the
  // selected elements, so it lands on other, equal elements.
  const test::json& c =
      [] {
        for (const test::json& c : test::nn_table()["cases"])
          if (c["op"] == "topk_ties") return std::cref(c);
        FAIL("no topk_ties case");
        throw;
      }()
          .get();
  Tensor x = test::table_tensor(c["inputs"][0]);
  auto [v, i] = x.topk(3);
  CHECK(test::table_values(v) == test::table_values(test::table_tensor(c["outputs"][0])));
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 4});
  x.requires_grad_();
  const std::vector<double> g = gradient(x.topk(3).first.sum(), {x})[0].to_vector<double>();
  CHECK(g == std::vector<double>{0, 1, 1, 0, 1, 0, 0});
  // Every element equal: the first k indices, in order.
  CHECK(Tensor::zeros({1, 40}).topk(4).second.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("topk's gradient matches finite differences") {
  test::gradcheck1([](const Tensor& x) { return x.topk(3, 1).first; }, test::Input{{4, 7}});
  test::gradcheck1([](const Tensor& x) { return x.topk(2, 0, false).first; }, test::Input{{5, 3}});
}

TEST_CASE("topk's errors name topk, k and the shape") {
  const Tensor x = Tensor::zeros({2, 5});
  CHECK_THROWS_WITH_AS(x.topk(6), doctest::Contains("topk: k = 6 is out of range for dimension 1 of size 5"),
                       Error);
  CHECK_THROWS_WITH_AS(x.topk(-1), doctest::Contains("[2, 5]"), Error);
  CHECK_THROWS_WITH_AS(x.topk(1, 2), doctest::Contains("topk: axis 2"), Error);
  CHECK_THROWS_WITH_AS(Tensor::ones({3}, DType::Bool).topk(1),
                       doctest::Contains("topk: not implemented for Bool"), Error);
  auto [v, i] = Tensor::scalar(4.0).topk(1);
  CHECK(v.item<float>() == 4.0f);
  CHECK(i.item<int64_t>() == 0);
}
