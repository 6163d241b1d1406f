#include "fuzz/gradient_check.hpp"

#include "fuzz/compare.hpp"
#include "src/engine.hpp"
#include "src/tensor_node.hpp"
#include "support/reference_interpreter.hpp"

#include <loom/gradient.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

namespace loom::fuzz {

namespace {

// Probes per program: this many single elements (all of them when there are
// fewer) and, past that, one random direction over every element at once.
constexpr size_t kCoordinates = 12;
constexpr uint64_t kProbeSeed = 0x9e3779b97f4a7c15;  // fixed: a replay probes the same elements
// The step is kStep * max(1, |x|), rounded down to a power of two: small enough that the
// central difference's truncation error (h^2 f''' / 6) is far below the tolerance, large
// enough that the loss's float64 rounding divided by 2h stays under kAbsolute * scale. A
// power of two is a whole number of float32 ulps of x, so an input cast to Float32 moves
// by exactly the step, not by the step rounded to ulps (0.16 % less at 1e-6 near 0.45;
// regression: sort-of-tied-pairs-in-float32).
constexpr double kStep = 1e-6;
// A random direction's weights are multiples of 1/kWeightSteps in [-1, 1], so that each
// element's move is a whole number of float32 ulps too.
constexpr int kWeightSteps = 8;
// Agreement: |loom - fd| <= kRelative * (|fd| + |loom's terms|) + kAbsolute * (1 + scale), where
// scale is the largest finite magnitude the reference met computing the loss (rounding
// errors of the loss are relative to its intermediate values, not to the loss).
constexpr double kRelative = 1e-5;
constexpr double kAbsolute = 1e-6;
// A jump in the loss looks the same at both steps; a kink's difference grows with the step
// (four times at four times the step), a smooth loss's with its square.
constexpr double kSameJump = 0.01;
// How far from x (relative to max(1, |x|)) a kink is judged instead: far enough that a tie
// is broken by far more than the steps, near enough that no other tie is crossed (a chance).
constexpr double kNearby = 1e-3;

bool close(double a, double b, double tolerance) {
  return std::isfinite(a) && std::isfinite(b) && std::abs(a - b) <= tolerance;
}

std::vector<double> doubles_of(const void* data, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  if (n > 0) std::memcpy(v.data(), data, v.size() * sizeof(double));
  return v;
}

}  // namespace

bool is_gradient_program(const std::string& graph_text) {
  return graph_text.rfind(kGradientMarker, 0) == 0 ||
         graph_text.find("\n" + std::string(kGradientMarker)) != std::string::npos;
}

std::string loss_problem(const std::vector<Tensor>& outputs) {
  if (outputs.empty()) return "@grad: the file has no output to be the loss";
  const Tensor& loss = outputs[0];
  if (loss.dtype().is_float() && ref::numel(loss.shape()) == 1) return "";
  return fmt::format("@grad: output 0 is the loss, a float tensor of one element, not {} {}",
                     to_string(loss.dtype()), loss.shape());
}

GradientCheck::GradientCheck(const Tensor& loss) {
  loss_ = loss.node()->uop;
  std::vector<Tensor> wrt;
  for (const auto& n : toposort(loss_)) {
    if (n->op != Op::BUFFER) continue;
    const int64_t size = n->get<std::vector<int64_t>>().at(1);
    const auto* data = static_cast<const uint8_t*>(detail::buffer_data(n));
    bytes_[n.get()].assign(data, data + size * n->dtype.itemsize());
    if (n->dtype != DType::Float64) continue;
    buffers_.push_back(n);
    values_.push_back(doubles_of(data, size));
    wrt.push_back(detail::make_tensor(n));
  }
  grads_ = gradient(loss, wrt);
  for (const auto& g : grads_) grad_graphs_.push_back(g.node()->uop);
  const ref::RefTensor l = ref::evaluate(
      loss_, [&](const UOpPtr& b) -> const void* { return bytes_.at(b.get()).data(); }, {},
      [&](const UOpPtr&, const ref::RefTensor& v) {
        scale_ = std::max(scale_, magnitude(v));
        met_non_finite_ = met_non_finite_ ||
                          !std::all_of(v.f.begin(), v.f.end(), [](double x) { return std::isfinite(x); });
      });
  loss0_ = l.at(0);
}

const void* GradientCheck::data_at(const UOpPtr& b, const Overrides& at) const {
  for (const auto& [i, v] : at)
    if (buffers_[i] == b) return v.data();
  return bytes_.at(b.get()).data();
}

double GradientCheck::loss_at(const Overrides& overrides) const {
  return ref::evaluate(loss_, [&](const UOpPtr& b) { return data_at(b, overrides); }).at(0);
}

std::vector<GradientCheck::Probe> GradientCheck::probes() const {
  std::vector<std::pair<size_t, int64_t>> all;
  for (size_t b = 0; b < values_.size(); ++b)
    for (size_t e = 0; e < values_[b].size(); ++e) all.emplace_back(b, static_cast<int64_t>(e));
  std::mt19937_64 rng(kProbeSeed);
  std::vector<Probe> out;
  if (all.size() > kCoordinates) {
    Probe direction{fmt::format("a random direction over all {} elements of {} buffer{}", all.size(),
                                values_.size(), values_.size() == 1 ? "" : "s"),
                    {}};
    std::uniform_int_distribution<int> weight(-kWeightSteps, kWeightSteps);
    for (const auto& [b, e] : all)
      direction.terms.push_back({b, e, static_cast<double>(weight(rng)) / kWeightSteps});
    out.push_back(std::move(direction));
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(kCoordinates);
  }
  for (const auto& [b, e] : all)
    out.push_back({fmt::format("element {} of Float64 input {} (of {} elements; inputs in graph order)", e, b,
                               values_[b].size()),
                   {{b, e, 1.0}}});
  return out;
}

double GradientCheck::step_for(const Probe& p) const {
  double largest = 1;
  for (const Term& t : p.terms)
    largest = std::max(largest, std::abs(values_[t.buffer][static_cast<size_t>(t.element)]));
  return std::exp2(std::floor(std::log2(kStep * largest)));
}

GradientCheck::Overrides GradientCheck::moved(const Probe& p, double step, const Overrides& at) const {
  Overrides out = at;
  for (const Term& t : p.terms) {
    if (!out.count(t.buffer)) out[t.buffer] = values_[t.buffer];
    out[t.buffer][static_cast<size_t>(t.element)] += step * t.weight;
  }
  return out;
}

double GradientCheck::finite_difference(const Probe& p, double step, const Overrides& at) const {
  return (loss_at(moved(p, step, at)) - loss_at(moved(p, -step, at))) / (2 * step);
}

std::pair<double, double> GradientCheck::one_sided(const Probe& p, double step) const {
  return {(loss0_ - loss_at(moved(p, -step, {}))) / step, (loss_at(moved(p, step, {})) - loss0_) / step};
}

std::vector<std::vector<double>> GradientCheck::reference_gradients(const Overrides& at) const {
  std::vector<std::vector<double>> out;
  for (const auto& g : grad_graphs_)
    out.push_back(ref::evaluate(g, [&](const UOpPtr& b) { return data_at(b, at); }).f);
  return out;
}

std::optional<bool> GradientCheck::agrees_nearby(const Probe& p, double step) const {
  std::mt19937_64 rng(kProbeSeed + 1);
  std::uniform_real_distribution<double> jitter(-kNearby, kNearby);
  Overrides near;
  for (size_t b = 0; b < values_.size(); ++b) {
    near[b] = values_[b];
    for (double& v : near[b]) v += jitter(rng) * std::max(1.0, std::abs(v));
  }
  const double fd = finite_difference(p, step, near), fd4 = finite_difference(p, 4 * step, near);
  const double mine = along(p, reference_gradients(near));
  const double tolerance = kRelative * (std::abs(fd) + std::abs(mine)) + kAbsolute * (1 + scale_);
  if (!close(fd, fd4, tolerance)) return std::nullopt;  // a kink there too
  return close(mine, fd, tolerance);
}

double GradientCheck::along(const Probe& p, const std::vector<std::vector<double>>& grads) {
  double sum = 0;
  for (const Term& t : p.terms) sum += t.weight * grads[t.buffer][static_cast<size_t>(t.element)];
  return sum;
}

std::optional<Failure> GradientCheck::check(Coverage* coverage) const {
  auto count = [&](const char* outcome) {
    if (coverage) ++coverage->gradient_checks[outcome];
  };
  if (buffers_.empty()) return std::nullopt;
  if (!std::isfinite(loss0_)) {
    count("loss not finite");
    return std::nullopt;
  }
  if (coverage) ++coverage->gradients;
  std::vector<std::vector<double>> got;
  for (const auto& g : grads_) got.push_back(realized(g).f);
  for (const Probe& p : probes()) {
    const double mine = along(p, got), h = step_for(p), fd = finite_difference(p, h, {});
    double magnitude = 0;
    for (const Term& t : p.terms)
      magnitude += std::abs(t.weight * got[t.buffer][static_cast<size_t>(t.element)]);
    const double tolerance =
        kRelative * (std::abs(fd) + (std::isfinite(magnitude) ? magnitude : 0)) + kAbsolute * (1 + scale_);
    if (close(mine, fd, tolerance)) {
      count("agreed");
      continue;
    }
    // A finite loss whose way met an inf or NaN (x / 0, then a slice or a where that
    // drops it): the chain rule multiplies a zero gradient by an infinite local
    // derivative and gives NaN, as PyTorch's autograd does, where differences see a
    // loss that does not move. No derivative to compare with (regression: gradient-pole-dropped).
    if (!std::isfinite(mine) && met_non_finite_) {
      count("non-finite on the way");
      continue;
    }
    // A kink or a jump within the step (or a loss too ill-conditioned here): the
    // difference quotient depends on the step and is no derivative to compare with.
    const double fd4 = finite_difference(p, 4 * h, {});
    if (!close(fd, fd4, tolerance)) {
      count("unstable");
      continue;
    }
    // A kink at x itself (a max over tied values: a broadcast's copies of one element):
    // each one-sided derivative is steady and they differ. Any value between them is a
    // subgradient; loom, as PyTorch, splits a tie's gradient evenly among the tied. A
    // one-sided quotient is off by the curvature times half the step (a reciprocal after
    // the max): each side is extrapolated from steps h and 2h, and again from 2h and 4h,
    // to its derivative, and the two must agree.
    const auto [left, right] = one_sided(p, h);
    const auto [left2, right2] = one_sided(p, 2 * h);
    const auto [left4, right4] = one_sided(p, 4 * h);
    const double left0 = 2 * left - left2, right0 = 2 * right - right2;
    const bool steady_kink = !close(left0, right0, tolerance) && close(left0, 2 * left2 - left4, tolerance) &&
                             close(right0, 2 * right2 - right4, tolerance);
    if (steady_kink && mine >= std::min(left0, right0) - tolerance &&
        mine <= std::max(left0, right0) + tolerance) {
      count("kink: a subgradient");
      continue;
    }
    // A jump at x itself (a loss that counts tied values, where(x == max(x), x, 0), at a tie
    // of distinct elements: any step breaks it): the one-sided quotients differ by the jump
    // over the step, the same jump at each step. No derivative to compare with.
    const double jump = (right - left) * h, jump4 = (right4 - left4) * 4 * h;
    if (!close(left, right, tolerance) && std::abs(jump - jump4) <= kSameJump * std::abs(jump)) {
      count("jump: no derivative");
      continue;
    }
    // A steady kink that loom's gradient lies outside of: kinks of several ties, broken one
    // way in one row and the other way in another (an argmax's pick among a broadcast's
    // equal rows), whose one-sided quotients bound no choice among the tied. No derivative
    // here; loom's gradient graph is judged where the ties are broken, at a point nearby.
    if (steady_kink) {
      const std::optional<bool> nearby = agrees_nearby(p, h);
      if (nearby.value_or(true)) {
        count(nearby ? "kinks: agreed nearby" : "kinks: no derivative nearby");
        continue;
      }
    }
    const double reference = along(p, reference_gradients({}));
    return Failure{
        "gradient",
        fmt::format(
            "d(loss)/d({}): loom's gradient gives {}, central differences give {} (step {:.3g}) and {} "
            "(step {:.3g}), tolerance {:.3g}; the reference interpreter on loom's gradient graph gives {}: "
            "{}",
            p.name, mine, fd, h, fd4, 4 * h, tolerance, reference,
            close(reference, fd, tolerance)
                ? "the gradient graph is right and its compiled code is not"
                : "the gradient graph itself is wrong (a rule of src/gradient.cpp)")};
  }
  return std::nullopt;
}

}  // namespace loom::fuzz
