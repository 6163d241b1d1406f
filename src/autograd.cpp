// Autodiff on tensors: leaves, backward() and the accumulation of gradients,
// the graph kept behind a realized tensor, NoGrad and loom::gradient. The rules
// and the walk are src/gradient.cpp; docs/api.md ("Autodiff") is the contract.
#include "src/autograd.hpp"

#include "schedule/schedule.hpp"
#include "src/data_parallel.hpp"
#include "src/gradient.hpp"
#include "src/tensor_ops.hpp"

#include <loom/gradient.hpp>

#include <algorithm>

#include <mutex>
#include <unordered_set>

namespace loom {

using namespace detail;

namespace {

// The node that stands for a tensor in graphs built from it: a reshape of a reshape
// collapses into one reshape of the first one's source (src/tensor_ops.hpp), so a reshape
// stands for its source (a view of a buffer for the buffer), anything else for itself.
UOpPtr identity(const UOpPtr& u) { return u->op == Op::RESHAPE ? u->src[0] : u; }

// What the gradient must find beside the graphs: the leaves (by their tensor node) and the
// graph behind each realized buffer that was computed from a leaf (for as long as the buffer
// lives), and the still-lazy tensors backward() ran on. Weak references only, pruned as
// they die. Thread-safe.
class Tracked {
 public:
  static Tracked& get() {
    static Tracked* t = new Tracked();  // never destroyed: tensors may outlive statics
    return *t;
  }
  void add_leaf(const std::shared_ptr<TensorNode>& n) {
    std::lock_guard lock(mu_);
    leaves_.push_back(n);
    prune_when_grown();
  }
  void keep(const UOpPtr& buffer, UOpPtr graph) {
    std::lock_guard lock(mu_);
    behind_.push_back({buffer, std::move(graph)});
    prune_when_grown();
  }
  void forget(const UOpPtr& buffer) {
    std::lock_guard lock(mu_);
    std::erase_if(behind_, [&](const Behind& b) { return b.buffer.lock() == buffer; });
  }
  // The graph behind `buffer`, or null.
  UOpPtr graph_behind(const UOpPtr& buffer) {
    std::lock_guard lock(mu_);
    for (const Behind& b : behind_)
      if (b.buffer.lock() == buffer) return b.graph;
    return nullptr;
  }
  // The live leaves and (buffer, graph) pairs.
  std::pair<std::vector<std::shared_ptr<TensorNode>>, std::vector<std::pair<UOpPtr, UOpPtr>>> live() {
    std::lock_guard lock(mu_);
    prune();
    std::vector<std::shared_ptr<TensorNode>> leaves;
    for (const auto& w : leaves_)
      if (auto n = w.lock()) leaves.push_back(std::move(n));
    std::vector<std::pair<UOpPtr, UOpPtr>> behind;
    for (const Behind& b : behind_)
      if (auto buf = b.buffer.lock()) behind.emplace_back(std::move(buf), b.graph);
    return {std::move(leaves), std::move(behind)};
  }
  void add_pending(const std::shared_ptr<TensorNode>& n) {
    std::lock_guard lock(mu_);
    pending_.push_back(n);
  }
  std::vector<std::shared_ptr<TensorNode>> take_pending() {
    std::lock_guard lock(mu_);
    std::vector<std::shared_ptr<TensorNode>> out;
    for (const auto& w : pending_)
      if (auto n = w.lock()) out.push_back(std::move(n));
    pending_.clear();
    return out;
  }

