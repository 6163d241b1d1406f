// loom::optim: PyTorch's update rules written as lazy Tensor graphs and
// assigned, so the update fuses into the step's schedule.
#include "src/in_place.hpp"
#include "src/tensor_ops.hpp"

#include <loom/gradient.hpp>
#include <loom/optim.hpp>

#include <array>
#include <cmath>
#include <set>

namespace loom::optim {

using detail::str;

namespace {
Tensor scalar_buffer(double v) { return Tensor::from_vector<double>({v}, {}); }

// ParamGroup's options: the field, its name in ParamGroup, its state-dict key.
struct GroupOption {
  std::optional<double> ParamGroup::*field;
  const char* name;
  std::string_view key;
};
constexpr std::array<GroupOption, 5> kGroupOptions{
    {{&ParamGroup::momentum, "momentum", "momentum"},
     {&ParamGroup::weight_decay, "weight_decay", "weight_decay"},
     {&ParamGroup::beta1, "beta1", "betas.0"},
     {&ParamGroup::beta2, "beta2", "betas.1"},
     {&ParamGroup::eps, "eps", "eps"}}};

// A group's own value of the hyper-parameter with state-dict key `key`, if it sets one.
std::optional<double> group_option(const ParamGroup& g, std::string_view key) {
  for (const GroupOption& o : kGroupOptions)
    if (o.key == key) return g.*o.field;
  return std::nullopt;
}

std::vector<ParamGroup> one_group(std::vector<Tensor> params) {
  std::vector<ParamGroup> out(1);
  out[0].params = std::move(params);
  return out;
}
}  // namespace

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr,
                     std::vector<std::pair<std::string, double>> hyper, const char* name)
    : name_(name) {
  for (const auto& [key, v] : hyper) hyper_names_.push_back(key);
  if (groups.empty()) throw Error(fmt::format("{}: the parameter list is empty", name));
  for (size_t g = 0; g < groups.size(); ++g) {
    const ParamGroup& pg = groups[g];
    if (pg.params.empty())
      throw Error(groups.size() == 1 ? fmt::format("{}: the parameter list is empty", name)
                                     : fmt::format("{}: param group {} has no parameters", name, g));
    for (const GroupOption& o : kGroupOptions)
      if (pg.*o.field && std::find(hyper_names_.begin(), hyper_names_.end(), o.key) == hyper_names_.end())
        throw Error(fmt::format("{}: param group {} sets {}, which {} does not take", name, g, o.name, name));
    Group group;
    group.begin = params_.size();
    params_.insert(params_.end(), pg.params.begin(), pg.params.end());
    group.end = params_.size();
    group.lr_value = pg.lr.value_or(lr);
    group.lr = scalar_buffer(group.lr_value);
    for (const auto& [key, v] : hyper) group.hyper.push_back(group_option(pg, key).value_or(v));
    groups_.push_back(std::move(group));
  }
  for (size_t g = 0; g < groups_.size(); ++g)
    check_hyper(std::isfinite(groups_[g].lr_value) && groups_[g].lr_value >= 0, g, "learning rate",
                groups_[g].lr_value);
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

void Optimizer::check_hyper(bool ok, size_t group, const char* what, double v) const {
  if (ok) return;
  if (groups_.size() > 1)
    throw Error(fmt::format("{}: {} {} of param group {} is invalid", name_, what, v, group));
  throw Error(fmt::format("{}: {} {} is invalid", name_, what, v));
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

namespace {
void check_group(const char* name, size_t group, size_t count) {
  if (group >= count)
    throw Error(fmt::format("{}: param group {} does not exist (the optimizer has {})", name, group, count));
}
}  // namespace

double Optimizer::lr(size_t group) const {
  check_group(name_, group, groups_.size());
  return groups_[group].lr_value;
}

void Optimizer::set_lr(double lr) {
  for (size_t g = 0; g < groups_.size(); ++g) set_lr(g, lr);
}

void Optimizer::set_lr(size_t group, double lr) {
  check_group(name_, group, groups_.size());
  check_hyper(std::isfinite(lr) && lr >= 0, group, "learning rate", lr);
  // Written into the buffer the step reads, so the kernels compiled so far, a
  // cached plan and a Capture's replay all take the new value.
  Group& g = groups_[group];
  const UOpPtr& u = g.lr.node()->uop;
  *static_cast<double*>(detail::buffer_data(u->op == Op::BUFFER ? u : u->src[0])) = lr;
  g.lr_value = lr;
}

std::vector<Tensor> Optimizer::group_params(size_t group) const {
  check_group(name_, group, groups_.size());
  const Group& g = groups_[group];
  return {params_.begin() + static_cast<long>(g.begin), params_.begin() + static_cast<long>(g.end)};
}

std::optional<double> Optimizer::initial_lr(size_t group) const {
  check_group(name_, group, groups_.size());
  return groups_[group].initial_lr;
}

void Optimizer::set_initial_lr(size_t group, double lr) {
  check_group(name_, group, groups_.size());
  groups_[group].initial_lr = lr;
}

Tensor Optimizer::lr_as(size_t group, DType dtype) const { return groups_[group].lr.cast(dtype); }

Tensor Optimizer::zeros_like_param(size_t i) const {
  const Tensor& p = params_[i];
  return Tensor::zeros(p.shape(), p.dtype().is_half() ? DType::Float32 : p.dtype()).realize();
}

std::vector<Tensor> Optimizer::zeros_like_params() const {
  std::vector<Tensor> out;
  for (size_t i = 0; i < params_.size(); ++i) out.push_back(zeros_like_param(i));
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
std::string group_key(size_t g, std::string_view key) { return fmt::format("param_groups.{}.{}", g, key); }
Tensor f64_scalar(double v) { return Tensor::from_vector<double>({v}, {}); }
// The one value of a 0-d tensor from a state dict, as a double.
double scalar_of(const std::map<std::string, Tensor>& state, const std::string& key, const char* name) {
  const Tensor& t = state.at(key);
  if (t.numel() != 1)
    throw Error(
        fmt::format("{}.load_state_dict: '{}' has shape {}; expected one value", name, key, str(t.shape())));
  return t.cast(DType::Float64).item<double>();
}
bool is_initial_lr(const std::string& key) {
  return key.starts_with("param_groups.") && key.ends_with(".initial_lr");
}
}  // namespace

NamedTensors Optimizer::state_dict() const {
  NamedTensors out;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const Group& group = groups_[g];
    out.emplace_back(group_key(g, "lr"), f64_scalar(group.lr_value));
    for (size_t h = 0; h < hyper_names_.size(); ++h)
      out.emplace_back(group_key(g, hyper_names_[h]), f64_scalar(group.hyper[h]));
    if (group.initial_lr) out.emplace_back(group_key(g, "initial_lr"), f64_scalar(*group.initial_lr));
  }
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
  if (!state.contains("steps")) missing.push_back("steps");
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (!state.contains(group_key(g, "lr"))) missing.push_back(group_key(g, "lr"));
    for (const auto& key : hyper_names_)
      if (!state.contains(group_key(g, key))) missing.push_back(group_key(g, key));
  }
  if (!missing.empty()) throw fail(fmt::format("missing keys [{}]", fmt::join(missing, ", ")));
  const std::vector<Group> old = groups_;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t h = 0; h < hyper_names_.size(); ++h)
      groups_[g].hyper[h] = scalar_of(state, group_key(g, hyper_names_[h]), name_);
  const auto restore = [&] {
    for (size_t g = 0; g < groups_.size(); ++g) groups_[g].hyper = old[g].hyper;
  };
  try {
    hyper_parameters_loaded();
  } catch (...) {
    restore();
    throw;
  }
  const NamedTensors own = state_dict();
  std::set<std::string> expected;
  std::vector<std::string> unexpected, wrong;
  for (const auto& [key, t] : own) {
    if (is_initial_lr(key)) continue;  // optional: set by a scheduler
    expected.insert(key);
    const auto it = state.find(key);
    if (it == state.end() && key.ends_with(".master_param")) continue;  // optional: from the parameter
    if (it == state.end())
      missing.push_back(key);
    else if (it->second.shape() != t.shape())
      wrong.push_back(fmt::format("'{}' has shape {} in the state dict but {} here", key,
                                  str(it->second.shape()), str(t.shape())));
  }
  for (const auto& [key, t] : state) {
    const bool own_initial_lr = is_initial_lr(key) && [&] {
      for (size_t g = 0; g < groups_.size(); ++g)
        if (key == group_key(g, "initial_lr")) return true;
      return false;
    }();
    if (!expected.contains(key) && !own_initial_lr) unexpected.push_back(key);
  }
  if (!missing.empty() || !unexpected.empty() || !wrong.empty()) {
    restore();
    std::vector<std::string> parts;
    if (!missing.empty()) parts.push_back(fmt::format("missing keys [{}]", fmt::join(missing, ", ")));
    if (!unexpected.empty())
      parts.push_back(fmt::format("unexpected keys [{}]", fmt::join(unexpected, ", ")));
    for (auto& w : wrong) parts.push_back(std::move(w));
    throw fail(fmt::format("{}", fmt::join(parts, "; ")));
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    set_lr(g, scalar_of(state, group_key(g, "lr"), name_));
    if (const auto it = state.find(group_key(g, "initial_lr")); it != state.end())
      groups_[g].initial_lr = scalar_of(state, it->first, name_);
  }
  steps_ = state.at("steps").cast(DType::Int64).item<int64_t>();
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
    : SGD(one_group(std::move(params)), lr, momentum, weight_decay) {}

