// The gradient: a table of rules, one per primitive op (as tinygrad's
// gradient.py), a few more for composites whose primitives differentiate badly
// (src/composites.hpp), and a short walk in reverse topological order that sums
// the contributions of shared nodes; a composite that declared its own backward
// (src/custom_gradient.hpp) is one edge to its inputs. No tape: the result is lazy UOps over the
// forward graph, scheduled and fused with it.
#include "src/gradient.hpp"

#include "ir/collective.hpp"
#include "ir/planted_fault.hpp"
#include "src/composites.hpp"
#include "src/custom_gradient.hpp"
#include "src/tensor_ops.hpp"

#include <cmath>
#include <functional>
#include <numbers>
#include <numeric>
#include <optional>

namespace loom::detail {

namespace {

using Grads = std::vector<UOpPtr>;  // one per source of the node; null: no contribution

UOpPtr reduce_sum(const UOpPtr& x, std::vector<int64_t> axes) {
  return axes.empty() ? x : UOp::make(Op::REDUCE_AXIS, x->dtype, {x}, ReduceArg{Op::ADD, std::move(axes)});
}
UOpPtr movement(Op op, const UOpPtr& g, Arg arg) { return UOp::make(op, g->dtype, {g}, std::move(arg)); }
const std::vector<int64_t>& ints(const UOpPtr& u) { return u->get<std::vector<int64_t>>(); }
const Shape& sizes(const UOpPtr& u) { return u->get<Shape>(); }

// ---- reductions -------------------------------------------------------------------------------------
// max and min split the gradient equally among the elements equal to the result, as PyTorch's amax.
Grads reduce_max_rule(const UOpPtr& ret, const UOpPtr& g) {
  const UOpPtr& x = ret->src[0];
  const Shape& in = *x->shape();
  const UOpPtr hit = eq(x, expand_uop(ret, in));
  const UOpPtr ties = reduce_sum(cast_uop(hit, x->dtype), ret->get<ReduceArg>().axes);
  return {where(hit, expand_uop(g / ties, in), const_as(x, 0))};
}

// d prod / d x_i is the product of the others: prod / x_i without zeros; with one zero, the
// product of the non-zeros at the zero and 0 elsewhere; with more, 0 everywhere.
Grads reduce_prod_rule(const UOpPtr& ret, const UOpPtr& g) {
  const UOpPtr& x = ret->src[0];
  const Shape& in = *x->shape();
  const auto& axes = ret->get<ReduceArg>().axes;
  const UOpPtr zero = const_as(x, 0), one = const_as(x, 1), is_zero = eq(x, zero);
  const UOpPtr zeros = expand_uop(reduce_sum(cast_uop(is_zero, x->dtype), axes), in);
  const UOpPtr nonzero_prod = expand_uop(
      UOp::make(Op::REDUCE_AXIS, x->dtype, {where(is_zero, one, x)}, ReduceArg{Op::MUL, axes}), in);
  const UOpPtr others = where(is_zero, where(eq(zeros, one), nonzero_prod, zero),
                              where(eq(zeros, zero), nonzero_prod / x, zero));
  return {expand_uop(g, in) * others};
}

Grads reduce_rule(const UOpPtr& ret, const UOpPtr& g) {
  switch (ret->get<ReduceArg>().op) {
    case Op::ADD: return {expand_uop(g, *ret->src[0]->shape())};
    case Op::MAX: return reduce_max_rule(ret, g);
    case Op::MUL: return reduce_prod_rule(ret, g);
    default: return {nullptr};
  }
}

// ---- elementwise ------------------------------------------------------------------------------------
// maximum splits the gradient of a tie in halves, as PyTorch's.
Grads max_rule(const UOpPtr& ret, const UOpPtr& g) {
  const UOpPtr &a = ret->src[0], &b = ret->src[1];
  const UOpPtr zero = const_as(g, 0), tie = where(eq(a, b), g * const_as(g, 0.5), g);
  return {where(a < b, zero, tie), where(b < a, zero, tie)};
}

// PyTorch's masks: no base gradient where the exponent is 0, no exponent gradient where the
// base is 0 and the exponent >= 0. A negative base has a base gradient for any exponent libm's
// pow takes (integers).
Grads pow_rule(const UOpPtr& ret, const UOpPtr& g) {
  const UOpPtr &a = ret->src[0], &b = ret->src[1];
  const UOpPtr zero = const_as(g, 0);
  const UOpPtr da = where(eq(b, zero), zero, g * b * alu(Op::POW, {a, b - const_as(b, 1)}));
  const UOpPtr b_nonnegative = alu(Op::OR, {zero < b, eq(b, zero)});
  const UOpPtr db = where(land(eq(a, zero), b_nonnegative), zero, g * ret * log_of(a));
  return {da, db};
}

Grads sqrt_rule(const UOpPtr& ret, const UOpPtr& g) {
  const double two = planted_fault() == PlantedFault::DoubledSqrtGradient ? 1 : 2;  // ir/planted_fault.hpp
  return {g / (ret * const_as(g, two))};
}

Grads cast_rule(const UOpPtr& ret, const UOpPtr& g) {
  const UOpPtr& x = ret->src[0];
  return {x->dtype.is_float() ? cast_uop(g, x->dtype) : nullptr};
}

// ---- movement -------------------------------------------------------------------------------------
Grads permute_rule(const UOpPtr& ret, const UOpPtr& g) {
  const auto& order = ints(ret);
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
  return {movement(Op::PERMUTE, g, inverse)};
}

Grads expand_rule(const UOpPtr& ret, const UOpPtr& g) {
  const Shape &in = *ret->src[0]->shape(), &out = *ret->shape();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] != out[i]) axes.push_back(static_cast<int64_t>(i));
  return {reduce_sum(g, axes)};
}

