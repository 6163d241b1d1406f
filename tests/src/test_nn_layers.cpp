// The parameterless modules: activations as the Tensor ops, Flatten's axes,
// Dropout's mask and scale in training and identity in evaluation.
#include "check.hpp"
#include "support/error_message.hpp"

#include <loom/nn.hpp>

#include <cmath>
#include <limits>

using namespace loom;
using test::check_message;
using test::error_of;
using test::values;

TEST_CASE("ReLU, GELU, SiLU and Flatten are the Tensor ops, with PyTorch's defaults") {
  manual_seed(1);
  const Tensor x = Tensor::randn({2, 3, 4});
  CHECK(values(nn::ReLU()(x)) == values(x.relu()));
  CHECK(values(nn::GELU()(x)) == values(x.gelu()));
  CHECK(values(nn::GELU("tanh")(x)) == values(x.gelu("tanh")));
  CHECK(values(nn::SiLU()(x)) == values(x.silu()));
  CHECK(nn::Flatten()(x).shape() == Shape{2, 12});
  CHECK(nn::Flatten(0, 1)(x).shape() == Shape{6, 4});
  CHECK(values(nn::Flatten()(x)) == values(x));
  check_message(error_of([] { nn::GELU("fast"); }), {"GELU", "fast"});
}

TEST_CASE("Dropout keeps each element with probability 1 - p, scaled by 1 / (1 - p), only in training") {
  manual_seed(11);
  const double p = 0.3;
  nn::Dropout drop(p);
  const Tensor x = Tensor::ones({100000}) * 2.0f;
  const auto y = values(drop(x));
  int64_t kept = 0;
  for (double v : y) {
    CHECK((v == 0 || v == doctest::Approx(2 / (1 - p)).epsilon(1e-6)));
    kept += v != 0;
  }
  // 100000 draws: the kept share is within 5 standard deviations (0.0072) of 0.7.
  CHECK(std::abs(static_cast<double>(kept) / 1e5 - (1 - p)) < 0.0073);
  CHECK(values(drop(x)) != y);  // a fresh mask per call
  manual_seed(11);
  CHECK(values(drop(x)) == y);  // seeded: the same mask
  drop.eval();
  CHECK(values(drop(x)) == values(x));
  CHECK(values(nn::Dropout(0)(x)) == values(x));
  // The gradient is the mask's scale where kept, 0 elsewhere.
  drop.train();
  Tensor w = Tensor::ones({1000}).requires_grad_();
  const Tensor out = drop(w);
  out.sum().backward();
  const auto outv = values(out), g = values(w.grad());
  for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == outv[i]);
  for (double bad : {-0.1, 1.0, 2.0})
    check_message(error_of([&] { nn::Dropout{bad}; }), {"Dropout", "[0, 1)"});
  // The module is nn::functional::dropout: the same mask for the same seed. As PyTorch's
  // input * mask / (1 - p), a dropped infinity is NaN and a kept one stays infinite.
  manual_seed(12);
  const auto module_y = values(drop(x));
  manual_seed(12);
  CHECK(values(nn::functional::dropout(x, p)) == module_y);
  const auto inf = values(drop(Tensor::full({1000}, std::numeric_limits<double>::infinity())));
  int64_t nans = 0;
  for (double v : inf) {
    CHECK((std::isnan(v) || v == std::numeric_limits<double>::infinity()));
    nans += std::isnan(v);
  }
  CHECK(nans > 0);
  CHECK(nans < 1000);
}