SGD::SGD(std::vector<ParamGroup> groups, double lr, double momentum, double weight_decay)
    : Optimizer(std::move(groups), lr, {{"momentum", momentum}, {"weight_decay", weight_decay}}, "SGD") {
  hyper_parameters_loaded();
}

NamedTensors SGD::state_tensors() const {
  NamedTensors out;
  for (const Group& group : groups_)
    for (size_t i = group.begin; i < group.end && group.hyper[kMomentum] != 0; ++i)
      out.emplace_back(fmt::format("state.{}.momentum_buffer", i), momentum_buffers_[i]);
  return out;
}

void SGD::hyper_parameters_loaded() {
  for (size_t g = 0; g < groups_.size(); ++g) {
    const double momentum = groups_[g].hyper[kMomentum], weight_decay = groups_[g].hyper[kWeightDecay];
    check_hyper(std::isfinite(momentum) && momentum >= 0, g, "momentum", momentum);
    check_hyper(std::isfinite(weight_decay) && weight_decay >= 0, g, "weight_decay", weight_decay);
  }
  // A buffer, once made, stays (a load that fails and restores the momentum finds it as it was);
  // only the groups with momentum list theirs.
  momentum_buffers_.resize(params_.size());
  for (const Group& group : groups_)
    for (size_t i = group.begin; i < group.end; ++i)
      if (group.hyper[kMomentum] != 0 && !momentum_buffers_[i].defined())
        momentum_buffers_[i] = zeros_like_param(i);
}

