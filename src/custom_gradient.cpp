// The table of declared gradients (src/custom_gradient.hpp): node -> inputs and backward,
// weakly keyed and pruned as nodes die, as the leaves of src/autograd.cpp. Thread-safe; the
// lock is never held while a backward builds its graph (which may declare more).
#include "src/custom_gradient.hpp"

#include "src/tensor_node.hpp"
#include "src/tensor_ops.hpp"

#include <memory>
#include <mutex>
#include <unordered_map>

namespace loom::detail {

namespace {

struct Declared {
  std::weak_ptr<const UOp> node;
  // Weak too: the node's graph holds its inputs while it lives, and a dead entry waiting to be
  // pruned must not keep a step's activations (and their buffers) alive.
  std::vector<std::weak_ptr<const UOp>> inputs;
  Shape output_shape;  // the shape the backward's gradient has (the node may be its reshape's source)
  CustomBackward backward;
};

class Table {
 public:
  static Table& get() {
    static Table* t = new Table();  // never destroyed: tensors may outlive statics
    return *t;
  }
  void add(Declared d) {
    std::lock_guard lock(mu_);
    const UOp* key = d.node.lock().get();
    entries_.insert_or_assign(key, std::move(d));
    if (entries_.size() < prune_at_) return;
    std::erase_if(entries_, [](const auto& e) { return e.second.node.expired(); });
    prune_at_ = std::max<size_t>(64, 2 * entries_.size());
  }
  // The live declaration of `u`: its backward and shape, and its inputs locked.
  struct Found {
    CustomBackward backward;
    Shape output_shape;
    std::vector<UOpPtr> inputs;
  };
  std::optional<Found> find(const UOpPtr& u) {
    std::lock_guard lock(mu_);
    auto it = entries_.find(u.get());
    if (it == entries_.end() || it->second.node.lock() != u) return std::nullopt;
    Found found{it->second.backward, it->second.output_shape, {}};
    for (const auto& w : it->second.inputs) {
      found.inputs.push_back(w.lock());
      // Not reachable from the live node: the graph's own gradient (the same values) applies.
      if (!found.inputs.back()) return std::nullopt;
    }
    return found;
  }

 private:
  std::mutex mu_;
  std::unordered_map<const UOp*, Declared> entries_;
  size_t prune_at_ = 64;
};

// The node a graph built on the output contains: reshapes of a reshape collapse onto its
// source (src/tensor_ops.hpp), so a reshape is keyed by its source.
const UOpPtr& key_of(const UOpPtr& u) { return u->op == Op::RESHAPE ? u->src[0] : u; }

Tensor wrap(const UOpPtr& u) { return Tensor(std::make_shared<TensorNode>(u)); }

}  // namespace

Tensor with_gradient(const Tensor& output, const std::vector<Tensor>& inputs, CustomBackward backward) {
  const UOpPtr& out = uop(output, "with_gradient");
  const UOpPtr& key = key_of(out);
  if (key->op == Op::CONST || key->op == Op::BUFFER || key->op == Op::DETACH || !key->dtype.is_float())
    return output;
  Declared d{key, {}, *out->shape(), std::move(backward)};
  for (const Tensor& t : inputs) d.inputs.push_back(uop(t, "with_gradient"));
  Table::get().add(std::move(d));
  return output;
}

std::optional<CustomEdge> custom_gradient_of(const UOpPtr& u) {
  auto found = Table::get().find(u);
  if (!found) return std::nullopt;
  CustomEdge e;
  e.inputs = found->inputs;
  // The walk checks each part's shape and dtype against its input's.
  e.vjp = [decl = std::move(*found)](const UOpPtr& g) {
    std::vector<Tensor> in;
    for (const UOpPtr& x : decl.inputs) in.push_back(wrap(x));
    const std::vector<Tensor> parts = decl.backward(in, wrap(reshape_uop(g, decl.output_shape)));
    std::vector<UOpPtr> out;
    for (size_t i = 0; i < decl.inputs.size(); ++i)
      out.push_back(i < parts.size() && parts[i].defined() ? parts[i].node()->uop : nullptr);
    return out;
  };
  return e;
}

}  // namespace loom::detail