Grads pad_rule(const UOpPtr& ret, const UOpPtr& g) {
  const Shape& in = *ret->src[0]->shape();
  Shape bounds;
  for (size_t i = 0; i < in.size(); ++i) {
    bounds.push_back(sizes(ret)[2 * i]);
    bounds.push_back(sizes(ret)[2 * i] + in[i]);
  }
  return {movement(Op::SHRINK, g, bounds)};
}

Grads shrink_rule(const UOpPtr& ret, const UOpPtr& g) {
  const Shape& in = *ret->src[0]->shape();
  Shape padding;
  for (size_t i = 0; i < in.size(); ++i) {
    padding.push_back(sizes(ret)[2 * i]);
    padding.push_back(in[i] - sizes(ret)[2 * i + 1]);
  }
  return {movement(Op::PAD, g, padding)};
}

// ---- collectives (ir/collective.hpp) --------------------------------------------------------------
// Each rank's g goes back to the inputs its value came from: all_reduce(sum) sums every
// rank's g (each rank's x fed every rank's result); all_reduce(max) the same where x was
// the maximum (every rank that ties gets it); broadcast sums g at its root, and reduce,
// the gradient of broadcast, broadcasts it from there. all_gather's row r came from rank
// r: reduce_scatter gives it the sum of every rank's g for that row, and the other way round.
Grads collective_rule(const UOpPtr& ret, const UOpPtr& g) {
  const CollectiveArg a = collective_arg(*ret);
  auto to = [&](CollectiveKind kind) {
    return collective(g, {kind, CollectiveReduce::Sum, a.root, a.ranks});
  };
  if (ret->src.size() > 1) {  // a bucket: each part gets its slot of the whole gradient
    const UOpPtr summed = to(CollectiveKind::AllReduce);
    const BucketLayout layout = bucket_layout(ret->src);
    auto part = [&](const UOpPtr& bucket, size_t i) {
      const Shape& shape = *ret->src[i]->shape();
      const int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
      return reshape_uop(movement(Op::SHRINK, bucket, Shape{layout.offsets[i], layout.offsets[i] + n}),
                         shape);
    };
    Grads out;
    for (size_t i = 0; i < ret->src.size(); ++i)
      out.push_back(a.reduce == CollectiveReduce::Sum
                        ? part(summed, i)
                        : where(eq(ret->src[i], part(ret, i)), part(summed, i), const_as(g, 0)));
    return out;
  }
  switch (a.kind) {
    case CollectiveKind::AllReduce:
      if (a.reduce == CollectiveReduce::Sum) return {to(CollectiveKind::AllReduce)};
      return {where(eq(ret->src[0], ret), to(CollectiveKind::AllReduce), const_as(g, 0))};
    case CollectiveKind::Broadcast: return {to(CollectiveKind::Reduce)};
    case CollectiveKind::Reduce: return {to(CollectiveKind::Broadcast)};
    case CollectiveKind::AllGather: return {to(CollectiveKind::ReduceScatter)};
    case CollectiveKind::ReduceScatter: return {to(CollectiveKind::AllGather)};
  }
  return {nullptr};
}

