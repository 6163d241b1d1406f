// Conv1d, Conv2d and ConvTranspose2d: each equals nn::functional's convolution with its
// own parameters; parameter names, shapes and state_dict; PyTorch's default initialisation
// bounds; errors naming the module; a small convolutional network's gradient against
// Float64 finite differences.
#include "check.hpp"
#include "gradcheck.hpp"
#include "support/error_message.hpp"

#include <loom/nn.hpp>

#include <cmath>
#include <map>

using namespace loom;
using test::check_message;
using test::error_of;
using test::values;
namespace F = nn::functional;

namespace {

std::vector<std::string> names(const NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

// Every value of t lies in [-bound, bound], and the values spread over it as a uniform
// draw does: each quarter of the range holds a quarter of them within 5 standard deviations.
void check_uniform(const Tensor& t, double bound) {
  const auto v = values(t);
  const auto n = static_cast<double>(v.size());
  std::vector<double> count(4, 0);
  double max_abs = 0;
  for (double x : v) {
    CHECK(std::abs(x) <= bound);
    max_abs = std::max(max_abs, std::abs(x));
    count[std::min<size_t>(3, static_cast<size_t>((x + bound) / (2 * bound) * 4))] += 1;
  }
  CHECK(max_abs > 0.9 * bound);  // the bound itself, not a narrower one
  for (double c : count) CHECK(std::abs(c / n - 0.25) < 5 * std::sqrt(0.25 * 0.75 / n));
}

}  // namespace

TEST_CASE("Conv2d is conv2d with its own weight and bias, with PyTorch's argument order") {
  manual_seed(3);
  const nn::Conv2d conv(4, 6, {3, 2}, /*stride=*/{2, 1}, /*padding=*/1, /*dilation=*/{1, 2}, /*groups=*/2);
  CHECK(conv.weight.shape() == Shape{6, 2, 3, 2});
  CHECK(conv.bias.shape() == Shape{6});
  CHECK(names(conv.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  const Tensor x = Tensor::randn({2, 4, 7, 6});
  const Tensor y = conv(x);
  CHECK(y.shape() == Shape{2, 6, 4, 6});  // W: (6 + 2 - 2 - 1) / 1 + 1
  CHECK(values(y) == values(F::conv2d(x, conv.weight, conv.bias, {2, 1}, 1, {1, 2}, 2)));
  // Unbatched input [C, H, W], as PyTorch.
  CHECK(values(conv(x.slice(0, 0, 1).squeeze(0))) == values(y.slice(0, 0, 1)));
  // Without bias, the bias is undefined and not a parameter.
  const nn::Conv2d plain(4, 6, 3, 1, 0, 1, 1, /*bias=*/false);
  CHECK(!plain.bias.defined());
  CHECK(names(plain.named_parameters()) == std::vector<std::string>{"weight"});
  CHECK(values(plain(x)) == values(F::conv2d(x, plain.weight)));
}

TEST_CASE("Conv1d and ConvTranspose2d are their functional calls with their own parameters") {
  manual_seed(4);
  const nn::Conv1d c1(3, 4, 3, /*stride=*/2, /*padding=*/1, /*dilation=*/1, /*groups=*/1);
  CHECK(c1.weight.shape() == Shape{4, 3, 3});
  CHECK(c1.bias.shape() == Shape{4});
  const Tensor x1 = Tensor::randn({2, 3, 9});
  CHECK(c1(x1).shape() == Shape{2, 4, 5});
  CHECK(values(c1(x1)) == values(F::conv1d(x1, c1.weight, c1.bias, 2, 1)));
  CHECK(values(c1(x1.slice(0, 1, 2).squeeze(0))) == values(c1(x1).slice(0, 1, 2)));

  // PyTorch's order: stride, padding, output_padding, groups, bias, dilation.
  const nn::ConvTranspose2d ct(4, 6, 3, /*stride=*/2, /*padding=*/1, /*output_padding=*/1, /*groups=*/2,
                               /*bias=*/true, /*dilation=*/1);
  CHECK(ct.weight.shape() == Shape{4, 3, 3, 3});  // [in, out / groups, kh, kw]
  CHECK(ct.bias.shape() == Shape{6});
  CHECK(names(ct.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  const Tensor x = Tensor::randn({2, 4, 3, 5});
  const Tensor y = ct(x);
  CHECK(y.shape() == Shape{2, 6, 6, 10});  // (H - 1) * 2 - 2 + 2 + 1 + 1
  CHECK(values(y) == values(F::conv_transpose2d(x, ct.weight, ct.bias, 2, 1, 1, 2, 1)));
}

TEST_CASE("convolution modules start as PyTorch's: weight and bias uniform on +-1/sqrt(fan_in)") {
  manual_seed(5);
  // fan_in = in / groups * kh * kw = 8 / 2 * 3 * 3 = 36: bound 1/6.
  const nn::Conv2d conv(8, 64, 3, 1, 0, 1, /*groups=*/2);
  check_uniform(conv.weight, 1.0 / 6);
  const nn::Conv2d wide(1, 4000, 1);  // fan_in 1: the bias bound is 1
  check_uniform(wide.bias, 1.0);
  // Conv1d: fan_in = 5 * 4 = 20.
  const nn::Conv1d c1(5, 200, 4);
  check_uniform(c1.weight, 1 / std::sqrt(20.0));
  // ConvTranspose2d takes fan_in from its weight [in, out / groups, k, k], as PyTorch: 9 * 2 * 2 = 36.
  const nn::ConvTranspose2d ct(100, 9, 2);
  check_uniform(ct.weight, 1.0 / 6);
  // Parameters are realized leaves that require a gradient; a second module draws new values.
  CHECK(conv.weight.requires_grad());
  CHECK(values(nn::Conv2d(8, 64, 3, 1, 0, 1, 2).weight) != values(conv.weight));
}

TEST_CASE("convolution modules name themselves, the shapes and what they expected in errors") {
  check_message(error_of([] { nn::Conv2d(6, 4, 3, 1, 0, 1, /*groups=*/4); }),
                {"Conv2d", "groups = 4", "in_channels = 6", "out_channels = 4"});
  check_message(error_of([] { nn::Conv1d(4, 6, 3, 1, 0, 1, /*groups=*/4); }), {"Conv1d", "groups = 4"});
  check_message(error_of([] { nn::ConvTranspose2d(4, 6, 3, 1, 0, 0, /*groups=*/3); }),
                {"ConvTranspose2d", "groups = 3"});
  check_message(error_of([] { nn::Conv2d(0, 4, 3); }), {"Conv2d", "positive"});
  check_message(error_of([] { nn::Conv2d(1, 4, {3, 0}); }), {"Conv2d", "kernel_size", "(3, 0)"});
  check_message(error_of([] { nn::ConvTranspose2d(1, 1, 3, 2, 0, /*output_padding=*/2); }),
                {"ConvTranspose2d", "output_padding"});
  const nn::Conv2d conv(3, 4, 3);
  check_message(error_of([&] {
                  conv(Tensor::zeros({2, 5, 8, 8}));
                }),
                {"Conv2d", "in_channels = 3", "[2, 5, 8, 8]"});
  check_message(error_of([&] { conv(Tensor::zeros({8, 8})); }), {"Conv2d", "[8, 8]"});
  check_message(error_of([&] {
                  conv(Tensor::zeros({1, 3, 8, 8}, DType::Float64));
                }),
                {"Conv2d", "Float64", "Float32"});
  const nn::Conv1d c1(3, 4, 3);
  check_message(error_of([&] { c1(Tensor::zeros({2, 4, 8})); }), {"Conv1d", "in_channels = 3", "[2, 4, 8]"});
  const nn::ConvTranspose2d ct(3, 4, 3);
  check_message(error_of([&] {
                  ct(Tensor::zeros({1, 2, 4, 4}));
                }),
                {"ConvTranspose2d", "in_channels = 3", "[1, 2, 4, 4]"});
}

TEST_CASE("convolution modules' state_dict round-trips into a fresh module") {
  manual_seed(6);
  nn::Sequential a(nn::Conv2d(2, 3, 3), nn::Conv1d(3, 3, 2), nn::ConvTranspose2d(3, 2, 2, 2));
  nn::Sequential b(nn::Conv2d(2, 3, 3), nn::Conv1d(3, 3, 2), nn::ConvTranspose2d(3, 2, 2, 2));
  CHECK(names(a.state_dict()) ==
        std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"});
  std::map<std::string, Tensor> state;
  for (const auto& [name, t] : a.state_dict()) state.emplace(name, t);
  const auto result = b.load_state_dict(state);
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
  for (size_t i = 0; i < a.state_dict().size(); ++i) {
    CAPTURE(a.state_dict()[i].first);
    CHECK(values(a.state_dict()[i].second) == values(b.state_dict()[i].second));
  }
  const Tensor x = Tensor::randn({1, 2, 5, 5});
  CHECK(values(a.at<nn::Conv2d>(0)(x)) == values(b.at<nn::Conv2d>(0)(x)));
  // A state of another shape is an error naming the key.
  state["0.weight"] = Tensor::zeros({3, 2, 2, 2});
  check_message(error_of([&] { b.load_state_dict(state); }), {"0.weight"});
}

namespace {

// Sequential(Conv2d, BatchNorm2d, ReLU, MaxPool2d, Flatten, Linear) in Float64: every
// parameter and buffer cast, so a finite difference is accurate to ~1e-9.
nn::Sequential small_cnn() {
  manual_seed(7);
  nn::Conv2d conv(1, 2, 3, 1, 1);
  nn::BatchNorm2d bn(2);
  nn::Linear fc(2 * 2 * 2, 3);
  auto f64 = [](Tensor& t) { t = t.detach().cast(DType::Float64).realize().requires_grad_(); };
  f64(conv.weight), f64(conv.bias), f64(bn.weight), f64(bn.bias), f64(fc.weight), f64(fc.bias);
  bn.running_mean = bn.running_mean.cast(DType::Float64).realize();
  bn.running_var = bn.running_var.cast(DType::Float64).realize();
  return nn::Sequential(conv, bn, nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), fc);
}

}  // namespace

TEST_CASE("a small convolutional network's gradients equal Float64 finite differences") {
  nn::Sequential net = small_cnn();
  const Tensor x = Tensor::randn({3, 1, 4, 4}, DType::Float64);
  const Tensor target = Tensor::randn({3, 3}, DType::Float64);
  auto loss_of = [&] { return nn::mse(net(x), target); };
  const Tensor loss = loss_of();
  loss.backward();
  auto& conv = net.at<nn::Conv2d>(0);
  auto& fc = net.at<nn::Linear>(5);
  for (const Tensor& p : net.parameters()) {
    REQUIRE(p.grad().defined());
    for (double g : values(p.grad())) CHECK(std::isfinite(g));
  }
  // Central differences on every element of the conv weight and the linear bias. The step
  // keeps ReLU and the max pool's choices away from their kinks (checked: a larger step agrees).
  for (Tensor* param : {&conv.weight, &fc.bias}) {
    const std::vector<double> base = values(*param), grad = values(param->grad());
    const Shape shape = param->shape();
    for (size_t j = 0; j < base.size(); ++j) {
      auto at = [&](double delta) {
        auto moved = base;
        moved[j] += delta;
        const Tensor saved = *param;
        *param = Tensor::from_vector<double>(moved, shape);
        const double v = loss_of().item<double>();
        *param = saved;
        return v;
      };
      const double h = 1e-6;
      const double fd = (at(h) - at(-h)) / (2 * h);
      INFO("parameter element ", j, ": gradient ", grad[j], ", finite difference ", fd);
      CHECK(std::abs(grad[j] - fd) <= 1e-6 * std::max(1.0, std::abs(fd)));
    }
  }
}
