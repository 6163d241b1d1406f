#include "check.hpp"

using namespace loom;
using loom::test::check_values;

TEST_CASE("first light: (a*b+c).relu().exp() on small inputs") {
  auto a = Tensor::from_vector<float>({1, -2, 3, 0.5f}, {2, 2});
  auto b = Tensor::from_vector<float>({2, 1, -1, 4}, {2, 2});
  auto c = Tensor::from_vector<float>({0, 1, 1, -1}, {2, 2});
  check_values((a * b + c).relu().exp(), {std::exp(2.0f), 1, 1, std::exp(1.0f)}, 4);
}

TEST_CASE("first light: x / x.sum()") {
  auto x = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
  check_values(x / x.sum(), {0.1, 0.2, 0.3, 0.4}, 2);
}