// ---- the table: one rule per differentiable primitive -------------------------------------------
using GradientRule = Grads (*)(const UOpPtr& ret, const UOpPtr& g);
// clang-format off
const std::unordered_map<Op, GradientRule> kRules = {
  {Op::NEG,     [](const UOpPtr&, const UOpPtr& g) -> Grads { return {-g}; }},
  {Op::EXP,     [](const UOpPtr& ret, const UOpPtr& g) -> Grads { return {g * ret}; }},
  {Op::EXP2,    [](const UOpPtr& ret, const UOpPtr& g) -> Grads { return {g * ret * const_as(g, std::numbers::ln2)}; }},
  {Op::LOG2,    [](const UOpPtr& ret, const UOpPtr& g) -> Grads { return {g / (ret->src[0] * const_as(g, std::numbers::ln2))}; }},
  {Op::SIN,     [](const UOpPtr& ret, const UOpPtr& g) -> Grads { return {g * cos_of(ret->src[0])}; }},
  {Op::COS,     [](const UOpPtr& ret, const UOpPtr& g) -> Grads { return {-(g * alu(Op::SIN, {ret->src[0]}))}; }},
  {Op::TANH,    [](const UOpPtr& ret, const UOpPtr& g) -> Grads { return {g * (const_as(ret, 1) - ret * ret)}; }},
  {Op::SIGMOID, [](const UOpPtr& ret, const UOpPtr& g) -> Grads { return {g * ret * (const_as(ret, 1) - ret)}; }},
  {Op::ERF,     [](const UOpPtr& ret, const UOpPtr& g) -> Grads {
     const UOpPtr& x = ret->src[0];
     return {g * const_as(x, 2 / std::sqrt(std::numbers::pi)) * exp_of(-(x * x))}; }},
  {Op::SQRT,    sqrt_rule},
  {Op::RECIP,   [](const UOpPtr& ret, const UOpPtr& g) -> Grads { return {-(g * (ret * ret))}; }},
  {Op::ADD,     [](const UOpPtr&, const UOpPtr& g) -> Grads { return {g, g}; }},
  {Op::SUB,     [](const UOpPtr&, const UOpPtr& g) -> Grads { return {g, -g}; }},
  {Op::MUL,     [](const UOpPtr& ret, const UOpPtr& g) -> Grads { return {g * ret->src[1], g * ret->src[0]}; }},
  {Op::FDIV,    [](const UOpPtr& ret, const UOpPtr& g) -> Grads { return {g / ret->src[1], -(g * ret) / ret->src[1]}; }},
  {Op::MAX,     max_rule},
  {Op::POW,     pow_rule},
  {Op::WHERE,   [](const UOpPtr& ret, const UOpPtr& g) -> Grads {
                  const UOpPtr& cond = ret->src[0];
                  return {nullptr, where(cond, g, const_as(g, 0)), where(cond, const_as(g, 0), g)}; }},
  {Op::MULACC,  [](const UOpPtr& ret, const UOpPtr& g) -> Grads { return {g * ret->src[1], g * ret->src[0], g}; }},
  {Op::CAST,    cast_rule},
  {Op::CONTIGUOUS, [](const UOpPtr&, const UOpPtr& g) -> Grads { return {g}; }},
  {Op::COPY,    [](const UOpPtr&, const UOpPtr& g) -> Grads { return {g}; }},
  {Op::ASSIGN,  [](const UOpPtr&, const UOpPtr& g) -> Grads { return {nullptr, g}; }},
  {Op::RESHAPE, [](const UOpPtr& ret, const UOpPtr& g) -> Grads { return {reshape_uop(g, *ret->src[0]->shape())}; }},
  {Op::PERMUTE, permute_rule},
  {Op::EXPAND,  expand_rule},
  {Op::PAD,     pad_rule},
  {Op::SHRINK,  shrink_rule},
  {Op::FLIP,    [](const UOpPtr& ret, const UOpPtr& g) -> Grads { return {movement(Op::FLIP, g, ints(ret))}; }},
  {Op::REDUCE_AXIS, reduce_rule},
  {Op::COLLECTIVE, collective_rule},
};
// clang-format on
// TRUNC has derivative 0 (no contribution); comparisons, logic, integer division, BITCAST
// and DETACH pass nothing on, and integer or Bool values never carry a gradient.

