#pragma once
// Optimizers (namespace loom::optim) with PyTorch's update rules. docs/api.md,
// "optim", is the reference.
//
// step() writes every parameter and every piece of optimizer state through
// `assign` and realizes them together, so a whole training step (forward,
// backward, update) is one schedule, and each parameter is updated in its own
// buffer. Hyper-parameters that change from step to step (the learning rate,
// the step count) live in small buffers, never in the kernels' constants, so
// the kernels compiled at the first steps serve every later one.
//   optim::SGD opt(model.parameters(), 0.1);
//   for (...) { opt.zero_grad(); loss(...).backward(); opt.step(); }
#include <loom/checkpoint.hpp>
#include <loom/tensor.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loom::optim {

// PyTorch's param_groups: parameters with hyper-parameters of their own. An option a group
// leaves unset is the optimizer's (its constructor's argument); one an optimizer does not
// take (beta1 for SGD) is an error.
//   optim::AdamW opt({{.params = matrices, .weight_decay = 0.1}, {.params = others, .weight_decay = 0.0}},
//   3e-4);
struct ParamGroup {
  std::vector<Tensor> params;
  std::optional<double> lr, momentum, weight_decay, beta1, beta2, eps;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Every parameter's gradient becomes undefined (PyTorch's set_to_none).
  void zero_grad();
  // One update of every parameter that has a gradient (others are skipped, as
  // in PyTorch); realizes the parameters, their gradients and the state.
  virtual void step() = 0;
  // Group `group`'s learning rate (PyTorch's param_groups[group]["lr"]).
  double lr(size_t group = 0) const;
  // Takes effect at the next step(); compiles nothing new. Without a group, every group's.
  void set_lr(double lr);
  void set_lr(size_t group, double lr);
  int64_t steps() const { return steps_; }
  // Every group's parameters, in order (the state dict's "state.i" counts them so).
  const std::vector<Tensor>& params() const { return params_; }
  size_t group_count() const { return groups_.size(); }
  std::vector<Tensor> group_params(size_t group) const;
  // Everything a resumed run needs to continue bit for bit, as flat named
  // tensors loom::save writes (PyTorch's state_dict flattened): per group g
  // "param_groups.g.lr" and the other hyper-parameters (Float64, 0-d), "steps"
  // (Int64), and per parameter i its state ("state.i.momentum_buffer",
  // "state.i.exp_avg", ...; the state tensors themselves, not copies).
  NamedTensors state_dict() const;
  // Restores it into this optimizer (built over parameter groups of the same shapes,
  // in the same order): hyper-parameters, learning rates (into their buffers, so a
  // Capture's recording stays valid), step count and state (assigned, realized
  // together). Missing or unexpected keys and wrong shapes are a loom::Error naming them.
  void load_state_dict(const std::map<std::string, Tensor>& state);
  // PyTorch's param_groups[group]["initial_lr"]: set by the first LR scheduler
  // attached (the base rate every scheduler of this optimizer starts from).
  std::optional<double> initial_lr(size_t group = 0) const;
  void set_initial_lr(size_t group, double lr);

 protected:
  // A group's parameters are params_[begin, end); its hyper-parameters follow the
  // order of the names the optimizer gave the constructor.
  struct Group {
    size_t begin = 0, end = 0;
    Tensor lr;  // Float64 scalar buffer
    double lr_value = 0;
    std::optional<double> initial_lr;
    std::vector<double> hyper;
  };
  // `hyper`: the optimizer's hyper-parameters by their state-dict names ("momentum",
  // "weight_decay", "betas.0", "betas.1", "eps") with the values a group does not set.
  Optimizer(std::vector<ParamGroup> groups, double lr, std::vector<std::pair<std::string, double>> hyper,
            const char* name);
  // Realizes the assigned tensors together with every parameter's gradient.
  void realize_step(std::vector<Tensor> assigned);
  // A zero-filled buffer shaped like each parameter, in its master's dtype (Float32 for halves).
  std::vector<Tensor> zeros_like_params() const;
  Tensor zeros_like_param(size_t i) const;
  // What parameter i's update starts from: the parameter, or for a BFloat16 or Float16
  // parameter its Float32 master copy, unless the parameter no longer is the master rounded
  // (something assigned it since the last step: load_state_dict, a fill), when the update
  // restarts from the parameter's value.
  Tensor master_of(size_t i) const;
  // Assigns `updated` (in the master's dtype) to parameter i, rounded once, and to its master.
  void write_param(size_t i, const Tensor& updated, std::vector<Tensor>& assigned);
  // state_tensors() and the masters ("state.i.master_param").
  NamedTensors state_and_masters() const;
  // Group g's learning rate as a scalar tensor of `dtype`, read from its buffer.
  Tensor lr_as(size_t group, DType dtype) const;
  // The state tensors by their state-dict names.
  virtual NamedTensors state_tensors() const = 0;
  // Checks every group's hyper-parameters (just set or loaded) and makes the state tensors
  // they need; subclasses call it from their constructors too.
  virtual void hyper_parameters_loaded() = 0;
  // Error naming the optimizer, the group and the value unless `ok`.
  void check_hyper(bool ok, size_t group, const char* what, double v) const;
  std::vector<Tensor> params_;
  // Float32 copies of the BFloat16 and Float16 parameters (undefined for the others): an update
  // smaller than half a bf16 ulp of the weight accumulates there instead of rounding away.
  std::vector<Tensor> masters_;
  std::vector<Group> groups_;
  std::vector<std::string> hyper_names_;
  int64_t steps_ = 0;
  const char* name_;
};

