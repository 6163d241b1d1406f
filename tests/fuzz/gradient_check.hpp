#pragma once
// The fuzzer's gradient check (docs/fuzzing.md, "Gradients"). A gradient
// program is a graph file with the line `# @grad`; its output 0 is a float
// scalar loss. loom's gradient of the loss with respect to every Float64 buffer
// it reads (loom::gradient, compiled and run like any graph) is compared in
// float64 with central finite differences of the loss, which the reference
// interpreter evaluates at x + h and x - h: it has no autodiff, so nothing of
// src/gradient.cpp is checked against itself.
#include "fuzz/fuzz.hpp"
#include "ir/uop.hpp"

#include <loom/tensor.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::fuzz {

// The line that makes a graph file a gradient program.
inline constexpr std::string_view kGradientMarker = "# @grad";
bool is_gradient_program(const std::string& graph_text);
// Why `outputs` cannot be a gradient program's ("" if output 0 is a float scalar).
std::string loss_problem(const std::vector<Tensor>& outputs);

class GradientCheck {
 public:
  // Builds the lazy gradients of `loss` and keeps a copy of every buffer it
  // reads: call it before realize, which may write into them (assign). The
  // loss is a float scalar (loss_problem).
  explicit GradientCheck(const Tensor& loss);

  // To realize in the same schedule as the program's outputs, as backward() would.
  const std::vector<Tensor>& gradients() const { return grads_; }

  // After realize: each probe's directional derivative from loom's gradients
  // against finite differences; the first disagreement, if any.
  std::optional<Failure> check(Coverage* coverage) const;

 private:
  struct Term {
    size_t buffer;
    int64_t element;
    double weight;
  };
  struct Probe {
    std::string name;
    std::vector<Term> terms;
  };
  using Overrides = std::map<size_t, std::vector<double>>;  // buffer -> perturbed elements

  std::vector<Probe> probes() const;
  // Buffer `b`'s elements: `at`'s where it moves b, else as they were before realize.
  const void* data_at(const UOpPtr& b, const Overrides& at) const;
  double loss_at(const Overrides& overrides) const;
  // `at` with the probe's elements moved by `step` along it (`at` empty: x).
  Overrides moved(const Probe& p, double step, const Overrides& at) const;
  double finite_difference(const Probe& p, double step, const Overrides& at) const;
  // loom's gradient graphs evaluated by the reference interpreter at `at`.
  std::vector<std::vector<double>> reference_gradients(const Overrides& at) const;
  // Whether loom's gradient graph agrees with central differences at a point near x
  // (every element moved by up to kNearby); nullopt: not smooth there either.
  std::optional<bool> agrees_nearby(const Probe& p, double step) const;
  // The backward and forward difference quotients at x: (f(x) - f(x - h)) / h, (f(x + h) - f(x)) / h.
  std::pair<double, double> one_sided(const Probe& p, double step) const;
  double step_for(const Probe& p) const;
  static double along(const Probe& p, const std::vector<std::vector<double>>& grads);

  UOpPtr loss_;
  std::vector<UOpPtr> buffers_;                       // the Float64 buffers: what the gradient is by
  std::vector<std::vector<double>> values_;           // their elements before realize
  std::map<const UOp*, std::vector<uint8_t>> bytes_;  // every buffer the loss reads, before realize
  std::vector<Tensor> grads_;
  std::vector<UOpPtr> grad_graphs_;  // the gradients' graphs, for the reference's opinion
  double loss0_ = 0, scale_ = 0;     // the loss at x, the largest finite magnitude on its way
  bool met_non_finite_ = false;      // an inf or NaN on the loss's way (a pole the loss then drops)
};

}  // namespace loom::fuzz
