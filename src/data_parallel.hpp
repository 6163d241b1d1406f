#pragma once
// DataParallel's side of backward() (docs/distributed.md): the parameters a
// DataParallel covers point at its buckets, and backward() replaces their
// gradients with the mean across ranks, one all-reduce per bucket. Before/after,
// for a bucket of w (2 x 3) and b (3):
//   grad w = gw, grad b = gb
//   -> m = all_reduce(gw, gb) / ranks   (a bucket, ir/collective.hpp: its plan item
//                                        copies gw and gb in, src/plan.hpp)
//      grad w = m[0:6].reshape(2, 3), grad b = m[16:19]
// (each gradient's slot a multiple of 64 bytes: every part starts on a cache line)
#include "src/tensor_node.hpp"

#include <memory>
#include <vector>

namespace loom::detail {

struct GradientBuckets {
  // Each bucket's parameters, in the order their all-reduces start; the
  // DataParallel holding this keeps them alive.
  std::vector<std::vector<const TensorNode*>> buckets;
};

// `grads[i]` (null: none) is this backward's gradient of `leaves[i]`, in its
// shape. Where a leaf points at live buckets, and one of their parameters got a
// gradient, every bucket of theirs is averaged across ranks (a parameter without
// a gradient adds zeros, so every rank runs the same all-reduces), and each
// covered leaf's gradient becomes its part of the mean.
// The mean across ranks of every one of `parts` (one dtype) in one collective: a
// flat tensor laid out by ir/collective.hpp's bucket_layout (src/dist.cpp).
Tensor all_reduce_mean_bucket(const std::vector<Tensor>& parts);

void average_across_ranks(const std::vector<std::shared_ptr<TensorNode>>& leaves, std::vector<UOpPtr>& grads);

}  // namespace loom::detail
