#include "ir/collective.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace loom {

std::vector<int64_t> collective_ints(const CollectiveArg& c) {
  return {static_cast<int64_t>(c.kind), static_cast<int64_t>(c.reduce), c.root, c.ranks};
}

CollectiveArg collective_arg(const UOp& node) {
  if (node.op != Op::COLLECTIVE)
    throw Error(fmt::format("collective_arg: a {} node is no COLLECTIVE", op_name(node.op)));
  const auto& v = node.get<std::vector<int64_t>>();
  if (v.size() != 4 || v[0] < 0 || v[0] > 4 || v[1] < 0 || v[1] > 1)
    throw Error("COLLECTIVE: expected the arg (kind reduce root ranks), kind 0-4 and reduce 0-1");
  return {static_cast<CollectiveKind>(v[0]), static_cast<CollectiveReduce>(v[1]), v[2], v[3]};
}

UOpPtr collective(const UOpPtr& x, const CollectiveArg& c) {
  return UOp::make(Op::COLLECTIVE, x->dtype, {x}, collective_ints(c));
}

UOpPtr collective_bucket(const std::vector<UOpPtr>& parts, const CollectiveArg& c) {
  if (parts.empty()) throw Error("collective_bucket: expected at least one part");
  if (parts.size() == 1) return collective(parts[0], c);
  if (c.kind != CollectiveKind::AllReduce)
    throw Error(fmt::format("collective_bucket: {} of {} parts; only all_reduce takes a bucket",
                            collective_name(c), parts.size()));
  return UOp::make(Op::COLLECTIVE, parts[0]->dtype, parts, collective_ints(c));
}

BucketLayout bucket_layout(const std::vector<UOpPtr>& parts) {
  BucketLayout out;
  for (const UOpPtr& p : parts) {
    if (!p->shape()) throw Error(fmt::format("bucket_layout: a {} part has no shape", op_name(p->op)));
    int64_t n = 1;
    for (const int64_t d : *p->shape()) n *= d;
    const auto line = std::max<int64_t>(1, 64 / static_cast<int64_t>(p->dtype.itemsize()));
    out.offsets.push_back(out.elements);
    out.elements += (n + line - 1) / line * line;
  }
  return out;
}

int64_t collective_block(const CollectiveArg& c, int64_t output_elements) {
  return c.kind == CollectiveKind::AllGather ? output_elements / c.ranks : output_elements;
}

std::string collective_name(const CollectiveArg& c) {
  switch (c.kind) {
    case CollectiveKind::AllReduce:
      return c.reduce == CollectiveReduce::Sum ? "all_reduce(sum)" : "all_reduce(max)";
    case CollectiveKind::Broadcast: return fmt::format("broadcast(root {})", c.root);
    case CollectiveKind::Reduce: return fmt::format("reduce(root {})", c.root);
    case CollectiveKind::AllGather: return fmt::format("all_gather({} ranks)", c.ranks);
    case CollectiveKind::ReduceScatter: return fmt::format("reduce_scatter({} ranks)", c.ranks);
  }
  return "collective";
}

}  // namespace loom
