// loom::dist::DataParallel: rank 0's parameters everywhere, then gradients
// averaged across ranks by backward(), one lazy all-reduce per bucket
// (src/data_parallel.hpp, docs/distributed.md).
#include "src/data_parallel.hpp"

#include "src/tensor_ops.hpp"

#include "ir/collective.hpp"

#include <loom/dist.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace loom {

namespace dist {

DataParallel::DataParallel(std::vector<Tensor> parameters, int64_t bucket_bytes)
    : parameters_(std::move(parameters)) {
  for (size_t i = 0; i < parameters_.size(); ++i)
    if (!parameters_[i].defined())
      throw Error("DataParallel: parameter " + std::to_string(i) + " is an undefined tensor");
  if (bucket_bytes < 1)
    throw Error(fmt::format("DataParallel: bucket_bytes is {}; expected at least 1 (a bucket's bytes)",
                            bucket_bytes));
  for (Tensor& p : parameters_) p.assign(broadcast(p, 0));
  realize(parameters_);
  // Buckets from the last parameter backwards, as PyTorch fills them: a bucket
  // is full when the next parameter would take it past bucket_bytes, or has
  // another dtype (a bucket is one buffer).
  auto buckets = std::make_shared<detail::GradientBuckets>();
  std::unordered_set<const detail::TensorNode*> seen;
  int64_t bytes = 0;
  for (size_t i = parameters_.size(); i-- > 0;) {
    const Tensor& p = parameters_[i];
    if (!p.node()->requires_grad || !p.dtype().is_float() || !seen.insert(p.node().get()).second) continue;
    const int64_t b = p.numel() * p.dtype().itemsize();
    const bool full = !buckets_.empty() &&
                      (bytes > bucket_bytes - b || parameters_[buckets_.back().back()].dtype() != p.dtype());
    if (buckets_.empty() || full) {
      buckets_.emplace_back();
      buckets->buckets.emplace_back();
      bytes = 0;
    }
    buckets_.back().push_back(i);
    buckets->buckets.back().push_back(p.node().get());
    bytes += b;
  }
  for (const auto& bucket : buckets_)
    for (size_t i : bucket) parameters_[i].node()->data_parallel = buckets;
  averaging_ = std::move(buckets);
}

}  // namespace dist

namespace detail {

void average_across_ranks(const std::vector<std::shared_ptr<TensorNode>>& leaves,
                          std::vector<UOpPtr>& grads) {
  std::unordered_map<const TensorNode*, size_t> leaf_of;
  std::vector<std::shared_ptr<const GradientBuckets>> groups;
  for (size_t i = 0; i < leaves.size(); ++i) leaf_of.emplace(leaves[i].get(), i);
  for (size_t i = 0; i < leaves.size(); ++i) {
    auto g = leaves[i]->data_parallel.lock();
    if (g && grads[i] && std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
  }
  for (const auto& group : groups)
    for (const auto& bucket : group->buckets) {
      std::vector<Tensor> parts;
      for (const TensorNode* p : bucket) {
        const auto at = leaf_of.find(p);
        parts.push_back(at != leaf_of.end() && grads[at->second]
                            ? make_tensor(grads[at->second])
                            : Tensor::zeros(*p->uop->shape(), p->uop->dtype));
      }
      const Tensor mean = all_reduce_mean_bucket(parts);
      std::vector<UOpPtr> nodes;
      for (const Tensor& t : parts) nodes.push_back(t.node()->uop);
      const BucketLayout layout = bucket_layout(nodes);
      for (size_t i = 0; i < bucket.size(); ++i)
        if (const auto at = leaf_of.find(bucket[i]); at != leaf_of.end()) {
          const Shape& shape = *bucket[i]->uop->shape();
          grads[at->second] =
              mean.slice(0, layout.offsets[i], layout.offsets[i] + count(shape)).reshape(shape).node()->uop;
        }
    }
}

}  // namespace detail

}  // namespace loom
