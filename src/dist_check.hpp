#pragma once
// LOOM_DIST_CHECK (docs/distributed.md): before a loom::dist collective joins the
// graph, the ranks compare what each is about to run, so a rank whose tensor
// has another shape or dtype (or that calls another collective) is an error
// naming both ranks, instead of MPI reading past a buffer or hanging.
#include <loom/dtype.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace loom::detail {

// What one rank is about to run: `call` names it as the user wrote it
// ("all_reduce(mean)", "broadcast(root 1)", "all_gather(dim 0)").
struct CollectiveCall {
  std::string call;
  DType dtype;
  std::vector<int64_t> shape;
};

// Exchanges `mine` with every rank of the job (two small all-gathers of Int64,
// the second only when the first finds a difference) and throws loom::Error on
// every rank if any rank's call, dtype or shape differs. A job of one rank
// returns at once.
void check_collective_call(const CollectiveCall& mine);

}  // namespace loom::detail
