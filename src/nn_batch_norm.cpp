// BatchNorm1d and BatchNorm2d: batch statistics in training, running
// statistics (buffers updated with the step) in evaluation, as PyTorch.
#include "src/nn_common.hpp"

#include <loom/gradient.hpp>
#include <loom/nn.hpp>

#include <algorithm>

namespace loom::nn {

using detail::str;

BatchNorm::BatchNorm(const char* type, std::vector<int64_t> ranks, int64_t num_features_, double eps_,
                     std::optional<double> momentum_, bool affine_, bool track)
    : Module(type),
      num_features(num_features_),
      eps(eps_),
      momentum(momentum_),
      affine(affine_),
      track_running_stats(track),
      ranks_(std::move(ranks)) {
  if (num_features <= 0)
    throw Error(fmt::format("{}: num_features must be positive, got {}", type, num_features));
  if (!(eps >= 0)) throw Error(fmt::format("{}: eps must be non-negative, got {}", type, eps));
  if (momentum && !(*momentum >= 0 && *momentum <= 1))
    throw Error(fmt::format("{}: momentum must lie in [0, 1], got {}", type, *momentum));
  register_parameter("weight", &BatchNorm::weight);
  register_parameter("bias", &BatchNorm::bias);
  register_buffer("running_mean", &BatchNorm::running_mean);
  register_buffer("running_var", &BatchNorm::running_var);
  register_buffer("num_batches_tracked", &BatchNorm::num_batches_tracked);
  if (affine) {
    weight = detail_nn::parameter(Tensor::ones({num_features}));
    bias = detail_nn::parameter(Tensor::zeros({num_features}));
  }
  if (track) {
    running_mean = Tensor::zeros({num_features}).realize();
    running_var = Tensor::ones({num_features}).realize();
    num_batches_tracked = Tensor::zeros({}, DType::Int64).realize();
  }
}

BatchNorm1d::BatchNorm1d(int64_t n, double eps, std::optional<double> momentum, bool affine, bool track)
    : BatchNorm("BatchNorm1d", {2, 3}, n, eps, momentum, affine, track) {}
BatchNorm2d::BatchNorm2d(int64_t n, double eps, std::optional<double> momentum, bool affine, bool track)
    : BatchNorm("BatchNorm2d", {4}, n, eps, momentum, affine, track) {}

Tensor BatchNorm::forward(const Tensor& input) const {
  const char* op = type_name().c_str();
  // Under Autocast a half input (a conv's result) normalises in Float32 with Float32 parameters
  // and statistics (src/autocast.hpp); a module made half keeps the input's dtype.
  const bool half_module =
      (affine && weight.dtype().is_half()) || (track_running_stats && running_mean.dtype().is_half());
  const Tensor x = half_module ? input : loom::detail::autocast_float32(input);
  detail_nn::check_float(x, op);
  if (std::find(ranks_.begin(), ranks_.end(), x.ndim()) == ranks_.end() || x.shape()[1] != num_features)
    throw Error(fmt::format("{}: expected input of shape {} with C = {}, got {}", op,
                            ranks_.size() == 1 ? "[N, C, H, W]" : "[N, C] or [N, C, L]", num_features,
                            str(x.shape())));
  if (affine) detail_nn::check_same_dtype(op, x, "input", weight, "weight");
  if (track_running_stats) detail_nn::check_same_dtype(op, x, "input", running_mean, "running_mean");
  std::vector<int> axes{0};
  Shape per_channel{num_features};  // broadcast against x: [C, 1, ...]
  for (int a = 2; a < x.ndim(); ++a) {
    axes.push_back(a);
    per_channel.push_back(1);
  }
  const auto channel = [&](const Tensor& t) { return t.reshape(per_channel); };

  Tensor y;
  if (is_training() || !track_running_stats) {
    const Dim n = detail::count(x.shape()) / num_features;  // symbolic over a batch of B rows
    if (is_training() && n.value() <= 1)
      throw Error(fmt::format("{}: expected more than 1 value per channel when training, got input {}", op,
                              str(x.shape())));
    const Tensor mean = x.mean(axes, true);
    const Tensor centred = x - mean;
    const Tensor var = centred.square().mean(axes, true);  // biased, for normalising
    y = centred * (var + eps).rsqrt();
    if (is_training() && track_running_stats) {
      update_buffer(num_batches_tracked, num_batches_tracked + 1);
      // PyTorch's factor: momentum, or 1 / num_batches_tracked (already counting this batch)
      // for a cumulative average.
      const Tensor factor =
          momentum ? Tensor::scalar(*momentum, x.dtype()) : num_batches_tracked.cast(x.dtype()).reciprocal();
      const Tensor unbiased = var.reshape({num_features}) * detail::size_ratio(n, n - 1, var.dtype());
      update_buffer(running_mean, factor * mean.reshape({num_features}) + (1 - factor) * running_mean);
      update_buffer(running_var, factor * unbiased + (1 - factor) * running_var);
    }
  } else {
    y = (x - channel(running_mean)) * (channel(running_var) + eps).rsqrt();
  }
  return affine ? y * channel(weight) + channel(bias) : y;
}

}  // namespace loom::nn