// p -= lr * g with g = grad + weight_decay * p, and with momentum
// buf = momentum * buf + g, g = buf (PyTorch's SGD, dampening 0, no Nesterov).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, double momentum = 0, double weight_decay = 0);
  SGD(std::vector<ParamGroup> groups, double lr, double momentum = 0, double weight_decay = 0);
  void step() override;

 protected:
  NamedTensors state_tensors() const override;
  void hyper_parameters_loaded() override;

 private:
  enum { kMomentum, kWeightDecay };
  std::vector<Tensor> momentum_buffers_;  // per parameter; undefined in a group without momentum
};

// PyTorch's Adam (weight_decay adds weight_decay * p to the gradient) and,
// with decoupled = true, AdamW (p *= 1 - lr * weight_decay before the update):
//   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,  t += 1
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, double lr = 1e-3, double b1 = 0.9, double b2 = 0.999, double eps = 1e-8,
       double weight_decay = 0);
  Adam(std::vector<ParamGroup> groups, double lr = 1e-3, double b1 = 0.9, double b2 = 0.999,
       double eps = 1e-8, double weight_decay = 0);
  void step() override;

 protected:
  Adam(std::vector<ParamGroup> groups, double lr, double b1, double b2, double eps, double weight_decay,
       bool decoupled, const char* name);
  NamedTensors state_tensors() const override;
  void hyper_parameters_loaded() override;

 private:
  enum { kBeta1, kBeta2, kEps, kWeightDecay };
  bool decoupled_;
  std::vector<Tensor> m_, v_;
  Tensor t_;  // the step count, a Float64 scalar buffer
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, double lr = 1e-3, double b1 = 0.9, double b2 = 0.999, double eps = 1e-8,
        double weight_decay = 1e-2);
  AdamW(std::vector<ParamGroup> groups, double lr = 1e-3, double b1 = 0.9, double b2 = 0.999,
        double eps = 1e-8, double weight_decay = 1e-2);
};

// Scales every gradient of `params` by min(1, max_norm / (total + 1e-6)), where
// total is the 2-norm of all the gradients together (the norm of the
// per-parameter norms), as torch.nn.utils.clip_grad_norm_; returns total, a
// 0-d tensor computed with the next realize on this thread (the optimizer's
// step), so reading it afterwards costs nothing. Parameters without a
// gradient are skipped; with none, total is 0.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

}  // namespace loom::optim
