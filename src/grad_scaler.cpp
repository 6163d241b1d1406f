// loom::GradScaler: PyTorch's dynamic loss scaling. The scale lives on the host (what
// update() decides from) and in two Float32 buffers the lazy graphs read (the scale and its
// reciprocal), so a new scale changes no kernel. Whether a gradient was inf or NaN is read back
// once per unscale_, as PyTorch's step does (it syncs on found_inf).
#include "src/tensor_ops.hpp"

#include <loom/grad_scaler.hpp>
#include <loom/gradient.hpp>

#include <cmath>
#include <limits>

namespace loom {

namespace {

Tensor f32_buffer(double v) { return Tensor::from_vector<float>({static_cast<float>(v)}, {}).realize(); }

void write_f32(const Tensor& buffer, float v) {
  const UOpPtr& u = buffer.node()->uop;
  *static_cast<float*>(detail::buffer_data(u->op == Op::BUFFER ? u : u->src[0])) = v;
}

void check(bool ok, const char* what, double v) {
  if (!ok) throw Error(fmt::format("GradScaler: {} {} is invalid", what, v));
}

}  // namespace

GradScaler::GradScaler(double init_scale, double growth_factor, double backoff_factor,
                       int64_t growth_interval, bool enabled)
    : scale_(static_cast<float>(init_scale)),
      growth_factor_(growth_factor),
      backoff_factor_(backoff_factor),
      growth_interval_(growth_interval),
      enabled_(enabled) {
  check(std::isfinite(init_scale) && init_scale > 0, "init_scale (expected finite and positive)", init_scale);
  check(std::isfinite(growth_factor) && growth_factor > 1, "growth_factor (expected above 1)", growth_factor);
  check(backoff_factor > 0 && backoff_factor < 1, "backoff_factor (expected in (0, 1))", backoff_factor);
  check(growth_interval > 0, "growth_interval (expected positive)", static_cast<double>(growth_interval));
  scale_buffer_ = f32_buffer(scale_);
  inverse_buffer_ = f32_buffer(1.0 / scale_);
}

void GradScaler::set_scale(double s) {
  scale_ = static_cast<float>(s);
  write_f32(scale_buffer_, static_cast<float>(scale_));
  // PyTorch's inv_scale: the Float64 reciprocal of the Float32 scale, rounded to Float32.
  write_f32(inverse_buffer_, static_cast<float>(1.0 / scale_));
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!loss.defined()) throw Error("GradScaler.scale: the loss is undefined (default-constructed)");
  if (!loss.dtype().is_float())
    throw Error(
        fmt::format("GradScaler.scale: expected a float loss, got {}", scalar_name(loss.dtype().scalar)));
  if (!enabled_) return loss;
  return loss * scale_buffer_;  // Float32, or Float64 for a Float64 loss (promotion)
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!enabled_) return;
  PerOptimizer& state = optimizers_[&optimizer];
  if (state.unscaled)
    throw Error("GradScaler.unscale_: already called on this optimizer since the last update()");
  if (state.stepped) throw Error("GradScaler.unscale_: called after step() (call it before, or not at all)");
  NoGrad no_grad;
  std::vector<Tensor> assigned;
  Tensor non_finite = Tensor::scalar(0, DType::Int32);
  for (const Tensor& p : optimizer.params()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    // inf or NaN in the gradient as backward left it: x != x is NaN, |x| == inf is inf.
    const Tensor bad =
        g.ne(g).logical_or(g.abs().eq(Tensor::scalar(std::numeric_limits<double>::infinity(), g.dtype())));
    non_finite = non_finite + bad.cast(DType::Int32).sum();
    // In Float32 (Float64 gradients in Float64), rounded once to the gradient's dtype, as PyTorch's kernel.
    const DType compute = g.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
    g.assign((g.cast(compute) * inverse_buffer_.cast(compute)).cast(g.dtype()));
    assigned.push_back(g);
  }
  assigned.push_back(non_finite);
  loom::realize(assigned);
  state.found_inf = non_finite.item<int32_t>() > 0;
  state.unscaled = true;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  if (optimizers_[&optimizer].stepped)
    throw Error("GradScaler.step: already called on this optimizer since the last update()");
  if (!optimizers_[&optimizer].unscaled) unscale_(optimizer);
  PerOptimizer& state = optimizers_[&optimizer];
  state.stepped = true;
  if (state.found_inf) return false;
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (!enabled_) return;
  bool recorded = false, found_inf = false;
  for (const auto& [opt, state] : optimizers_) {
    recorded = recorded || state.unscaled;
    found_inf = found_inf || state.found_inf;
  }
  if (!recorded)
    throw Error("GradScaler.update: no inf checks were recorded (call step() or unscale_() first)");
  optimizers_.clear();
  if (found_inf) {
    set_scale(static_cast<float>(scale_) * static_cast<float>(backoff_factor_));
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ < growth_interval_) return;
  growth_tracker_ = 0;
  const float grown = static_cast<float>(scale_) * static_cast<float>(growth_factor_);
  if (std::isfinite(grown)) set_scale(grown);  // as PyTorch: an overflowing scale is not taken
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  check(std::isfinite(new_scale) && new_scale > 0, "new scale (expected finite and positive)", new_scale);
  optimizers_.clear();
  set_scale(new_scale);
}

double GradScaler::get_scale() const { return enabled_ ? scale_ : 1.0; }

NamedTensors GradScaler::state_dict() const {
  if (!enabled_) return {};
  auto f64 = [](double v) { return Tensor::from_vector<double>({v}, {}); };
  return {{"scale", f64(scale_)},
          {"growth_factor", f64(growth_factor_)},
          {"backoff_factor", f64(backoff_factor_)},
          {"growth_interval", Tensor::from_vector<int64_t>({growth_interval_}, {})},
          {"_growth_tracker", Tensor::from_vector<int64_t>({growth_tracker_}, {})}};
}

void GradScaler::load_state_dict(const std::map<std::string, Tensor>& state) {
  if (!enabled_) return;
  std::vector<std::string> missing;
  for (const char* key : {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"})
    if (!state.contains(key)) missing.push_back(key);
  if (!missing.empty())
    throw Error(fmt::format("GradScaler.load_state_dict: missing keys [{}]", fmt::join(missing, ", ")));
  auto value = [&](const char* key) { return state.at(key).cast(DType::Float64).item<double>(); };
  const double s = value("scale"), g = value("growth_factor"), b = value("backoff_factor");
  const double interval = value("growth_interval"), tracker = value("_growth_tracker");
  check(std::isfinite(s) && s > 0, "scale", s);
  check(std::isfinite(g) && g > 1, "growth_factor", g);
  check(b > 0 && b < 1, "backoff_factor", b);
  check(interval > 0, "growth_interval", interval);
  check(tracker >= 0 && tracker < interval, "_growth_tracker", tracker);
  growth_factor_ = g;
  backoff_factor_ = b;
  growth_interval_ = static_cast<int64_t>(interval);
  growth_tracker_ = static_cast<int64_t>(tracker);
  optimizers_.clear();
  set_scale(s);
}

}  // namespace loom