 private:
  struct Behind {
    std::weak_ptr<const UOp> buffer;
    UOpPtr graph;
  };
  // Drops dead and duplicate leaves, leaves no longer marked, and graphs whose buffer died.
  // The caller holds mu_.
  void prune() {
    std::unordered_set<const TensorNode*> seen;
    std::erase_if(leaves_, [&](const std::weak_ptr<TensorNode>& w) {
      auto n = w.lock();
      return !n || !n->requires_grad || !seen.insert(n.get()).second;
    });
    std::erase_if(behind_, [](const Behind& b) { return b.buffer.expired(); });
  }
  void prune_when_grown() {
    if (leaves_.size() + behind_.size() < prune_at_) return;
    prune();
    prune_at_ = std::max<size_t>(64, 2 * (leaves_.size() + behind_.size()));
  }
  std::mutex mu_;
  std::vector<std::weak_ptr<TensorNode>> leaves_, pending_;
  std::vector<Behind> behind_;
  size_t prune_at_ = 64;
};

// A snapshot of the tracked tensors, for one walk.
struct Index {
  std::vector<UOpPtr> leaf_keys;  // identity of each leaf's current value
  std::vector<std::shared_ptr<TensorNode>> leaves;
  std::unordered_set<const UOp*> leaf_set;
  GraphsBehind behind;              // buffer -> its graph, flattened to the buffer's shape
  std::vector<UOpPtr> behind_keys;  // holds the buffers `behind` is keyed by
};

Index index_tracked() {
  Index idx;
  auto [leaves, behind] = Tracked::get().live();
  for (auto& n : leaves) {
    idx.leaf_keys.push_back(identity(n->uop));
    idx.leaf_set.insert(idx.leaf_keys.back().get());
    idx.leaves.push_back(std::move(n));
  }
  for (auto& [buffer, graph] : behind) {
    // A graph over symbolic sizes realized into its run's numbers has no view in the buffer's
    // shape (docs/symbolic.md): it is kept as it is, and a gradient reaching it is an error.
    idx.behind[buffer.get()] = is_symbolic(*graph->shape()) ? graph : reshape_uop(graph, *buffer->shape());
    idx.behind_keys.push_back(buffer);
  }
  return idx;
}

// The graph behind a realized tensor (in its shape), or null.
UOpPtr graph_behind(const UOpPtr& u) {
  return is_buffer_view(u) ? Tracked::get().graph_behind(identity(u)) : nullptr;
}
// The node a walk starts from for this tensor: the graph behind it, if kept.
UOpPtr walk_root(const TensorNode& n) {
  UOpPtr g = graph_behind(n.uop);
  return g ? g : n.uop;
}

void check_one_float_element(const UOpPtr& u, const char* op) {
  if (count(*u->shape()) != 1)
    throw Error(
        fmt::format("{}: the tensor of shape {} has {} elements; expected one (reduce it first, e.g. with "
                    "sum() or mean())",
                    op, str(*u->shape()), count(*u->shape())));
  if (!u->dtype.is_float())
    throw Error(fmt::format("{}: the tensor has dtype {}; only float tensors have gradients", op,
                            scalar_name(u->dtype.scalar)));
}

UOpPtr detach_uop(const UOpPtr& u) { return u->op == Op::DETACH ? u : UOp::make(Op::DETACH, u->dtype, {u}); }

// Adds `g` to a leaf's gradient, in the gradient's own node, so copies of grad() see the sum.
void accumulate(TensorNode& leaf, const UOpPtr& g) {
  if (!leaf.grad.defined()) {
    leaf.grad = Tensor(std::make_shared<TensorNode>(detach_uop(g)));
    return;
  }
  UOpPtr& old = leaf.grad.node()->uop;
  old = detach_uop((old->op == Op::DETACH ? old->src[0] : old) + g);
}

bool depends_on_leaf(const TensorNode& n, const Index& idx) {
  return !n.requires_grad && n.uop->dtype.is_float() &&
         gradient_reaches(walk_root(n), idx.leaf_set, idx.behind);
}

// Was the graph behind this realized tensor dropped by backward()? Then nothing can be
// differentiated through it again (PyTorch without retain_graph).
bool released(const TensorNode& n) {
  return n.backward_done && is_buffer_view(n.uop) && !graph_behind(n.uop);
}
std::string released_message(const char* op) {
  return fmt::format(
      "{}: the graph behind this tensor was released by an earlier backward() (it was realized before "
      "that); build it again to differentiate it again",
      op);
}

// Is `buffer` the identity of a leaf other than `self`?
bool taken(const UOpPtr& buffer, const TensorNode* self) {
  for (const auto& n : Tracked::get().live().first)
    if (n.get() != self && identity(n->uop) == buffer) return true;
  return false;
}
}  // namespace

// ---- Tensor members ------------------------------------------------------------------------------
bool Tensor::requires_grad() const {
  const TensorNode& n = checked("requires_grad");
  return n.requires_grad || depends_on_leaf(n, index_tracked());
}

Tensor& Tensor::requires_grad_(bool on) {
  const UOpPtr& u = uop(*this, "requires_grad_");
  TensorNode& n = *node_;
  if (!on) {
    if (!n.requires_grad && requires_grad())
      throw Error(
          "requires_grad_(false): the tensor is computed from a tensor that requires a gradient, not a leaf; "
          "use detach() for the same values cut from the graph");
    n.requires_grad = false;
    return *this;
  }
  if (!u->dtype.is_float())
    throw Error(
        fmt::format("requires_grad_: the tensor has dtype {}; only float tensors (Float32, Float64) can "
                    "require gradients",
                    scalar_name(u->dtype.scalar)));
  if (n.requires_grad || requires_grad()) return *this;  // computed from a leaf: gradients flow through it
  // A leaf of its own: a buffer no other tracked tensor stands for, never a shared constant.
  if (is_buffer_view(u) && taken(identity(u), &n)) n.uop = UOp::make(Op::CONTIGUOUS, u->dtype, {u});
  detail::realize_nodes({node_});
  n.requires_grad = true;
  Tracked::get().add_leaf(node_);
  return *this;
}

void Tensor::backward() const {
  check_one_float_element(uop(*this, "backward"), "backward");
  TensorNode& n = *node_;
  const UOpPtr root = walk_root(n);
  const Index idx = index_tracked();
  const std::vector<UOpPtr> grads =
      gradients(root, const_tensor(1, root->dtype, *root->shape()), idx.leaf_keys, idx.behind, true);
  if (std::none_of(grads.begin(), grads.end(), [](const UOpPtr& g) { return g != nullptr; }))
    throw Error(released(n) ? released_message("backward")
                            : "backward: the tensor does not depend on any tensor that requires a gradient "
                              "(call requires_grad_() on the parameters, and build the loss outside NoGrad)");
  std::vector<UOpPtr> shaped(grads.size());
  for (size_t i = 0; i < grads.size(); ++i)
    if (grads[i]) shaped[i] = reshape_uop(grads[i], *idx.leaves[i]->uop->shape());
  average_across_ranks(idx.leaves, shaped);  // the parameters of a DataParallel
  for (size_t i = 0; i < shaped.size(); ++i)
    if (shaped[i]) accumulate(*idx.leaves[i], shaped[i]);
  n.backward_done = true;
  if (is_buffer_view(n.uop))
    Tracked::get().forget(identity(n.uop));  // as PyTorch frees the graph after backward()
  else
    Tracked::get().add_pending(node_);
}

Tensor Tensor::grad() const { return checked("grad").grad; }
void Tensor::zero_grad() {
  checked("zero_grad");
  node_->grad = Tensor();
}
Tensor Tensor::detach() const { return make_tensor(detach_uop(uop(*this, "detach"))); }

// ---- functional gradient and NoGrad ----------------------------------------------------------------
std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& wrt) {
  check_one_float_element(uop(target, "gradient"), "gradient");
  if (released(*target.node())) throw Error(released_message("gradient"));
  std::vector<UOpPtr> keys;
  for (size_t i = 0; i < wrt.size(); ++i) {
    const UOpPtr& w = uop(wrt[i], "gradient");
    if (!w->dtype.is_float())
      throw Error(fmt::format("gradient: wrt[{}] has dtype {}; only float tensors have gradients", i,
                              scalar_name(w->dtype.scalar)));
    const UOpPtr behind = graph_behind(w);  // graphs built before w was realized hold this
    keys.push_back(behind ? behind : identity(w));
  }
  const UOpPtr root = walk_root(*target.node());
  const Index idx = index_tracked();
  const std::vector<UOpPtr> grads =
      gradients(root, const_tensor(1, root->dtype, *root->shape()), keys, idx.behind, false);
  std::vector<Tensor> out;
  for (size_t i = 0; i < wrt.size(); ++i)
    out.push_back(grads[i] ? make_tensor(reshape_uop(grads[i], wrt[i].shape()))
                           : Tensor::zeros(wrt[i].shape(), wrt[i].dtype()));
  return out;
}