void SGD::step() {
  NoGrad no_grad;
  std::vector<Tensor> assigned;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const Group& group = groups_[gi];
    const double momentum = group.hyper[kMomentum], weight_decay = group.hyper[kWeightDecay];
    for (size_t i = group.begin; i < group.end; ++i) {
      const Tensor& p = params_[i];
      if (!p.grad().defined()) continue;
      const Tensor w = master_of(i);  // Float32 for a half parameter
      Tensor g = p.grad().cast(w.dtype());
      if (weight_decay != 0) g = g + w * weight_decay;
      if (momentum != 0) {
        Tensor& buf = momentum_buffers_[i];
        buf.assign(buf * momentum + g);
        assigned.push_back(buf);
        g = buf;
      }
      write_param(i, w - lr_as(gi, w.dtype()) * g, assigned);
    }
  }
  realize_step(std::move(assigned));
}

// ---- Adam, AdamW ------------------------------------------------------------------------------

Adam::Adam(std::vector<Tensor> params, double lr, double b1, double b2, double eps, double weight_decay)
    : Adam(one_group(std::move(params)), lr, b1, b2, eps, weight_decay, false, "Adam") {}

Adam::Adam(std::vector<ParamGroup> groups, double lr, double b1, double b2, double eps, double weight_decay)
    : Adam(std::move(groups), lr, b1, b2, eps, weight_decay, false, "Adam") {}