// ---- composites with a rule of their own ------------------------------------------------------------
// A node is the composite `form(x)` when x, found by following `path` from the node, rebuilds
// it exactly (hash-consing makes that a pointer comparison); `guard` rejects most other nodes
// before the rebuild.
struct CompositeRule {
  Op outer;
  std::vector<int> path;
  bool (*guard)(const UOpPtr& y);
  UOpPtr (*form)(const UOpPtr& x);
  UOpPtr (*derivative)(const UOpPtr& x, const UOpPtr& y, const UOpPtr& g);
};

bool is(const UOpPtr& u, size_t i, Op op) { return u->src.size() > i && u->src[i]->op == op; }
bool where_on_zero_test(const UOpPtr& y) { return is(y, 0, Op::CMPEQ); }

// clang-format off
const CompositeRule kComposites[] = {
  // exp' = exp, instead of the derivative of Float64's range reduction (Float32's is one EXP).
  {Op::MUL,   {0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
   [](const UOpPtr& y) { return is(y, 0, Op::MUL) && is(y->src[0], 0, Op::EXP2) && is(y, 1, Op::BITCAST); },
   exp_of, [](const UOpPtr&, const UOpPtr& y, const UOpPtr& g) { return g * y; }},
  // sigmoid' = y (1 - y): 1/4 at 0, where the form's |x| tie would give 0 (Float64's form).
  {Op::FDIV,  {0, 0, 0},
   [](const UOpPtr& y) { return is(y, 0, Op::WHERE) && is(y->src[0], 0, Op::CMPLT) && is(y, 1, Op::ADD); },
   sigmoid_of, [](const UOpPtr&, const UOpPtr& y, const UOpPtr& g) { return g * y * (const_as(y, 1) - y); }},
  // tanh' = 1 - y^2, instead of the derivative of its series and two branches.
  {Op::WHERE, {1}, where_on_zero_test,
   tanh_of, [](const UOpPtr&, const UOpPtr& y, const UOpPtr& g) { return g * (const_as(y, 1) - y * y); }},
  // relu' = (0 < y), which is (0 < x) for every x (-0.0 and NaN too): the mask reads relu's
  // output, which a network stores anyway, so the pre-activation need not be kept as well.
  {Op::WHERE, {1}, [](const UOpPtr& y) { return is(y, 0, Op::CMPLT) && is(y, 2, Op::DETACH); },
   relu_of, [](const UOpPtr&, const UOpPtr& y, const UOpPtr& g) { return where(const_as(y, 0) < y, g, const_as(g, 0)); }},
  // erf' = 2/sqrt(pi) exp(-x^2), instead of the derivative of its series and fitted polynomial
  // (Float64's form; Float32's is one ERF node).
  {Op::WHERE, {1, 0}, [](const UOpPtr& y) { return is(y, 0, Op::CMPLT) && is(y, 1, Op::MUL) && is(y, 2, Op::WHERE); },
   erf_of, [](const UOpPtr& x, const UOpPtr&, const UOpPtr& g) {
     return g * const_as(x, 2 / std::sqrt(std::numbers::pi)) * exp_of(-(x * x)); }},
  // log1p' = 1 / (1 + x), as PyTorch's: the derivative of Kahan's correction loses it where
  // the product under it overflows (x near the top of the range).
  {Op::WHERE, {1}, [](const UOpPtr& y) { return is(y, 0, Op::CMPEQ) && is(y, 2, Op::MUL); },
   log1p_of, [](const UOpPtr& x, const UOpPtr&, const UOpPtr& g) { return g * alu(Op::RECIP, {x + const_as(x, 1)}); }},
  // expm1' = e^x = y + 1, as PyTorch's, instead of the derivative of the series.
  {Op::WHERE, {0, 1, 0}, [](const UOpPtr& y) { return is(y, 0, Op::CMPLT) && is(y, 1, Op::SUB) && is(y, 2, Op::ADD); },
   expm1_of, [](const UOpPtr&, const UOpPtr& y, const UOpPtr& g) { return g * (y + const_as(y, 1)); }},
  // cos' = -sin: the form's sin(2x) / (2 sin x), masked off at 0 by a where, is 0/0 there.
  {Op::WHERE, {0, 0}, where_on_zero_test,
   cos_of, [](const UOpPtr& x, const UOpPtr&, const UOpPtr& g) { return -(g * alu(Op::SIN, {x})); }},
};
// clang-format on

UOpPtr follow(UOpPtr u, const std::vector<int>& path) {
  for (int i : path) {
    if (static_cast<size_t>(i) >= u->src.size()) return nullptr;
    u = u->src[i];
  }
  return u;
}

// ---- the walk -----------------------------------------------------------------------------------
// How a node passes its gradient on: to which inputs, and how much to each.
struct Edge {
  std::vector<UOpPtr> inputs;
  std::function<Grads(const UOpPtr& g)> vjp;
};

std::optional<Edge> composite_edge(const UOpPtr& y) {
  for (const CompositeRule& r : kComposites) {
    if (y->op != r.outer || !r.guard(y)) continue;
    const UOpPtr x = follow(y, r.path);
    if (!x || x->dtype != y->dtype || x->shape() != y->shape() || r.form(x) != y) continue;
    return Edge{{x}, [x, y, d = r.derivative](const UOpPtr& g) -> Grads { return {d(x, y, g)}; }};
  }
  return std::nullopt;
}

// gather on float values sums their bits (exactly the one selected value): its gradient is that
// of the float sum of the same selection.
std::optional<Edge> gather_edge(const UOpPtr& y) {
  if (y->op != Op::BITCAST || !y->dtype.is_float() || !is(y, 0, Op::RESHAPE)) return std::nullopt;
  const UOpPtr& sum = y->src[0]->src[0];
  if (sum->op != Op::REDUCE_AXIS || !is(sum, 0, Op::WHERE)) return std::nullopt;
  const auto& arg = sum->get<ReduceArg>();
  if (arg.op != Op::ADD || arg.axes.size() != 1 || arg.axes[0] < 1) return std::nullopt;
  const UOpPtr& hit = sum->src[0]->src[0];
  UOpPtr values = sum->src[0]->src[1];
  while (values->op == Op::EXPAND || values->op == Op::RESHAPE) values = values->src[0];
  if (values->op != Op::BITCAST) return std::nullopt;
  const UOpPtr source = values->src[0];
  const int64_t axis = arg.axes[0] - 1;
  if (source->dtype != y->dtype || gather_select(source, hit, axis, true) != y) return std::nullopt;
  return Edge{{source}, [source, hit, axis](const UOpPtr& g) -> Grads {
                // The float form's reshape of `source` collapses onto a reshaped source's own source.
                const UOpPtr base = source->op == Op::RESHAPE ? source->src[0] : source;
                const UOpPtr floats = gather_select(source, hit, axis, false);
                return {reshape_uop(gradients(floats, g, {base}, {}, true)[0], *source->shape())};
              }};
}

Edge primitive_edge(const UOpPtr& u) {
  auto rule = kRules.find(u->op);
  if (rule == kRules.end()) return {};
  return Edge{u->src, [u, f = rule->second](const UOpPtr& g) { return f(u, g); }};
}

class Walk {
 public:
  explicit Walk(const GraphsBehind& behind) : behind_(behind) {}

  const Edge& edge(const UOpPtr& u) {
    auto it = edges_.find(u.get());
    if (it != edges_.end()) return it->second;
    return edges_.emplace(u.get(), make_edge(u)).first->second;
  }

  // Every node the gradient can reach from `root`, inputs before users; the inputs of a node
  // in `stop` are not visited. Iterative: graphs may be deep.
  std::vector<UOpPtr> order(const UOpPtr& root, const std::unordered_set<const UOp*>& stop) {
    std::vector<UOpPtr> out;
    std::unordered_set<const UOp*> seen{root.get()};
    std::vector<std::pair<UOpPtr, size_t>> stack{{root, 0}};
    while (!stack.empty()) {
      auto& [u, next] = stack.back();
      const std::vector<UOpPtr>& inputs = stop.count(u.get()) ? no_inputs_ : edge(u).inputs;
      if (next < inputs.size()) {
        const UOpPtr in = inputs[next++];
        if (seen.insert(in.get()).second) stack.emplace_back(in, 0);
        continue;
      }
      out.push_back(u);
      stack.pop_back();
    }
    return out;
  }

 private:
  Edge make_edge(const UOpPtr& u) {
    if (auto b = behind_.find(u.get()); b != behind_.end() && is_symbolic(*b->second->shape()))
      return Edge{
          {b->second}, [graph = b->second](const UOpPtr&) -> Grads {
            throw Error(fmt::format(
                "backward: the gradient reaches a tensor of shape {} realized before backward(), whose "
                "buffer holds that run's numbers: a gradient cannot pass a realized result of symbolic "
                "shape yet; realize it after backward(), or read it through item()/to_vector() of a "
                "detached copy (docs/symbolic.md)",
                str(*graph->shape())));
          }};
    if (auto b = behind_.find(u.get()); b != behind_.end())
      return Edge{{b->second}, [](const UOpPtr& g) -> Grads { return {g}; }};
    if (u->op == Op::DETACH || !u->dtype.is_float()) return {};
    if (auto e = custom_gradient_of(u)) return Edge{std::move(e->inputs), std::move(e->vjp)};
    if (auto e = composite_edge(u)) return *e;
    if (auto e = gather_edge(u)) return *e;
    Edge e = primitive_edge(u);
    // Integer and Bool inputs (a where's condition, a cast's integer source) get nothing.
    std::vector<UOpPtr> kept;
    for (const UOpPtr& in : e.inputs) kept.push_back(in->dtype.is_float() ? in : nullptr);
    std::erase(kept, nullptr);
    if (kept.size() == e.inputs.size()) return e;
    const std::vector<UOpPtr> all = e.inputs;
    return Edge{kept, [all, f = e.vjp](const UOpPtr& g) {
                  Grads in_all = f(g), out;
                  for (size_t i = 0; i < all.size(); ++i)
                    if (all[i]->dtype.is_float()) out.push_back(i < in_all.size() ? in_all[i] : nullptr);
                  return out;
                }};
  }

  const GraphsBehind& behind_;
  std::unordered_map<const UOp*, Edge> edges_;
  const std::vector<UOpPtr> no_inputs_;
};

void check_contribution(const UOpPtr& node, const UOpPtr& input, const UOpPtr& g) {
  if (g->shape() != input->shape() || g->dtype != input->dtype)
    throw Error(
        fmt::format("gradient: the rule for {} gave a contribution of shape {} and dtype {} to an "
                    "input of shape {} and dtype {}",
                    op_name(node->op), str(g->shape().value_or(Shape{})), to_string(g->dtype),
                    str(input->shape().value_or(Shape{})), to_string(input->dtype)));
}

}  // namespace