NoGrad::NoGrad() { ++no_grad_depth; }
NoGrad::~NoGrad() { --no_grad_depth; }
bool grad_enabled() { return no_grad_depth == 0; }

// ---- the engine's hooks --------------------------------------------------------------------------
GraphsToKeep detail::prepare_realize(std::vector<std::shared_ptr<TensorNode>>& nodes) {
  for (auto& p : Tracked::get().take_pending())
    if (!is_buffer_view(p->uop) && std::find(nodes.begin(), nodes.end(), p) == nodes.end())
      nodes.push_back(std::move(p));
  // Nothing to compute (realizing a realized tensor): no graph to keep, and no index to build.
  if (std::all_of(nodes.begin(), nodes.end(), [](const auto& n) { return is_buffer_view(n->uop); }))
    return {};
  const Index idx = index_tracked();
  GraphsToKeep kept;
  if (idx.leaves.empty()) return kept;
  for (const auto& n : nodes)
    if (!n->backward_done && !is_buffer_view(n->uop) && depends_on_leaf(*n, idx))
      kept.emplace_back(n, n->uop);
  return kept;
}

void detail::keep_graphs(const GraphsToKeep& kept) {
  for (const auto& [node, graph] : kept)
    if (is_buffer_view(node->uop)) Tracked::get().keep(identity(node->uop), graph);
}

void detail::forget_graph_behind(const UOpPtr& view) {
  if (is_buffer_view(view)) Tracked::get().forget(identity(view));
}

}  // namespace loom
