// loom::optim: PyTorch's update rules written as lazy Tensor graphs and
// assigned, so the update fuses into the step's schedule.
#include "src/in_place.hpp"
#include "src/tensor_ops.hpp"

#include <loom/gradient.hpp>
#include <loom/optim.hpp>

#include <cmath>
#include <set>

namespace loom::optim {

using detail::str;

namespace {
Tensor scalar_buffer(double v) { return Tensor::from_vector<double>({v}, {}); }

void check_hyper(bool ok, const char* name, const char* what, double v) {
  if (!ok) throw Error(fmt::format("{}: {} {} is invalid", name, what, v));
}
}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, double lr, const char* name)
    : params_(std::move(params)), lr_(scalar_buffer(lr)), lr_value_(lr), name_(name) {
  check_hyper(std::isfinite(lr) && lr >= 0, name, "learning rate", lr);
  if (params_.empty()) throw Error(fmt::format("{}: the parameter list is empty", name));
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.defined()) throw Error(fmt::format("{}: parameter {} is undefined", name, i));
    if (!p.requires_grad())
      throw Error(
          fmt::format("{}: parameter {} of shape {} does not require a gradient (call requires_grad_())",
                      name, i, str(p.shape())));
    for (size_t j = 0; j < i; ++j)
      if (params_[j].node() == p.node()) throw Error(fmt::format("{}: parameter {} appears twice", name, i));
  }
  for (const Tensor& p : params_)
    masters_.push_back(p.dtype().is_half() ? p.detach().cast(DType::Float32).realize() : Tensor());
}

Tensor Optimizer::master_of(size_t i) const {
  const Tensor &p = params_[i], &m = masters_[i];
  if (!m.defined()) return p;
  return m.cast(p.dtype()).eq(p).where(m, p.cast(DType::Float32));
}

void Optimizer::write_param(size_t i, const Tensor& updated, std::vector<Tensor>& assigned) {
  Tensor& p = params_[i];
  p.assign(updated.cast(p.dtype()));
  assigned.push_back(p);
  if (Tensor& m = masters_[i]; m.defined()) {
    m.assign(updated);
    assigned.push_back(m);
  }
}

NamedTensors Optimizer::state_and_masters() const {
  NamedTensors out = state_tensors();
  for (size_t i = 0; i < masters_.size(); ++i)
    if (masters_[i].defined()) out.emplace_back(fmt::format("state.{}.master_param", i), masters_[i]);
  return out;
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.zero_grad();
}

void Optimizer::set_lr(double lr) {
  check_hyper(std::isfinite(lr) && lr >= 0, name_, "learning rate", lr);
  // Written into the buffer the step reads, so the kernels compiled so far, a
  // cached plan and a Capture's replay all take the new value.
  const UOpPtr& u = lr_.node()->uop;
  *static_cast<double*>(detail::buffer_data(u->op == Op::BUFFER ? u : u->src[0])) = lr;
  lr_value_ = lr;
}

Tensor Optimizer::lr_as(DType dtype) const { return lr_.cast(dtype); }

std::vector<Tensor> Optimizer::zeros_like_params() const {
  std::vector<Tensor> out;
  for (const auto& p : params_)
    out.push_back(Tensor::zeros(p.shape(), p.dtype().is_half() ? DType::Float32 : p.dtype()).realize());
  return out;
}

void Optimizer::realize_step(std::vector<Tensor> assigned) {
  for (const auto& p : params_)
    if (p.grad().defined()) assigned.push_back(p.grad());  // read later: realized before the weights change
  loom::realize(std::move(assigned));
  ++steps_;
}

// ---- state dicts ------------------------------------------------------------------------------

namespace {
const std::string kGroup = "param_groups.0.";
Tensor f64_scalar(double v) { return Tensor::from_vector<double>({v}, {}); }
// The one value of a 0-d tensor from a state dict, as a double.
double scalar_of(const std::map<std::string, Tensor>& state, const std::string& key, const char* name) {
  const Tensor& t = state.at(key);
  if (t.numel() != 1)
    throw Error(
        fmt::format("{}.load_state_dict: '{}' has shape {}; expected one value", name, key, str(t.shape())));
  return t.cast(DType::Float64).item<double>();
}
}  // namespace

