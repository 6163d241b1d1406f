#pragma once
// loom::GradScaler: dynamic loss scaling for float16 training, as torch.amp.GradScaler
// (docs/api.md, "GradScaler"). Float16's range ends at 65504 and its subnormals at 2^-24, so
// small gradients flush to 0; scaling the loss by S scales every gradient by S into range, and
// the scaler divides them back before the optimizer's step:
//
//   loom::GradScaler scaler;
//   for (...) {
//     opt.zero_grad();
//     { loom::Autocast ac(loom::DType::Float16); loss = ...; }
//     scaler.scale(loss).backward();
//     scaler.step(opt);   // unscales the gradients; skips the step if any is inf or NaN
//     scaler.update();    // halves the scale after a skipped step, doubles it after
//   }                     // growth_interval steps in a row without one
#include <loom/checkpoint.hpp>
#include <loom/optim.hpp>
#include <loom/tensor.hpp>

#include <cstdint>
#include <map>

namespace loom {

class GradScaler {
 public:
  // PyTorch's defaults. init_scale must be finite and positive, growth_factor above 1,
  // backoff_factor in (0, 1) and growth_interval positive (else a loom::Error). A disabled
  // scaler's scale() returns the loss, step() is the optimizer's step and update() does nothing.
  explicit GradScaler(double init_scale = 65536.0, double growth_factor = 2.0, double backoff_factor = 0.5,
                      int64_t growth_interval = 2000, bool enabled = true);

  // loss * scale (the scale a Float32 scalar read from a buffer, so a new scale compiles nothing).
  Tensor scale(const Tensor& loss) const;
  // Divides every gradient of the optimizer's parameters by the scale (multiplies by its Float32
  // reciprocal, as PyTorch) and records whether any was inf or NaN before the division. Once
  // per optimizer between update()s (a second call is a loom::Error).
  void unscale_(optim::Optimizer& optimizer);
  // unscale_ unless already called, then the optimizer's step unless a gradient was inf or NaN.
  // Returns whether the step ran. Once per optimizer between update()s.
  bool step(optim::Optimizer& optimizer);
  // After every step: scale *= backoff_factor if any optimizer stepped past an inf or NaN since
  // the last update (and the count of good steps restarts), else the count grows and, reaching
  // growth_interval, scale *= growth_factor (kept if that would overflow Float32) and restarts.
  // Without an unscale_ or step since the last update it is a loom::Error, as in PyTorch.
  void update();
  // Sets the scale to `new_scale` instead (the growth count is kept).
  void update(double new_scale);

  // The scale, as a Float32 value (PyTorch's get_scale); 1 when disabled.
  double get_scale() const;
  int64_t growth_tracker() const { return growth_tracker_; }
  bool is_enabled() const { return enabled_; }

  // "scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker", PyTorch's
  // keys, as 0-d tensors loom::save writes; load_state_dict checks every key is there.
  NamedTensors state_dict() const;
  void load_state_dict(const std::map<std::string, Tensor>& state);

 private:
  struct PerOptimizer {
    bool unscaled = false, stepped = false, found_inf = false;
  };
  void set_scale(double s);

  double scale_, growth_factor_, backoff_factor_;
  int64_t growth_interval_, growth_tracker_ = 0;
  bool enabled_;
  Tensor scale_buffer_, inverse_buffer_;  // Float32 0-d: the scale and its reciprocal
  std::map<const optim::Optimizer*, PerOptimizer> optimizers_;
};

}  // namespace loom
