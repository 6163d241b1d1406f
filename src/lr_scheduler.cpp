// PyTorch's LR schedulers (torch/optim/lr_scheduler.py, version 1.13), line by
// line: the chainable get_lr forms, the closed forms SequentialLR switches
// with, and OneCycleLR's phases. tests/data/lr_table.json holds PyTorch's rates.
#include <loom/lr_scheduler.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace loom::optim {

namespace {
constexpr double pi = std::numbers::pi;

// Python's a % b for b > 0: never negative.
int64_t py_mod(int64_t a, int64_t b) { return ((a % b) + b) % b; }

Tensor i64(int64_t v) { return Tensor::from_vector<int64_t>({v}, {}); }
Tensor f64(double v) { return Tensor::from_vector<double>({v}, {}); }

const Tensor& entry(const std::map<std::string, Tensor>& state, const std::string& key, const char* name,
                    int64_t values = 1) {
  const auto it = state.find(key);
  if (it == state.end()) throw Error(fmt::format("{}.load_state_dict: missing key '{}'", name, key));
  if (it->second.numel() != values)
    throw Error(fmt::format("{}.load_state_dict: '{}' must hold {} value{} (one per param group), got {}",
                            name, key, values, values == 1 ? "" : "s", it->second.numel()));
  return it->second;
}

// One rate per param group: 0-d for one group (the format before groups), else a vector.
Tensor f64s(const std::vector<double>& v) {
  return v.size() == 1 ? f64(v[0]) : Tensor::from_vector<double>(v, {static_cast<int64_t>(v.size())});
}

std::map<std::string, Tensor> with_prefix_removed(const std::map<std::string, Tensor>& state,
                                                  const std::string& prefix) {
  std::map<std::string, Tensor> out;
  for (const auto& [k, v] : state)
    if (k.starts_with(prefix)) out.emplace(k.substr(prefix.size()), v);
  return out;
}
}  // namespace

// ---- the base ---------------------------------------------------------------------------------

LRScheduler::LRScheduler(Optimizer& opt, const char* name) : opt_(&opt), name_(name) {
  for (size_t g = 0; g < opt.group_count(); ++g) {
    if (!opt.initial_lr(g)) opt.set_initial_lr(g, opt.lr(g));
    base_lrs_.push_back(*opt.initial_lr(g));
    last_lrs_.push_back(opt.lr(g));
  }
}

void LRScheduler::set(const std::vector<double>& lrs) {
  for (size_t g = 0; g < lrs.size(); ++g) opt_->set_lr(g, lrs[g]);
  last_lrs_ = lrs;
}

void LRScheduler::initial_step() { step(); }

void LRScheduler::step() {
  ++last_epoch_;
  std::vector<double> next;
  for (size_t g = 0; g < base_lrs_.size(); ++g) next.push_back(get_lr(opt_->lr(g), base_lrs_[g]));
  set(next);
}

void LRScheduler::step_to(int64_t epoch) {
  last_epoch_ = epoch;
  std::vector<double> next;
  for (size_t g = 0; g < base_lrs_.size(); ++g)
    next.push_back(closed_form_lr(base_lrs_[g]).value_or(get_lr(opt_->lr(g), base_lrs_[g])));
  set(next);
}

NamedTensors LRScheduler::state_dict() const {
  return {{"last_epoch", i64(last_epoch_)}, {"base_lr", f64s(base_lrs_)}, {"last_lr", f64s(last_lrs_)}};
}

void LRScheduler::load_state_dict(const std::map<std::string, Tensor>& state) {
  const int64_t groups = static_cast<int64_t>(base_lrs_.size());
  const int64_t epoch = entry(state, "last_epoch", name_).cast(DType::Int64).item<int64_t>();
  const std::vector<double> base =
      entry(state, "base_lr", name_, groups).cast(DType::Float64).to_vector<double>();
  const std::vector<double> last =
      entry(state, "last_lr", name_, groups).cast(DType::Float64).to_vector<double>();
  last_epoch_ = epoch;
  base_lrs_ = base;
  last_lrs_ = last;
}

// ---- StepLR -----------------------------------------------------------------------------------

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma)
    : LRScheduler(opt, "StepLR"), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0) throw Error(fmt::format("StepLR: step_size must be positive, got {}", step_size));
  initial_step();
}
double StepLR::get_lr(double lr, double) const {
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lr;
  return lr * gamma_;
}
std::optional<double> StepLR::closed_form_lr(double base) const {
  return base * std::pow(gamma_, static_cast<double>(last_epoch_ / step_size_));
}

