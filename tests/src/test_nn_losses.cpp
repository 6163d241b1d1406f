// The losses (src/nn_losses.cpp) against PyTorch's values and Float64 gradients
// (tests/data/nn_table.json, made once by tests/data/make_nn_table.py), hand values, and the errors.
#include "torch_table.hpp"

#include <loom/nn.hpp>

#include <cmath>

using namespace loom;
using nn::Reduction;
using test::json;

namespace {

Reduction reduction_of(const json& a) {
  const std::string r = a["reduction"];
  return r == "sum" ? Reduction::Sum : r == "none" ? Reduction::None : Reduction::Mean;
}

// PyTorch does not differentiate class and element weights; the table's gradient for them is 0,
// so loom's weights are detached too.
nn::CrossEntropyOptions options_of(const json& a, const std::vector<Tensor>& in) {
  nn::CrossEntropyOptions o;
  if (a["weight"].get<bool>()) o.weight = in[2].detach();
  if (a["ignore_index"].is_number()) o.ignore_index = a["ignore_index"].get<int64_t>();
  o.label_smoothing = a["label_smoothing"];
  o.reduction = reduction_of(a);
  return o;
}

Tensor optional_input(const std::vector<Tensor>& in, size_t i, bool present) {
  return present ? in[i].detach() : Tensor{};
}

}  // namespace

TEST_CASE("cross_entropy and nll_loss match PyTorch: weights, ignore_index, label smoothing, shapes") {
  // 2 dtypes x 3 reductions x (3 shapes x 6 option sets + all ignored + 2 x 3 probability sets).
  CHECK(test::check_torch_table("cross_entropy", [](const json& a, const std::vector<Tensor>& in) {
          return std::vector<Tensor>{nn::cross_entropy(in[0], in[1], options_of(a, in))};
        }) == 150);
  CHECK(test::check_torch_table("nll_loss", [](const json& a, const std::vector<Tensor>& in) {
          return std::vector<Tensor>{nn::nll_loss(in[0], in[1], options_of(a, in))};
        }) == 72);
}

TEST_CASE("the binary cross-entropies match PyTorch: weights, pos_weight, saturated logits and logs") {
  CHECK(test::check_torch_table("binary_cross_entropy_with_logits",
                                [](const json& a, const std::vector<Tensor>& in) {
                                  const bool weight = a["weight"], pos = a["pos_weight"];
                                  return std::vector<Tensor>{nn::binary_cross_entropy_with_logits(
                                      in[0], in[1], reduction_of(a), optional_input(in, 2, weight),
                                      optional_input(in, weight ? 3 : 2, pos))};
                                }) == 24);
  CHECK(test::check_torch_table("binary_cross_entropy", [](const json& a, const std::vector<Tensor>& in) {
          return std::vector<Tensor>{nn::binary_cross_entropy(
              in[0], in[1], reduction_of(a), optional_input(in, 2, a["weight"].get<bool>()))};
        }) == 12);
}

TEST_CASE("mse_loss, l1_loss, smooth_l1_loss and huber_loss match PyTorch, kinks included") {
  CHECK(test::check_torch_table("mse_loss", [](const json& a, const std::vector<Tensor>& in) {
          return std::vector<Tensor>{nn::mse_loss(in[0], in[1], reduction_of(a))};
        }) == 12);
  CHECK(test::check_torch_table("l1_loss", [](const json& a, const std::vector<Tensor>& in) {
          return std::vector<Tensor>{nn::l1_loss(in[0], in[1], reduction_of(a))};
        }) == 6);
  CHECK(test::check_torch_table("smooth_l1_loss", [](const json& a, const std::vector<Tensor>& in) {
          return std::vector<Tensor>{nn::smooth_l1_loss(in[0], in[1], reduction_of(a), a["beta"])};
        }) == 18);
  CHECK(test::check_torch_table("huber_loss", [](const json& a, const std::vector<Tensor>& in) {
          return std::vector<Tensor>{nn::huber_loss(in[0], in[1], reduction_of(a), a["delta"])};
        }) == 18);
}

TEST_CASE("smooth_l1_loss with beta 0 is l1_loss, gradient included (0 where the difference is 0)") {
  // PyTorch 1.13 gives -1 for both the input and the target there (the table keeps values only).
  Tensor p = Tensor::from_vector<double>({0.0, 0.5, -1.5}, {3}).requires_grad_();
  const Tensor t = Tensor::from_vector<double>({0.0, 0.0, 0.0}, {3});
  nn::smooth_l1_loss(p, t, Reduction::Sum, 0).backward();
  CHECK(p.grad().to_vector<double>() == std::vector<double>{0, 1, -1});
}

TEST_CASE("cross_entropy with default options is the two-argument graph; hand values") {
  const Tensor logits = Tensor::from_vector<float>({0, 0, 0, 2, 0, 0}, {2, 3});
  const Tensor labels = Tensor::from_vector<int32_t>({1, 0}, {2});
  const Tensor plain = nn::cross_entropy(logits, labels), with = nn::cross_entropy(logits, labels, {});
  CHECK(plain.node()->uop == with.node()->uop);
  // Row 0: log 3; row 1: log(e^2 + 2) - 2. Ignoring label 1 leaves row 1 alone.
  const double row0 = std::log(3.0), row1 = std::log(std::exp(2.0) + 2) - 2;
  CHECK(plain.item<float>() == doctest::Approx((row0 + row1) / 2).epsilon(1e-6));
  nn::CrossEntropyOptions ignore_one;
  ignore_one.ignore_index = 1;
  CHECK(nn::cross_entropy(logits, labels, ignore_one).item<float>() == doctest::Approx(row1).epsilon(1e-6));
}

TEST_CASE("the losses' errors name the op and what was expected") {
  const Tensor x = Tensor::zeros({4, 3});
  const Tensor labels = Tensor::from_vector<int32_t>({0, 1, 2, 3}, {4});
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, labels, {}), doctest::Contains("labels value 3 at position 3"),
                       Error);
  nn::CrossEntropyOptions bad;
  bad.label_smoothing = 1.5;
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, labels, bad), doctest::Contains("label_smoothing 1.5 is outside"),
                       Error);
  nn::CrossEntropyOptions weighted;
  weighted.weight = Tensor::ones({4});
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, Tensor::zeros({4}, DType::Int32), weighted),
                       doctest::Contains("weight [4] should hold one value per class, [3]"), Error);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, Tensor::zeros({3}, DType::Int32), {}),
                       doctest::Contains("labels [3] should have the input's shape without its class axis"),
                       Error);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, Tensor::zeros({4, 2}), {}),
                       doctest::Contains("probabilities [4, 2] should have the input's shape [4, 3]"), Error);
  CHECK_THROWS_WITH_AS(nn::nll_loss(x, Tensor::zeros({4})),
                       doctest::Contains("nll_loss: labels have dtype Float32"), Error);
  CHECK_THROWS_WITH_AS(nn::binary_cross_entropy_with_logits(x, Tensor::zeros({3})),
                       doctest::Contains("target [3] should have the input's shape [4, 3]"), Error);
  CHECK_THROWS_WITH_AS(nn::l1_loss(x, Tensor::zeros({4, 3}, DType::Float64)),
                       doctest::Contains("l1_loss: target has dtype Float64 but input has dtype Float32"),
                       Error);
  CHECK_THROWS_WITH_AS(nn::huber_loss(x, x, Reduction::Mean, 0),
                       doctest::Contains("delta 0 must be positive"), Error);
}