Adam::Adam(std::vector<ParamGroup> groups, double lr, double b1, double b2, double eps, double weight_decay,
           bool decoupled, const char* name)
    : Optimizer(std::move(groups), lr,
                {{"betas.0", b1}, {"betas.1", b2}, {"eps", eps}, {"weight_decay", weight_decay}}, name),
      decoupled_(decoupled),
      t_(scalar_buffer(0)) {
  hyper_parameters_loaded();
  m_ = zeros_like_params();
  v_ = zeros_like_params();
}

AdamW::AdamW(std::vector<Tensor> params, double lr, double b1, double b2, double eps, double weight_decay)
    : Adam(one_group(std::move(params)), lr, b1, b2, eps, weight_decay, true, "AdamW") {}

AdamW::AdamW(std::vector<ParamGroup> groups, double lr, double b1, double b2, double eps, double weight_decay)
    : Adam(std::move(groups), lr, b1, b2, eps, weight_decay, true, "AdamW") {}

NamedTensors Adam::state_tensors() const {
  NamedTensors out{{"state.step", t_}};
  for (size_t i = 0; i < m_.size(); ++i) {
    out.emplace_back(fmt::format("state.{}.exp_avg", i), m_[i]);
    out.emplace_back(fmt::format("state.{}.exp_avg_sq", i), v_[i]);
  }
  return out;
}

void Adam::hyper_parameters_loaded() {
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::vector<double>& h = groups_[g].hyper;
    check_hyper(h[kBeta1] >= 0 && h[kBeta1] < 1, g, "beta1", h[kBeta1]);
    check_hyper(h[kBeta2] >= 0 && h[kBeta2] < 1, g, "beta2", h[kBeta2]);
    check_hyper(std::isfinite(h[kEps]) && h[kEps] >= 0, g, "eps", h[kEps]);
    check_hyper(std::isfinite(h[kWeightDecay]) && h[kWeightDecay] >= 0, g, "weight_decay", h[kWeightDecay]);
  }
}

void Adam::step() {
  NoGrad no_grad;
  const Tensor t = t_ + 1;  // this step's count, in Float64 from its buffer
  std::vector<Tensor> assigned;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const Group& group = groups_[gi];
    const double b1 = group.hyper[kBeta1], b2 = group.hyper[kBeta2], eps = group.hyper[kEps],
                 weight_decay = group.hyper[kWeightDecay];
    // The group's scalars of this step, in Float64 from the step-count and lr buffers.
    const Tensor bc1 = 1.0 - Tensor::scalar(b1, DType::Float64).pow(t);
    const Tensor bc2 = 1.0 - Tensor::scalar(b2, DType::Float64).pow(t);
    const Tensor step_size = group.lr / bc1, bc2_sqrt = bc2.sqrt();
    for (size_t i = group.begin; i < group.end; ++i) {
      const Tensor& p = params_[i];
      if (!p.grad().defined()) continue;
      const Tensor w = master_of(i);  // Float32 for a half parameter
      const DType dt = w.dtype();
      Tensor g = p.grad().cast(dt);
      Tensor decayed = w;
      if (weight_decay != 0 && decoupled_) decayed = w * (1.0 - group.lr * weight_decay).cast(dt);
      if (weight_decay != 0 && !decoupled_) g = g + w * weight_decay;
      Tensor &m = m_[i], &v = v_[i];
      m.assign(m * b1 + g * (1 - b1));
      v.assign(v * b2 + g.square() * (1 - b2));
      const Tensor denom = v.sqrt() / bc2_sqrt.cast(dt) + eps;
      write_param(i, decayed - step_size.cast(dt) * m / denom, assigned);
      for (const Tensor* s : {&m, &v}) assigned.push_back(*s);
    }
  }
  t_.assign(t);
  assigned.push_back(t_);
  realize_step(std::move(assigned));
}

}  // namespace loom::optim
