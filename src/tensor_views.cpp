#include "src/tensor_views.hpp"

#include "schedule/schedule.hpp"
#include "src/tensor_ops.hpp"

#include <algorithm>
#include <utility>

namespace loom::detail {

namespace {

UOpPtr apply_step(const ViewStep& step, const UOpPtr& x) {
  switch (step.op) {
    case Op::RESHAPE: return reshape_uop(x, std::get<Shape>(step.arg));
    case Op::EXPAND: return expand_uop(x, std::get<Shape>(step.arg));
    default: return UOp::make(step.op, x->dtype, {x}, step.arg);
  }
}

UOpPtr replay(const std::vector<ViewStep>& steps, UOpPtr x) {
  for (const ViewStep& s : steps) x = apply_step(s, x);
  return x;
}

std::vector<std::pair<Dim, Dim>> pairs(const Shape& flat) {
  std::vector<std::pair<Dim, Dim>> out;
  for (size_t i = 0; i + 1 < flat.size(); i += 2) out.emplace_back(flat[i], flat[i + 1]);
  return out;
}

// `x`, of the shape after `step`, carried back to `before` (the shape before it): the
// positions the step took, with 0 (false for a mask) where it took nothing.
UOpPtr invert(const ViewStep& step, const UOpPtr& x, const Shape& before, const Shape& view) {
  switch (step.op) {
    case Op::RESHAPE: return reshape_uop(x, before);
    case Op::DETACH: return x;
    case Op::PERMUTE: {
      const auto& order = std::get<std::vector<int64_t>>(step.arg);
      std::vector<int64_t> back(order.size());
      for (size_t i = 0; i < order.size(); ++i) back[order[i]] = static_cast<int64_t>(i);
      return UOp::make(Op::PERMUTE, x->dtype, {x}, back);
    }
    case Op::EXPAND: {
      const Shape& after = *x->shape();
      const size_t lead = after.size() - before.size();
      for (size_t i = 0; i < after.size(); ++i)
        if (after[i] != (i < lead ? Dim(1) : before[i - lead]))
          throw Error(fmt::format(
              "assign: cannot write into a view of shape {} that expands shape {} (axis {}: {} elements of "
              "the view share one element of the tensor); write into the tensor itself or clone() it",
              str(view), str(before), i, after[i]));
      return reshape_uop(x, before);
    }
    case Op::SHRINK: {
      Shape padding;
      const auto bounds = pairs(std::get<Shape>(step.arg));
      for (size_t i = 0; i < bounds.size(); ++i) {
        padding.push_back(bounds[i].first);
        padding.push_back(before[i] - bounds[i].second);
      }
      return UOp::make(Op::PAD, x->dtype, {x}, padding);
    }
    case Op::PAD: {
      Shape bounds;
      const auto padding = pairs(std::get<Shape>(step.arg));
      for (size_t i = 0; i < padding.size(); ++i) {
        bounds.push_back(padding[i].first);
        bounds.push_back(padding[i].first + before[i]);
      }
      return UOp::make(Op::SHRINK, x->dtype, {x}, bounds);
    }
    default:
      throw Error(fmt::format("assign: internal error: view step {} has no inverse", op_name(step.op)));
  }
}

// The live views of `base`; the dead ones, and those that stand alone now, are dropped.
std::vector<std::shared_ptr<TensorNode>> live_views(TensorNode& base) {
  std::lock_guard lock(base.views_mutex);
  std::vector<std::shared_ptr<TensorNode>> out;
  std::vector<std::weak_ptr<TensorNode>> kept;
  for (const auto& w : base.views)
    if (auto v = w.lock(); v && v->view && v->view->base.get() == &base) {
      kept.push_back(w);
      out.push_back(std::move(v));
    }
  base.views = std::move(kept);
  return out;
}

}  // namespace

Tensor view_tensor(const Tensor& source, ViewStep step, UOpPtr result) {
  Tensor t = make_tensor(std::move(result));
  const auto& from = source.node();
  ViewOf link = from->view ? *from->view : ViewOf{from, {}};
  link.steps.push_back(std::move(step));
  if (t.node()->uop->op == Op::DETACH && link.steps.back().op != Op::DETACH)
    link.steps.push_back({Op::DETACH, {}});  // made under NoGrad: replays stay cut from the graph
  TensorNode& base = *link.base;
  t.node()->view = std::move(link);
  std::lock_guard lock(base.views_mutex);
  if (base.views.size() >= 16 && (base.views.size() & (base.views.size() - 1)) == 0)
    std::erase_if(base.views, [](const std::weak_ptr<TensorNode>& w) { return w.expired(); });
  base.views.push_back(t.node());
  return t;
}

void assign_through_view(TensorNode& node, const UOpPtr& value) {
  const ViewOf link = *node.view;  // a copy: the assign below rebuilds `node`
  // The base's value and the shape before each step.
  std::vector<Shape> before;
  UOpPtr x = link.base->uop;
  for (const ViewStep& s : link.steps) {
    before.push_back(*x->shape());
    x = apply_step(s, x);
  }
  const Shape& view = *x->shape();
  UOpPtr scattered = value, mask = const_tensor(1, DType::Bool, view);
  for (size_t i = link.steps.size(); i-- > 0;) {
    scattered = invert(link.steps[i], scattered, before[i], view);
    mask = invert(link.steps[i], mask, before[i], view);
  }
  Tensor base(link.base);
  base.assign(make_tensor(loom::where(mask, scattered, link.base->uop)));
}

void point_at(TensorNode& node, UOpPtr uop, NewUOp what) {
  node.uop = std::move(uop);
  // A view whose base nobody else holds can never see the base change: it stands alone,
  // and the base's graph is released with it.
  if (node.view && node.view->base.use_count() == 1) node.view.reset();
  for (const auto& v : live_views(node))
    if (what == NewUOp::value || !v->uop || !is_buffer_view(v->uop))
      v->uop = replay(v->view->steps, node.uop);
}

ViewsSetAside::ViewsSetAside(const std::vector<std::shared_ptr<TensorNode>>& pending) {
  for (const auto& node : pending) {
    if (node->view) continue;
    for (auto& v : live_views(*node))
      if (std::find(pending.begin(), pending.end(), v) == pending.end() && v->uop) {
        v->uop = nullptr;
        aside_.push_back(std::move(v));
      }
  }
}

ViewsSetAside::~ViewsSetAside() {
  for (const auto& view : aside_)
    if (!view->uop) view->uop = replay(view->view->steps, view->view->base->uop);
}

}  // namespace loom::detail