std::vector<UOpPtr> gradients(const UOpPtr& root, const UOpPtr& seed, const std::vector<UOpPtr>& wrt,
                              const GraphsBehind& behind, bool stop_at_wrt) {
  std::unordered_set<const UOp*> targets;
  for (const UOpPtr& w : wrt) targets.insert(w.get());
  const std::unordered_set<const UOp*> none, &stop = stop_at_wrt ? targets : none;
  Walk walk(behind);
  const std::vector<UOpPtr> order = walk.order(root, stop);
  // On a path to a target: only there are contributions worth building.
  std::unordered_set<const UOp*> on_path;
  for (const UOpPtr& u : order) {
    bool on = targets.count(u.get()) > 0;
    if (!stop.count(u.get()))
      for (const UOpPtr& in : walk.edge(u).inputs) on = on || on_path.count(in.get());
    if (on) on_path.insert(u.get());
  }
  std::unordered_map<const UOp*, UOpPtr> grads;
  if (on_path.count(root.get())) grads[root.get()] = seed;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const UOpPtr& u = *it;
    auto g = grads.find(u.get());
    if (g == grads.end() || stop.count(u.get())) continue;
    const Edge& e = walk.edge(u);
    if (e.inputs.empty()) continue;
    const Grads parts = e.vjp(g->second);
    for (size_t i = 0; i < e.inputs.size(); ++i) {
      const UOpPtr& in = e.inputs[i];
      if (i >= parts.size() || !parts[i] || !on_path.count(in.get())) continue;
      check_contribution(u, in, parts[i]);
      UOpPtr& acc = grads[in.get()];
      acc = acc ? acc + parts[i] : parts[i];
    }
  }
  std::vector<UOpPtr> out;
  for (const UOpPtr& w : wrt) {
    auto g = grads.find(w.get());
    out.push_back(g == grads.end() ? nullptr : g->second);
  }
  return out;
}

bool gradient_reaches(const UOpPtr& root, const std::unordered_set<const UOp*>& targets,
                      const GraphsBehind& behind) {
  if (targets.empty()) return false;
  Walk walk(behind);
  std::unordered_set<const UOp*> seen{root.get()};
  std::vector<UOpPtr> stack{root};
  while (!stack.empty()) {
    const UOpPtr u = stack.back();
    stack.pop_back();
    if (targets.count(u.get())) return true;
    for (const UOpPtr& in : walk.edge(u).inputs)
      if (seen.insert(in.get()).second) stack.push_back(in);
  }
  return false;
}

}  // namespace loom::detail
