#pragma once
// Learning-rate schedules (namespace loom::optim), PyTorch's
// torch.optim.lr_scheduler: the same formulas in the same (chainable) form, so
// the rates match PyTorch's to the last bit of a double, and so several
// schedulers on one optimizer compose as in PyTorch. docs/api.md, "LR
// schedules", is the reference.
//
// A scheduler writes the rate with Optimizer::set_lr: a value in a buffer the
// step reads, never a constant in a kernel, so a schedule compiles nothing new
// and a Capture replays with the current rate.
//   optim::SGD opt(model.parameters(), 0.1, 0.9);
//   optim::CosineAnnealingLR sched(opt, 100);
//   for (...) { ...; opt.step(); sched.step(); }
// A scheduler refers to its optimizer, which must outlive it.
#include <loom/optim.hpp>

#include <memory>
#include <string>
#include <vector>

namespace loom::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  // One epoch (or iteration) on: computes and sets the next rate.
  virtual void step();
  int64_t last_epoch() const { return last_epoch_; }
  // Group `group`'s rate set last and its base rate (each param group is scheduled from its own).
  double get_last_lr(size_t group = 0) const { return last_lrs_.at(group); }
  double base_lr(size_t group = 0) const { return base_lrs_.at(group); }
  Optimizer& optimizer() const { return *opt_; }
  // "last_epoch" (Int64), "base_lr" and "last_lr" (Float64: 0-d for one param group,
  // one value per group for several); containers add their schedulers' under "schedulers.i.". load_state_dict
  // restores them (the optimizer's rate comes from its own state dict).
  virtual NamedTensors state_dict() const;
  virtual void load_state_dict(const std::map<std::string, Tensor>& state);

 protected:
  // Sets each group's initial_lr if no scheduler has (PyTorch's setdefault).
  LRScheduler(Optimizer& opt, const char* name);
  // PyTorch's _initial_step: each concrete constructor ends with it (epoch 0).
  void initial_step();
  // A group's next rate from its current one and its base (PyTorch's get_lr, chainable form).
  virtual double get_lr(double lr, double base) const = 0;
  // A group's rate at last_epoch from its base alone, where PyTorch has one
  // (_get_closed_form_lr); SequentialLR uses it when it switches schedulers.
  virtual std::optional<double> closed_form_lr(double /*base*/) const { return std::nullopt; }
  // PyTorch's deprecated step(epoch): jumps to `epoch`.
  void step_to(int64_t epoch);
  void set(const std::vector<double>& lrs);

  Optimizer* opt_;
  const char* name_;
  int64_t last_epoch_ = -1;
  std::vector<double> base_lrs_, last_lrs_;  // per param group

  friend class SequentialLR;
  friend class ChainedScheduler;
};

// lr * gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);

 protected:
  double get_lr(double lr, double base) const override;
  std::optional<double> closed_form_lr(double base) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// Warm-up: the factor on base_lr goes linearly from start_factor to
// end_factor over total_iters epochs, then stays.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& opt, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);

 protected:
  double get_lr(double lr, double base) const override;
  std::optional<double> closed_form_lr(double base) const override;

 private:
  double start_, end_;
  int64_t total_;
};

// eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2, continued
// past T_max as PyTorch's recursive form does (back up again).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min = 0);

 protected:
  double get_lr(double lr, double base) const override;
  std::optional<double> closed_form_lr(double base) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// The 1cycle policy over total_steps steps: from max_lr / div_factor up to
// max_lr over pct_start of them, then down to initial / final_div_factor
// ("cos" or "linear" annealing; three_phase as PyTorch's). The momentum is not
// cycled (docs/semantics.md). Stepping past total_steps is an error.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& opt, double max_lr, int64_t total_steps, double pct_start = 0.3,
             std::string anneal_strategy = "cos", double div_factor = 25, double final_div_factor = 1e4,
             bool three_phase = false);

 protected:
  double get_lr(double lr, double base) const override;

 private:
  struct Phase {
    double end_step, start_lr, end_lr;
  };
  std::vector<Phase> phases_;
  int64_t total_steps_;
  bool cos_;
};

// schedulers[i] from milestones[i - 1] on (milestones sorted, one fewer than
// schedulers, all on the same optimizer), each restarted at its milestone.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& opt, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  void step() override;
  NamedTensors state_dict() const override;
  void load_state_dict(const std::map<std::string, Tensor>& state) override;

 protected:
  double get_lr(double lr, double) const override { return lr; }

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

// Steps every scheduler (all on one optimizer) at each step: their factors multiply.
class ChainedScheduler : public LRScheduler {
 public:
  explicit ChainedScheduler(std::vector<std::shared_ptr<LRScheduler>> schedulers);
  void step() override;
  NamedTensors state_dict() const override;
  void load_state_dict(const std::map<std::string, Tensor>& state) override;

 protected:
  double get_lr(double lr, double) const override { return lr; }

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
};

}  // namespace loom::optim
