// batch_norm: per-channel statistics over every axis but the channel axis (1). Training
// normalises by the batch's mean and biased variance and assigns the running statistics their
// momentum updates (the unbiased variance, as PyTorch); the assign is lazy, so the update runs
// in the same realize as the step that reads the batch.
#include "src/autocast.hpp"
#include "src/half_compute.hpp"
#include "src/tensor_ops.hpp"

#include <loom/gradient.hpp>
#include <loom/nn_functional.hpp>

namespace loom::nn::functional {

using detail::str;

namespace {
void check_channel_vector(const Tensor& t, const Tensor& x, const char* what) {
  if (!t.defined()) return;
  if (t.shape() != Shape{x.shape()[1]} || t.dtype() != x.dtype())
    throw Error(fmt::format("batch_norm: {} has shape {} and dtype {}; expected [{}] of {} for input {}",
                            what, str(t.shape()), scalar_name(t.dtype().scalar), x.shape()[1],
                            scalar_name(x.dtype().scalar), str(x.shape())));
}
}  // namespace

Tensor batch_norm(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  // Under Autocast a half input and its affine parameters compute in Float32 when the running
  // statistics (if any) are Float32 (src/autocast.hpp); half statistics keep the input's dtype.
  const auto half = [](const Tensor& t) { return t.defined() && t.dtype().is_half(); };
  if (autocast_dtype() && (half(x) || half(weight) || half(bias)) && !half(running_mean) &&
      !half(running_var)) {
    const Autocast off(*autocast_dtype(), false);
    auto f32 = [](const Tensor& t) { return t.defined() ? t.cast(DType::Float32) : t; };
    return batch_norm(f32(x), running_mean, running_var, f32(weight), f32(bias), training, momentum, eps);
  }
  const Shape& xs = detail::uop(x, "batch_norm")->shape().value();
  if (xs.size() < 2)
    throw Error(
        fmt::format("batch_norm: expected an input [N, C, ...] of at least 2 dimensions, got {}", str(xs)));
  if (!x.dtype().is_float())
    throw Error(fmt::format("batch_norm: expected a float input, got {}", scalar_name(x.dtype().scalar)));
  check_channel_vector(running_mean, x, "running_mean");
  check_channel_vector(running_var, x, "running_var");
  check_channel_vector(weight, x, "weight");
  check_channel_vector(bias, x, "bias");
  if (running_mean.defined() != running_var.defined())
    throw Error("batch_norm: running_mean and running_var must both be defined or both undefined");
  if (!training && !running_mean.defined())
    throw Error("batch_norm: evaluation (training = false) needs running_mean and running_var");
  Shape channel(xs.size(), 1);
  channel[1] = xs[1];
  std::vector<int> axes;
  Dim n = 1;  // symbolic over a batch of B rows
  for (size_t a = 0; a < xs.size(); ++a)
    if (a != 1) {
      axes.push_back(static_cast<int>(a));
      n *= xs[a];
    }
  // A half input computes in Float32 (its statistics and parameters widened) and rounds the
  // output and the running statistics' updates once (src/half_compute.hpp).
  using loom::detail::widened_half;
  const auto rounded_as = [](const Tensor& v, const Tensor& like) {
    return loom::detail::is_half(like) ? v.cast(like.dtype()) : v;
  };
  const Tensor xf = widened_half(x);
  Tensor mean, var;
  if (training) {
    if (n.value() <= 1)
      throw Error(
          fmt::format("batch_norm: training needs more than 1 value per channel, got input {}", str(xs)));
    mean = xf.mean(axes, true);
    var = xf.var(axes, 0, true);
    if (running_mean.defined()) {
      NoGrad no_grad;
      const Tensor batch_mean = mean.detach().reshape({xs[1]});
      const Tensor unbiased = var.detach().reshape({xs[1]}) * loom::detail::size_ratio(n, n - 1, var.dtype());
      running_mean.assign(
          rounded_as(widened_half(running_mean) * (1 - momentum) + batch_mean * momentum, running_mean));
      running_var.assign(
          rounded_as(widened_half(running_var) * (1 - momentum) + unbiased * momentum, running_var));
    }
  } else {
    mean = widened_half(running_mean).reshape(channel);
    var = widened_half(running_var).reshape(channel);
  }
  Tensor y = (xf - mean) * (var + eps).rsqrt();
  if (weight.defined()) y = y * widened_half(weight).reshape(channel);
  if (bias.defined()) y = y + widened_half(bias).reshape(channel);
  return rounded_as(y, x);
}

}  // namespace loom::nn::functional
