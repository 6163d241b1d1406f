// cumsum against PyTorch's values and Float64 gradients (tests/data/nn_table.json), finite
// differences, and its errors.
#include "gradcheck.hpp"
#include "torch_table.hpp"

using namespace loom;

TEST_CASE("cumsum matches PyTorch on every axis, dtype (integers and Bool sum in Int64) and empty shapes") {
  const int n = test::check_torch_table("cumsum", [](const test::json& a, const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].cumsum(a["dim"].get<int>())};
  });
  CHECK(n == 17);
}

TEST_CASE("cumsum's gradient is the reverse running sum, and it matches finite differences") {
  test::gradcheck1([](const Tensor& x) { return x.cumsum(1); }, test::Input{{3, 6}});
  test::gradcheck1([](const Tensor& x) { return x.cumsum(0).cumsum(-1); }, test::Input{{4, 2, 3}});
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4}, {4});
  x.requires_grad_();
  CHECK(gradient(x.cumsum(0).sum(), {x})[0].to_vector<double>() == std::vector<double>{4, 3, 2, 1});
}

TEST_CASE("cumsum of a 0-d tensor is the tensor; a bad axis names cumsum") {
  CHECK(Tensor::scalar(2.5).cumsum(0).item<float>() == 2.5f);
  CHECK(Tensor::scalar(3, DType::Int32).cumsum(-1).dtype() == DType::Int64);
  CHECK_THROWS_WITH_AS(Tensor::zeros({2, 3}).cumsum(2), doctest::Contains("cumsum: axis 2"), Error);
}