NamedTensors Optimizer::state_dict() const {
  NamedTensors out{{kGroup + "lr", f64_scalar(lr_value_)}};
  for (const auto& [key, v] : const_cast<Optimizer*>(this)->hyper_parameters())
    out.emplace_back(kGroup + key, f64_scalar(*v));
  if (initial_lr) out.emplace_back(kGroup + "initial_lr", f64_scalar(*initial_lr));
  out.emplace_back("steps", Tensor::from_vector<int64_t>({steps_}, {}));
  for (auto& named : state_and_masters()) out.push_back(std::move(named));
  return out;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
  const auto fail = [&](const std::string& what) {
    return Error(fmt::format("{}.load_state_dict: {}", name_, what));
  };
  // Hyper-parameters first: they decide which state tensors exist (SGD's momentum).
  std::vector<std::string> missing;
  for (const auto& key : {std::string("lr"), std::string("steps")})
    if (!state.contains(key == "lr" ? kGroup + key : key))
      missing.push_back(key == "lr" ? kGroup + key : key);
  for (const auto& [key, v] : hyper_parameters())
    if (!state.contains(kGroup + key)) missing.push_back(kGroup + key);
  if (!missing.empty()) throw fail(fmt::format("missing keys [{}]", fmt::join(missing, ", ")));
  const auto saved_hyper = hyper_parameters();
  std::vector<double> old;
  for (const auto& [key, v] : saved_hyper) old.push_back(*v);
  for (const auto& [key, v] : saved_hyper) *v = scalar_of(state, kGroup + key, name_);
  try {
    hyper_parameters_loaded();
  } catch (...) {
    for (size_t i = 0; i < old.size(); ++i) *saved_hyper[i].second = old[i];
    throw;
  }
  const NamedTensors own = state_dict();
  std::set<std::string> expected;
  std::vector<std::string> unexpected, wrong;
  for (const auto& [key, t] : own) {
    if (key == kGroup + "initial_lr") continue;  // optional: set by a scheduler
    expected.insert(key);
    const auto it = state.find(key);
    if (it == state.end() && key.ends_with(".master_param")) continue;  // optional: from the parameter
    if (it == state.end())
      missing.push_back(key);
    else if (it->second.shape() != t.shape())
      wrong.push_back(fmt::format("'{}' has shape {} in the state dict but {} here", key,
                                  str(it->second.shape()), str(t.shape())));
  }
  for (const auto& [key, t] : state)
    if (!expected.contains(key) && key != kGroup + "initial_lr") unexpected.push_back(key);
  if (!missing.empty() || !unexpected.empty() || !wrong.empty()) {
    for (size_t i = 0; i < old.size(); ++i) *saved_hyper[i].second = old[i];
    std::vector<std::string> parts;
    if (!missing.empty()) parts.push_back(fmt::format("missing keys [{}]", fmt::join(missing, ", ")));
    if (!unexpected.empty())
      parts.push_back(fmt::format("unexpected keys [{}]", fmt::join(unexpected, ", ")));
    for (auto& w : wrong) parts.push_back(std::move(w));
    throw fail(fmt::format("{}", fmt::join(parts, "; ")));
  }
  set_lr(scalar_of(state, kGroup + "lr", name_));
  steps_ = state.at("steps").cast(DType::Int64).item<int64_t>();
  if (const auto it = state.find(kGroup + "initial_lr"); it != state.end())
    initial_lr = scalar_of(state, it->first, name_);
  NoGrad no_grad;
  std::vector<Tensor> written;
  for (auto [key, t] : state_tensors()) {
    const Tensor& v = state.at(key);
    t.assign(v.dtype() == t.dtype() ? v : v.cast(t.dtype()));
    written.push_back(t);
  }
  // A master missing from the state (PyTorch's optimizers keep none) restarts from the parameter.
  for (size_t i = 0; i < masters_.size(); ++i) {
    if (!masters_[i].defined()) continue;
    const auto it = state.find(fmt::format("state.{}.master_param", i));
    masters_[i].assign(it != state.end() ? it->second.cast(DType::Float32) : params_[i].cast(DType::Float32));
    written.push_back(masters_[i]);
  }
  loom::realize(written);
}

// ---- clip_grad_norm_ ----------------------------------------------------------------------------

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  if (!(max_norm >= 0) || !std::isfinite(max_norm))
    throw Error(fmt::format("clip_grad_norm_: max_norm must be finite and non-negative, got {}", max_norm));
  NoGrad no_grad;
  std::vector<Tensor> grads, norms;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].defined()) throw Error(fmt::format("clip_grad_norm_: parameter {} is undefined", i));
    if (Tensor g = params[i].grad(); g.defined()) grads.push_back(g);
  }
  if (grads.empty()) return Tensor::scalar(0);
  const DType dt = grads[0].dtype();
  for (const Tensor& g : grads) norms.push_back(g.square().sum().sqrt().cast(dt));
  // PyTorch's order: the norm of the per-parameter norms.
  Tensor total = stack(norms).square().sum().sqrt();
  const Tensor coef = (max_norm / (total + 1e-6)).minimum(1.0);
  for (Tensor& g : grads) g.assign(g * coef.cast(g.dtype()));
  detail::defer_realize(total.node());
  return total;
}

// ---- SGD --------------------------------------------------------------------------------------

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay)
    : Optimizer(std::move(params), lr, "SGD"), momentum_(momentum), weight_decay_(weight_decay) {
  check_hyper(std::isfinite(momentum) && momentum >= 0, name_, "momentum", momentum);
  check_hyper(std::isfinite(weight_decay) && weight_decay >= 0, name_, "weight_decay", weight_decay);
  if (momentum_ != 0) momentum_buffers_ = zeros_like_params();
}