// ---- LinearLR ---------------------------------------------------------------------------------

LinearLR::LinearLR(Optimizer& opt, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(opt, "LinearLR"), start_(start_factor), end_(end_factor), total_(total_iters) {
  if (!(start_factor > 0 && start_factor <= 1))
    throw Error(fmt::format("LinearLR: start_factor must lie in (0, 1], got {}", start_factor));
  if (!(end_factor >= 0 && end_factor <= 1))
    throw Error(fmt::format("LinearLR: end_factor must lie in [0, 1], got {}", end_factor));
  if (total_iters <= 0)
    throw Error(fmt::format("LinearLR: total_iters must be positive, got {}", total_iters));
  initial_step();
}
double LinearLR::get_lr(double lr, double) const {
  if (last_epoch_ == 0) return lr * start_;
  if (last_epoch_ > total_) return lr;
  return lr * (1.0 + (end_ - start_) / (static_cast<double>(total_) * start_ +
                                        static_cast<double>(last_epoch_ - 1) * (end_ - start_)));
}
std::optional<double> LinearLR::closed_form_lr(double base) const {
  return base * (start_ + (end_ - start_) * static_cast<double>(std::min(total_, last_epoch_)) /
                              static_cast<double>(total_));
}

// ---- CosineAnnealingLR ------------------------------------------------------------------------

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min)
    : LRScheduler(opt, "CosineAnnealingLR"), t_max_(T_max), eta_min_(eta_min) {
  if (T_max <= 0) throw Error(fmt::format("CosineAnnealingLR: T_max must be positive, got {}", T_max));
  initial_step();
}
double CosineAnnealingLR::get_lr(double lr, double base) const {
  const double t = static_cast<double>(t_max_), e = static_cast<double>(last_epoch_);
  if (last_epoch_ == 0) return lr;
  if (py_mod(last_epoch_ - 1 - t_max_, 2 * t_max_) == 0)
    return lr + (base - eta_min_) * (1 - std::cos(pi / t)) / 2;
  return (1 + std::cos(pi * e / t)) / (1 + std::cos(pi * (e - 1) / t)) * (lr - eta_min_) + eta_min_;
}
std::optional<double> CosineAnnealingLR::closed_form_lr(double base) const {
  return eta_min_ + (base - eta_min_) *
                        (1 + std::cos(pi * static_cast<double>(last_epoch_) / static_cast<double>(t_max_))) /
                        2;
}

// ---- OneCycleLR -------------------------------------------------------------------------------

namespace {
Optimizer& with_initial_lr(Optimizer& opt, double initial) {
  for (size_t g = 0; g < opt.group_count(); ++g)
    opt.set_initial_lr(g, initial);  // PyTorch's OneCycleLR sets it unconditionally
  return opt;
}
}  // namespace

OneCycleLR::OneCycleLR(Optimizer& opt, double max_lr, int64_t total_steps, double pct_start,
                       std::string anneal_strategy, double div_factor, double final_div_factor,
                       bool three_phase)
    : LRScheduler(with_initial_lr(opt, max_lr / div_factor), "OneCycleLR"), total_steps_(total_steps) {
  if (total_steps <= 0)
    throw Error(fmt::format("OneCycleLR: total_steps must be positive, got {}", total_steps));
  if (!(pct_start >= 0 && pct_start <= 1))
    throw Error(fmt::format("OneCycleLR: pct_start must lie in [0, 1], got {}", pct_start));
  if (anneal_strategy != "cos" && anneal_strategy != "linear")
    throw Error(fmt::format("OneCycleLR: anneal_strategy must be \"cos\" or \"linear\", got \"{}\"",
                            anneal_strategy));
  cos_ = anneal_strategy == "cos";
  const double initial = max_lr / div_factor, min_lr = initial / final_div_factor;
  const double total = static_cast<double>(total_steps);
  if (three_phase)
    phases_ = {{pct_start * total - 1, initial, max_lr},
               {2 * pct_start * total - 2, max_lr, initial},
               {total - 1, initial, min_lr}};
  else
    phases_ = {{pct_start * total - 1, initial, max_lr}, {total - 1, max_lr, min_lr}};
  initial_step();
}

