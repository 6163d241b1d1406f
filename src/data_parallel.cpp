// loom::dist::DataParallel: rank 0's parameters everywhere, then gradients
// averaged across ranks by backward(), one lazy all-reduce per bucket
// (src/data_parallel.hpp, docs/distributed.md).
#include "src/data_parallel.hpp"

#include "src/tensor_ops.hpp"

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

namespace {
// A gradient's slot in its bucket: its elements rounded up to a multiple of 16, so
// every parameter's part starts 64-byte aligned (a Float32 cache line) and the
// kernels reading it back vectorise as they would on a buffer of its own.
int64_t slot(int64_t elements) { return (elements + 15) / 16 * 16; }
}  // namespace

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
      std::vector<Tensor> flat;
      for (const TensorNode* p : bucket) {
        const auto at = leaf_of.find(p);
        const Shape& shape = *p->uop->shape();
        const int64_t n = count(shape);
        const Tensor g = at != leaf_of.end() && grads[at->second]
                             ? make_tensor(grads[at->second]).reshape({-1})
                             : Tensor::zeros({n}, p->uop->dtype);
        flat.push_back(slot(n) == n ? g : g.pad({{0, slot(n) - n}}));
      }
      const Tensor mean = dist::all_reduce(flat.size() == 1 ? flat[0] : cat(flat), dist::Op::Mean);
      int64_t offset = 0;
      for (const TensorNode* p : bucket) {
        const Shape& shape = *p->uop->shape();
        const int64_t n = count(shape);
        if (const auto at = leaf_of.find(p); at != leaf_of.end())
          grads[at->second] = mean.slice(0, offset, offset + n).reshape(shape).node()->uop;
        offset += slot(n);
      }
    }
}

}  // namespace detail

}  // namespace loom
