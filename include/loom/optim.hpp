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
#include <loom/tensor.hpp>

#include <cstdint>
#include <vector>

namespace loom::optim {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Every parameter's gradient becomes undefined (PyTorch's set_to_none).
  void zero_grad();
  // One update of every parameter that has a gradient (others are skipped, as
  // in PyTorch); realizes the parameters, their gradients and the state.
  virtual void step() = 0;
  double lr() const { return lr_value_; }
  // Takes effect at the next step(); compiles nothing new.
  void set_lr(double lr);
  int64_t steps() const { return steps_; }
  const std::vector<Tensor>& params() const { return params_; }

 protected:
  Optimizer(std::vector<Tensor> params, double lr, const char* name);
  // Realizes the assigned tensors together with every parameter's gradient.
  void realize_step(std::vector<Tensor> assigned);
  // A zero-filled buffer shaped like each parameter.
  std::vector<Tensor> zeros_like_params() const;
  // The learning rate as a scalar tensor of `dtype`, read from its buffer.
  Tensor lr_as(DType dtype) const;

  std::vector<Tensor> params_;
  Tensor lr_;  // Float64 scalar buffer
  double lr_value_;
  int64_t steps_ = 0;
  const char* name_;
};

// p -= lr * g with g = grad + weight_decay * p, and with momentum
// buf = momentum * buf + g, g = buf (PyTorch's SGD, dampening 0, no Nesterov).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, double momentum = 0, double weight_decay = 0);
  void step() override;

 private:
  double momentum_, weight_decay_;
  std::vector<Tensor> momentum_buffers_;  // empty without momentum
};

// PyTorch's Adam (weight_decay adds weight_decay * p to the gradient) and,
// with decoupled = true, AdamW (p *= 1 - lr * weight_decay before the update):
//   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,  t += 1
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, double lr = 1e-3, double b1 = 0.9, double b2 = 0.999, double eps = 1e-8,
       double weight_decay = 0);
  void step() override;

 protected:
  Adam(std::vector<Tensor> params, double lr, double b1, double b2, double eps, double weight_decay,
       bool decoupled, const char* name);

 private:
  double b1_, b2_, eps_, weight_decay_;
  bool decoupled_;
  std::vector<Tensor> m_, v_;
  Tensor t_;  // the step count, a Float64 scalar buffer
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, double lr = 1e-3, double b1 = 0.9, double b2 = 0.999, double eps = 1e-8,
        double weight_decay = 1e-2);
};

}  // namespace loom::optim
