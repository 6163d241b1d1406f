// loom::optim: PyTorch's update rules written as lazy Tensor graphs and
// assigned, so the update fuses into the step's schedule.
#include "src/tensor_ops.hpp"

#include <loom/gradient.hpp>
#include <loom/optim.hpp>

#include <cmath>

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
  for (const auto& p : params_) out.push_back(Tensor::zeros(p.shape(), p.dtype()).realize());
  return out;
}

void Optimizer::realize_step(std::vector<Tensor> assigned) {
  for (const auto& p : params_)
    if (p.grad().defined()) assigned.push_back(p.grad());  // read later: realized before the weights change
  loom::realize(std::move(assigned));
  ++steps_;
}

// ---- SGD --------------------------------------------------------------------------------------

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay)
    : Optimizer(std::move(params), lr, "SGD"), momentum_(momentum), weight_decay_(weight_decay) {
  check_hyper(std::isfinite(momentum) && momentum >= 0, name_, "momentum", momentum);
  check_hyper(std::isfinite(weight_decay) && weight_decay >= 0, name_, "weight_decay", weight_decay);
  if (momentum_ != 0) momentum_buffers_ = zeros_like_params();
}

void SGD::step() {
  NoGrad no_grad;
  std::vector<Tensor> assigned;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    Tensor g = p.grad();
    if (weight_decay_ != 0) g = g + p * weight_decay_;
    if (momentum_ != 0) {
      Tensor& buf = momentum_buffers_[i];
      buf.assign(buf * momentum_ + g);
      assigned.push_back(buf);
      g = buf;
    }
    p.assign(p - lr_as(p.dtype()) * g);
    assigned.push_back(p);
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

void Adam::step() {
  NoGrad no_grad;
  // The scalars of this step, in Float64 from the step-count and lr buffers.
  const Tensor t = t_ + 1;
  const Tensor bc1 = 1.0 - Tensor::scalar(b1_, DType::Float64).pow(t);
  const Tensor bc2 = 1.0 - Tensor::scalar(b2_, DType::Float64).pow(t);
  const Tensor step_size = lr_ / bc1, bc2_sqrt = bc2.sqrt();
  std::vector<Tensor> assigned;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    const DType dt = p.dtype();
    Tensor g = p.grad();
    Tensor decayed = p;
    if (weight_decay_ != 0 && decoupled_) decayed = p * (1.0 - lr_ * weight_decay_).cast(dt);
    if (weight_decay_ != 0 && !decoupled_) g = g + p * weight_decay_;
    Tensor &m = m_[i], &v = v_[i];
    m.assign(m * b1_ + g * (1 - b1_));
    v.assign(v * b2_ + g.square() * (1 - b2_));
    const Tensor denom = v.sqrt() / bc2_sqrt.cast(dt) + eps_;
    p.assign(decayed - step_size.cast(dt) * m / denom);
    for (const Tensor* s : {&p, &m, &v}) assigned.push_back(*s);
  }
  t_.assign(t);
  assigned.push_back(t_);
  realize_step(std::move(assigned));
}

}  // namespace loom::optim
