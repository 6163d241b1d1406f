#pragma once
// What a COLLECTIVE node does across the processes of a job (docs/distributed.md):
// its kind, the reduction, the root rank and the job's size. The node's arg holds
// these as ints, so the graph prints, parses, hashes and keys the schedule cache
// like any other.
//
//   all_reduce(x, Sum)  every rank gets the elementwise sum of all ranks' x
//   all_reduce(x, Max)  ... their maximum
//   broadcast(x, root)  every rank gets root's x
//   reduce(x, root)     root gets the sum of all ranks' x, every other rank zeros
//                       (broadcast's gradient)
//   all_gather(x)       shape S -> [ranks] + S: row r is rank r's x
//   reduce_scatter(x)   shape [ranks] + S -> S: rank r gets the sum of all ranks' row r
//                       (each the other's gradient; loom::dist moves the gathered
//                       axis to where the user asked)
//   all_reduce(x0, x1, ...)  a bucket: one flat tensor, each x_i's elements at its
//                       offset in bucket_layout(), all reduced in one collective
//                       (DataParallel's gradients; the plan copies each x_i in
//                       and runs it in place, src/plan.hpp)
#include "ir/uop.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

enum class CollectiveKind : int64_t { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter };
enum class CollectiveReduce : int64_t { Sum, Max };

struct CollectiveArg {
  CollectiveKind kind = CollectiveKind::AllReduce;
  CollectiveReduce reduce = CollectiveReduce::Sum;
  int64_t root = 0;   // Broadcast and Reduce
  int64_t ranks = 1;  // the job's size: AllGather's and ReduceScatter's leading axis
  friend bool operator==(const CollectiveArg&, const CollectiveArg&) = default;
};

// The arg of a COLLECTIVE node, and back (a loom::Error for a node that is none).
std::vector<int64_t> collective_ints(const CollectiveArg& c);
CollectiveArg collective_arg(const UOp& node);

// COLLECTIVE(x) with `c`: x's dtype, and its shape but for all_gather's and
// reduce_scatter's leading axis.
UOpPtr collective(const UOpPtr& x, const CollectiveArg& c);

// all_reduce of `parts` (at least one, one dtype) as one bucket: a flat tensor of
// bucket_layout(parts).elements. A single part is collective(part, c).
UOpPtr collective_bucket(const std::vector<UOpPtr>& parts, const CollectiveArg& c);

// Where each part of a bucket starts (in elements), and the bucket's size: each
// part's slot rounded up to 64 bytes, so every part starts on a cache line and the
// kernels reading it back vectorise as they would on a buffer of its own.
struct BucketLayout {
  std::vector<int64_t> offsets;
  int64_t elements = 0;
};
BucketLayout bucket_layout(const std::vector<UOpPtr>& parts);

// The elements each rank sends or receives in one block: all_gather's input,
// reduce_scatter's output, else the whole of `output_elements`.
int64_t collective_block(const CollectiveArg& c, int64_t output_elements);

// "all_reduce(sum)", "broadcast(root 0)", "all_gather(2 ranks)": for names and errors.
std::string collective_name(const CollectiveArg& c);

}  // namespace loom
