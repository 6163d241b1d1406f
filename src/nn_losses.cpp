// torch.nn.functional's losses, composed from Tensor ops with PyTorch's formulas (so their
// gradients are the ops' own): cross_entropy and nll_loss over class indices or class
// probabilities with weights, an ignored label and label smoothing; the binary cross-entropies;
// the regression losses. Half inputs compute in Float32 and round the loss once
// (src/half_compute.hpp). tests/data/make_nn_table.py holds PyTorch's values and gradients.
#include "src/autocast.hpp"
#include "src/half_compute.hpp"
#include "src/nn_common.hpp"

#include <loom/nn.hpp>

#include <limits>

namespace loom::nn {

using detail::str;
using namespace detail_nn;

namespace {

Tensor reduced(const Tensor& per_element, Reduction reduction) {
  switch (reduction) {
    case Reduction::Mean: return per_element.mean();
    case Reduction::Sum: return per_element.sum();
    case Reduction::None: return per_element;
  }
  return per_element;
}

// A loss of two float tensors of one dtype (target broadcast to pred's shape, as PyTorch's
// elementwise losses do), computed in Float32 for halves and rounded once.
template <class Fn>
Tensor elementwise_loss(const char* op, const Tensor& pred_input, const Tensor& target_input, Fn&& loss) {
  check_float(pred_input, op);
  if (!target_input.defined())
    throw Error(fmt::format("{}: the target is undefined (default-constructed)", op));
  const Tensor pred = loom::detail::autocast_float32(pred_input),
               target = loom::detail::autocast_float32(target_input);
  check_same_dtype(op, target, "target", pred, "input");
  return loom::detail::rounded_once(
      pred, [&](const Tensor& p) { return loss(p, loom::detail::widened_half(target).expand(p.shape())); });
}

// An optional weight of `like`'s dtype (a half weight beside Float32 math is widened).
Tensor weight_like(const Tensor& weight, const Tensor& like, const char* op, const char* name) {
  if (!weight.defined()) return weight;
  check_float(weight, op);
  const Tensor w = loom::detail::widened_half(weight);
  if (w.dtype() != like.dtype()) check_same_dtype(op, w, name, like, "input");
  return w;
}

// The class axis moved last: [N, C, d1, ...] -> [N, d1, ..., C]; [C] -> [1, C].
Tensor classes_last(const Tensor& t) {
  if (t.ndim() == 1) return t.unsqueeze(0);
  if (t.ndim() == 2) return t;
  std::vector<int> order{0};
  for (int a = 2; a < static_cast<int>(t.ndim()); ++a) order.push_back(a);
  order.push_back(1);
  return t.permute(order);
}

// cross_entropy's and nll_loss's rules over log-probabilities `lp` (class axis 1, or 0 for 1-D).
Tensor class_loss(const Tensor& lp_input, const Tensor& target, const CrossEntropyOptions& o,
                  const char* op) {
  if (lp_input.ndim() == 0)
    throw Error(fmt::format("{}: expected input [C] or [N, C, ...], got a 0-d tensor", op));
  const int class_axis = lp_input.ndim() == 1 ? 0 : 1;
  const Dim classes_dim = lp_input.shape()[static_cast<size_t>(class_axis)];
  if (classes_dim.is_symbolic())
    throw Error(
        fmt::format("{}: the class axis of input {} is symbolic; expected a concrete number of classes", op,
                    str(lp_input.shape())));
  const int64_t classes = classes_dim.value();
  const Tensor lp = classes_last(lp_input);
  const Tensor w = weight_like(o.weight, lp, op, "weight");
  if (w.defined() && w.shape() != Shape{classes})
    throw Error(
        fmt::format("{}: weight {} should hold one value per class, [{}]", op, str(w.shape()), classes));
  const double eps = o.label_smoothing;
  Shape per_sample = lp_input.shape();
  per_sample.erase(per_sample.begin() + class_axis);

  if (target.dtype().is_float()) {  // class probabilities, of the input's shape
    if (target.shape() != lp_input.shape())
      throw Error(fmt::format("{}: probabilities {} should have the input's shape {}", op,
                              str(target.shape()), str(lp_input.shape())));
    if (o.ignore_index)
      throw Error(fmt::format("{}: ignore_index applies to class indices, not to probabilities", op));
    Tensor t = classes_last(loom::detail::widened_half(target).cast(lp.dtype()));
    if (eps > 0) t = t * (1 - eps) + eps / static_cast<double>(classes);
    const Tensor weighted = w.defined() ? lp * t * w : lp * t;
    const Tensor per = -weighted.sum(-1).reshape(per_sample);
    return reduced(per, o.reduction);
  }

  if (target.shape() != per_sample)
    throw Error(
        fmt::format("{}: labels {} should have the input's shape without its class axis, {} (input {})", op,
                    str(target.shape()), str(per_sample), str(lp_input.shape())));
  check_indices(target, classes, op, "labels", o.ignore_index);
  const Tensor labels = lp_input.ndim() == 1 ? target.unsqueeze(0) : target;
  Tensor kept;  // Float: 1 where the label counts
  if (o.ignore_index) kept = labels.ne(*o.ignore_index).cast(lp.dtype());
  Tensor hot = labels.one_hot(classes).cast(lp.dtype());
  if (kept.defined()) hot = hot * kept.unsqueeze(-1);  // an ignored label (a class or not) picks nothing
  const Tensor weighted_hot = w.defined() ? hot * w : hot;
  Tensor per = -(lp * weighted_hot).sum(-1);
  if (eps > 0) {
    Tensor smooth = -(w.defined() ? lp * w : lp).sum(-1);
    if (kept.defined()) smooth = smooth * kept;
    per = per * (1 - eps) + smooth * (eps / static_cast<double>(classes));
  }
  per = per.reshape(per_sample);
  if (o.reduction != Reduction::Mean) return reduced(per, o.reduction);
  if (!w.defined() && !kept.defined()) return per.mean();
  // PyTorch's mean: divided by the summed weights of the labels that count. None counting gives
  // NaN, as 0 / 0 does in PyTorch, and a zero gradient (PyTorch's): the division itself is by 1
  // there, so no inf meets the zeros the ignored labels pass back.
  const Tensor counted = (w.defined() ? weighted_hot.sum(-1) : kept).sum();
  const Tensor some = counted.ne(0);
  return where(some, per.sum() / where(some, counted, 1), std::numeric_limits<double>::quiet_NaN());
}

bool default_options(const CrossEntropyOptions& o) {
  return !o.weight.defined() && !o.ignore_index && o.label_smoothing == 0 && o.reduction == Reduction::Mean;
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& labels) {
  const char* op = "cross_entropy";
  check_float(input, op);
  const Tensor logits = loom::detail::autocast_float32(input);
  if (!labels.defined()) throw Error("cross_entropy: the labels are undefined (default-constructed)");
  if (logits.ndim() != 2 || labels.ndim() != 1 || labels.shape()[0] != logits.shape()[0])
    throw Error(fmt::format("{}: expected logits [N, C] and labels [N], got logits {} and labels {}", op,
                            str(logits.shape()), str(labels.shape())));
  const int64_t classes = logits.shape()[1];
  check_indices(labels, classes, op, "labels");
  // A half input computes in Float32 and rounds the loss once (src/half_compute.hpp).
  return loom::detail::rounded_once(logits, [&](const Tensor& z) {
    const Tensor picked = (z.log_softmax(1) * labels.one_hot(classes).cast(z.dtype())).sum(1);
    return -picked.mean();
  });
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options) {
  const char* op = "cross_entropy";
  check_float(input, op);
  if (!target.defined()) throw Error("cross_entropy: the target is undefined (default-constructed)");
  if (!(options.label_smoothing >= 0 && options.label_smoothing <= 1))
    throw Error(fmt::format("{}: label_smoothing {} is outside [0, 1]", op, options.label_smoothing));
  const bool indices = !target.dtype().is_float();
  if (default_options(options) && indices && input.ndim() == 2 && target.ndim() == 1 &&
      target.shape()[0] == input.shape()[0])
    return cross_entropy(input, target);  // the graph every model's step has always had
  const Tensor logits = loom::detail::autocast_float32(input);
  if (!indices) check_same_dtype(op, loom::detail::autocast_float32(target), "target", logits, "input");
  const int class_axis = logits.ndim() == 1 ? 0 : 1;
  return loom::detail::rounded_once(logits, [&](const Tensor& z) {
    return class_loss(z.ndim() == 0 ? z : z.log_softmax(class_axis), target, options, op);
  });
}

Tensor nll_loss(const Tensor& input, const Tensor& labels, const CrossEntropyOptions& options) {
  const char* op = "nll_loss";
  check_float(input, op);
  if (!labels.defined()) throw Error("nll_loss: the labels are undefined (default-constructed)");
  if (labels.dtype().is_float())
    throw Error(fmt::format("{}: labels have dtype {}; expected class indices (Int32 or Int64)", op,
                            scalar_name(labels.dtype().scalar)));
  if (options.label_smoothing != 0)
    throw Error(
        fmt::format("{}: label_smoothing is cross_entropy's option, got {}", op, options.label_smoothing));
  const Tensor lp = loom::detail::autocast_float32(input);
  return loom::detail::rounded_once(lp, [&](const Tensor& x) { return class_loss(x, labels, options, op); });
}

Tensor binary_cross_entropy(const Tensor& probs, const Tensor& target, Reduction reduction,
                            const Tensor& weight) {
  const char* op = "binary_cross_entropy";
  if (probs.defined() && target.defined() && probs.shape() != target.shape())
    throw Error(fmt::format("{}: target {} should have the input's shape {}", op, str(target.shape()),
                            str(probs.shape())));
  return elementwise_loss(op, probs, target, [&](const Tensor& p, const Tensor& t) {
    const Tensor log_p = p.log().maximum(-100), log_q = (1 - p).log().maximum(-100);
    Tensor per = (t - 1) * log_q - t * log_p;
    if (const Tensor w = weight_like(weight, p, op, "weight"); w.defined()) per = per * w;
    return reduced(per, reduction);
  });
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, Reduction reduction,
                                        const Tensor& weight, const Tensor& pos_weight) {
  const char* op = "binary_cross_entropy_with_logits";
  if (logits.defined() && target.defined() && logits.shape() != target.shape())
    throw Error(fmt::format("{}: target {} should have the input's shape {}", op, str(target.shape()),
                            str(logits.shape())));
  return elementwise_loss(op, logits, target, [&](const Tensor& x, const Tensor& t) {
    // softplus(-x) = log(1 + e^-x) without overflow (no threshold); its derivative is
    // sigmoid(-x), so the loss's is sigmoid(x) - t at every x, 0 included.
    const Tensor log_one_plus = (-x).softplus(1, std::numeric_limits<double>::infinity());
    const Tensor pw = weight_like(pos_weight, x, op, "pos_weight");
    Tensor per = (1 - t) * x + (pw.defined() ? (1 + (pw - 1) * t) * log_one_plus : log_one_plus);
    if (const Tensor w = weight_like(weight, x, op, "weight"); w.defined()) per = per * w;
    return reduced(per, reduction);
  });
}

Tensor mse(const Tensor& input, const Tensor& target_input) {
  check_float(input, "mse");
  if (!target_input.defined()) throw Error("mse: the target is undefined (default-constructed)");
  const Tensor pred = loom::detail::autocast_float32(input),
               target = loom::detail::autocast_float32(target_input);
  check_same_dtype("mse", target, "target", pred, "pred");
  // Halves: the differences and their mean in Float32, rounded once (src/half_compute.hpp).
  const Tensor mean = (loom::detail::widened_half(pred) - loom::detail::widened_half(target)).square().mean();
  return loom::detail::is_half(pred) ? mean.cast(pred.dtype()) : mean;
}

Tensor mse_loss(const Tensor& pred, const Tensor& target, Reduction reduction) {
  if (reduction == Reduction::Mean) return mse(pred, target);
  return elementwise_loss("mse_loss", pred, target, [&](const Tensor& p, const Tensor& t) {
    return reduced((p - t).square(), reduction);
  });
}

Tensor l1_loss(const Tensor& pred, const Tensor& target, Reduction reduction) {
  return elementwise_loss("l1_loss", pred, target, [&](const Tensor& p, const Tensor& t) {
    return reduced((p - t).abs(), reduction);
  });
}

Tensor smooth_l1_loss(const Tensor& pred, const Tensor& target, Reduction reduction, double beta) {
  if (!(beta >= 0)) throw Error(fmt::format("smooth_l1_loss: beta {} must not be negative", beta));
  return elementwise_loss("smooth_l1_loss", pred, target, [&](const Tensor& p, const Tensor& t) {
    const Tensor d = (p - t).abs();
    if (beta == 0) return reduced(d, reduction);
    return reduced(where(d < beta, d.square() * (0.5 / beta), d - 0.5 * beta), reduction);
  });
}

Tensor huber_loss(const Tensor& pred, const Tensor& target, Reduction reduction, double delta) {
  if (!(delta > 0)) throw Error(fmt::format("huber_loss: delta {} must be positive", delta));
  return elementwise_loss("huber_loss", pred, target, [&](const Tensor& p, const Tensor& t) {
    const Tensor d = (p - t).abs();
    return reduced(where(d <= delta, d.square() * 0.5, (d - 0.5 * delta) * delta), reduction);
  });
}

}  // namespace loom::nn