double OneCycleLR::get_lr(double lr, double) const {
  if (last_epoch_ > total_steps_)
    throw Error(fmt::format("OneCycleLR: tried to step {} times; the schedule has total_steps {}",
                            last_epoch_, total_steps_));
  const double step = static_cast<double>(last_epoch_);
  double start_step = 0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    const Phase& p = phases_[i];
    if (step <= p.end_step || i + 1 == phases_.size()) {
      const double pct = (step - start_step) / (p.end_step - start_step);
      if (cos_) return p.end_lr + (p.start_lr - p.end_lr) / 2.0 * (std::cos(pi * pct) + 1);
      return (p.end_lr - p.start_lr) * pct + p.start_lr;
    }
    start_step = p.end_step;
  }
  return lr;
}

// ---- SequentialLR and ChainedScheduler --------------------------------------------------------

namespace {
Optimizer& optimizer_of(const std::vector<std::shared_ptr<LRScheduler>>& schedulers, const char* name) {
  if (schedulers.empty()) throw Error(fmt::format("{}: expected at least one scheduler", name));
  for (size_t i = 0; i < schedulers.size(); ++i) {
    if (!schedulers[i]) throw Error(fmt::format("{}: scheduler {} is null", name, i));
    if (&schedulers[i]->optimizer() != &schedulers[0]->optimizer())
      throw Error(fmt::format("{}: scheduler {} belongs to another optimizer than scheduler 0", name, i));
  }
  return schedulers[0]->optimizer();
}

NamedTensors with_children(NamedTensors own, const std::vector<std::shared_ptr<LRScheduler>>& schedulers) {
  for (size_t i = 0; i < schedulers.size(); ++i)
    for (auto& [k, v] : schedulers[i]->state_dict())
      own.emplace_back(fmt::format("schedulers.{}.{}", i, k), v);
  return own;
}
}  // namespace

SequentialLR::SequentialLR(Optimizer& opt, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(opt, "SequentialLR"),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  if (&optimizer_of(schedulers_, name_) != &opt)
    throw Error("SequentialLR: the schedulers belong to another optimizer");
  if (milestones_.size() + 1 != schedulers_.size())
    throw Error(fmt::format("SequentialLR: expected {} milestones for {} schedulers, got {}",
                            schedulers_.size() - 1, schedulers_.size(), milestones_.size()));
  if (!std::is_sorted(milestones_.begin(), milestones_.end()))
    throw Error(fmt::format("SequentialLR: milestones [{}] must be sorted", fmt::join(milestones_, ", ")));
  // As PyTorch: back to the initial rate, undo the schedulers' initial steps, start the first.
  std::vector<double> initial;
  for (size_t g = 0; g < opt.group_count(); ++g) initial.push_back(*opt.initial_lr(g));
  set(initial);
  for (auto& s : schedulers_) --s->last_epoch_;
  schedulers_[0]->initial_step();
  last_epoch_ = 0;
  last_lrs_ = schedulers_[0]->last_lrs_;
}

void SequentialLR::step() {
  ++last_epoch_;
  const size_t idx = static_cast<size_t>(
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin());
  LRScheduler& s = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_)
    s.step_to(0);
  else
    s.step();
  last_lrs_ = s.last_lrs_;
}

NamedTensors SequentialLR::state_dict() const {
  return with_children(LRScheduler::state_dict(), schedulers_);
}
void SequentialLR::load_state_dict(const std::map<std::string, Tensor>& state) {
  LRScheduler::load_state_dict(state);
  for (size_t i = 0; i < schedulers_.size(); ++i)
    schedulers_[i]->load_state_dict(with_prefix_removed(state, fmt::format("schedulers.{}.", i)));
}

ChainedScheduler::ChainedScheduler(std::vector<std::shared_ptr<LRScheduler>> schedulers)
    : LRScheduler(optimizer_of(schedulers, "ChainedScheduler"), "ChainedScheduler"),
      schedulers_(std::move(schedulers)) {
  last_lrs_ = schedulers_.back()->last_lrs_;
}

void ChainedScheduler::step() {
  for (auto& s : schedulers_) s->step();
  ++last_epoch_;
  last_lrs_ = schedulers_.back()->last_lrs_;
}

NamedTensors ChainedScheduler::state_dict() const {
  return with_children(LRScheduler::state_dict(), schedulers_);
}
void ChainedScheduler::load_state_dict(const std::map<std::string, Tensor>& state) {
  LRScheduler::load_state_dict(state);
  for (size_t i = 0; i < schedulers_.size(); ++i)
    schedulers_[i]->load_state_dict(with_prefix_removed(state, fmt::format("schedulers.{}.", i)));
}

}  // namespace loom::optim