std::vector<std::pair<std::string, double*>> SGD::hyper_parameters() {
  return {{"momentum", &momentum_}, {"weight_decay", &weight_decay_}};
}
NamedTensors SGD::state_tensors() const {
  NamedTensors out;
  for (size_t i = 0; i < momentum_buffers_.size(); ++i)
    out.emplace_back(fmt::format("state.{}.momentum_buffer", i), momentum_buffers_[i]);
  return out;
}
void SGD::hyper_parameters_loaded() {
  check_hyper(std::isfinite(momentum_) && momentum_ >= 0, name_, "momentum", momentum_);
  check_hyper(std::isfinite(weight_decay_) && weight_decay_ >= 0, name_, "weight_decay", weight_decay_);
  if (momentum_ != 0 && momentum_buffers_.empty()) momentum_buffers_ = zeros_like_params();
  if (momentum_ == 0) momentum_buffers_.clear();
}

void SGD::step() {
  NoGrad no_grad;
  std::vector<Tensor> assigned;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    const Tensor w = master_of(i);  // Float32 for a half parameter
    Tensor g = p.grad().cast(w.dtype());
    if (weight_decay_ != 0) g = g + w * weight_decay_;
    if (momentum_ != 0) {
      Tensor& buf = momentum_buffers_[i];
      buf.assign(buf * momentum_ + g);
      assigned.push_back(buf);
      g = buf;
    }
    write_param(i, w - lr_as(w.dtype()) * g, assigned);
  }
  realize_step(std::move(assigned));
}

// ---- Adam, AdamW ------------------------------------------------------------------------------

Adam::Adam(std::vector<Tensor> params, double lr, double b1, double b2, double eps, double weight_decay)
    : Adam(std::move(params), lr, b1, b2, eps, weight_decay, false, "Adam") {}

Adam::Adam(std::vector<Tensor> params, double lr, double b1, double b2, double eps, double weight_decay,
           bool decoupled, const char* name)
    : Optimizer(std::move(params), lr, name),
      b1_(b1),
      b2_(b2),
      eps_(eps),
      weight_decay_(weight_decay),
      decoupled_(decoupled),
      t_(scalar_buffer(0)) {
  check_hyper(b1 >= 0 && b1 < 1, name, "beta1", b1);
  check_hyper(b2 >= 0 && b2 < 1, name, "beta2", b2);
  check_hyper(std::isfinite(eps) && eps >= 0, name, "eps", eps);
  check_hyper(std::isfinite(weight_decay) && weight_decay >= 0, name, "weight_decay", weight_decay);
  m_ = zeros_like_params();
  v_ = zeros_like_params();
}

AdamW::AdamW(std::vector<Tensor> params, double lr, double b1, double b2, double eps, double weight_decay)
    : Adam(std::move(params), lr, b1, b2, eps, weight_decay, true, "AdamW") {}

std::vector<std::pair<std::string, double*>> Adam::hyper_parameters() {
  return {{"betas.0", &b1_}, {"betas.1", &b2_}, {"eps", &eps_}, {"weight_decay", &weight_decay_}};
}
NamedTensors Adam::state_tensors() const {
  NamedTensors out{{"state.step", t_}};
  for (size_t i = 0; i < m_.size(); ++i) {
    out.emplace_back(fmt::format("state.{}.exp_avg", i), m_[i]);
    out.emplace_back(fmt::format("state.{}.exp_avg_sq", i), v_[i]);
  }
  return out;
}
void Adam::hyper_parameters_loaded() {
  check_hyper(b1_ >= 0 && b1_ < 1, name_, "beta1", b1_);
  check_hyper(b2_ >= 0 && b2_ < 1, name_, "beta2", b2_);
  check_hyper(std::isfinite(eps_) && eps_ >= 0, name_, "eps", eps_);
  check_hyper(std::isfinite(weight_decay_) && weight_decay_ >= 0, name_, "weight_decay", weight_decay_);
}

void Adam::step() {
  NoGrad no_grad;
  // The scalars of this step, in Float64 from the step-count and lr buffers.
  const Tensor t = t_ + 1;
  const Tensor bc1 = 1.0 - Tensor::scalar(b1_, DType::Float64).pow(t);
  const Tensor bc2 = 1.0 - Tensor::scalar(b2_, DType::Float64).pow(t);
  const Tensor step_size = lr_ / bc1, bc2_sqrt = bc2.sqrt();
  std::vector<Tensor> assigned;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    const Tensor w = master_of(i);  // Float32 for a half parameter
    const DType dt = w.dtype();
    Tensor g = p.grad().cast(dt);
    Tensor decayed = w;
    if (weight_decay_ != 0 && decoupled_) decayed = w * (1.0 - lr_ * weight_decay_).cast(dt);
    if (weight_decay_ != 0 && !decoupled_) g = g + w * weight_decay_;
    Tensor &m = m_[i], &v = v_[i];
    m.assign(m * b1_ + g * (1 - b1_));
    v.assign(v * b2_ + g.square() * (1 - b2_));
    const Tensor denom = v.sqrt() / bc2_sqrt.cast(dt) + eps_;
    write_param(i, decayed - step_size.cast(dt) * m / denom, assigned);
    for (const Tensor* s : {&m, &v}) assigned.push_back(*s);
  }
  t_.assign(t);
  assigned.push_back(t_);
  realize_step(std::move(assigned));
}

}  // namespace loom::optim
