#pragma once
// Views that write through, as PyTorch's views share storage.
//
// A tensor made by a view op (reshape, view-like squeeze/unsqueeze/flatten,
// permute/transpose, expand, shrink/slice) remembers its base (the tensor it
// was cut from, followed to the root) and the movement steps from the base's
// value to its own. Then:
//   - an assign into the view assigns the base, with the view's elements
//     replaced:  base := where(mask, scatter(value), base), scatter and mask
//     being the steps inverted (a shrink's inverse is a pad, a permute's the
//     inverse permute, ...);
//   - whenever the base's value changes (assign, realize, a Capture replay)
//     every live view is rebuilt as its steps applied to the base's new UOp.
// Copies (pad, flip, repeat, contiguous, clone, gather) are not views, as in PyTorch.
//
//   Tensor cache = Tensor::zeros({4, 8});
//   cache.slice(0, 1, 2).assign(row);     // cache := where(rows == 1, pad(row), cache)
#include "src/tensor_node.hpp"

namespace loom::detail {

// `result` (a UOp built from `source`'s by `step`) as a tensor that views `source`'s base.
Tensor view_tensor(const Tensor& source, ViewStep step, UOpPtr result);

// Assigns `value` (checked: the view's shape and dtype) through the view `node` into its base.
void assign_through_view(TensorNode& node, const UOpPtr& value);

// Points `node` at `uop` and rebuilds its views from it: all of them for a new value
// (an assign, a Capture replay), and for the same value realized only those not already
// realized themselves (a realized tensor stays a view of its own buffer).
enum class NewUOp { value, realized };
void point_at(TensorNode& node, UOpPtr uop, NewUOp what);

// For one realize: the views of the tensors being realized (and not realized themselves)
// hold no UOp, so they do not count as later readers of a buffer assigned in place
// (src/in_place.hpp): point_at rebuilds them from the results, or, if the realize
// fails, this from the unchanged bases. (Keeping their UOps here would count as a reader.)
class ViewsSetAside {
 public:
  explicit ViewsSetAside(const std::vector<std::shared_ptr<TensorNode>>& pending);
  ~ViewsSetAside();
  ViewsSetAside(const ViewsSetAside&) = delete;
  ViewsSetAside& operator=(const ViewsSetAside&) = delete;

 private:
  std::vector<std::shared_ptr<TensorNode>> aside_;
};

}  // namespace loom::detail
