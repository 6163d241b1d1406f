#pragma once
// What a COLLECTIVE node does across the processes of a job (docs/distributed.md):
// its kind, the reduction, and the root rank. The node's arg holds these as ints,
// so the graph prints, parses, hashes and keys the schedule cache like any other.
//
//   all_reduce(x, Sum)  every rank gets the elementwise sum of all ranks' x
//   all_reduce(x, Max)  ... their maximum
//   broadcast(x, root)  every rank gets root's x
//   reduce(x, root)     root gets the sum of all ranks' x, every other rank zeros
//                       (broadcast's gradient)
#include "ir/uop.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

enum class CollectiveKind : int64_t { AllReduce, Broadcast, Reduce };
enum class CollectiveReduce : int64_t { Sum, Max };

struct CollectiveArg {
  CollectiveKind kind = CollectiveKind::AllReduce;
  CollectiveReduce reduce = CollectiveReduce::Sum;
  int64_t root = 0;  // Broadcast and Reduce
  friend bool operator==(const CollectiveArg&, const CollectiveArg&) = default;
};

// The arg of a COLLECTIVE node, and back (a loom::Error for a node that is none).
std::vector<int64_t> collective_ints(const CollectiveArg& c);
CollectiveArg collective_arg(const UOp& node);

// COLLECTIVE(x) with `c`: same dtype and shape as x.
UOpPtr collective(const UOpPtr& x, const CollectiveArg& c);

// "all_reduce(sum)", "broadcast(root 0)", "reduce(root 1)": for names and errors.
std::string collective_name(const CollectiveArg& c);

}  // namespace loom
