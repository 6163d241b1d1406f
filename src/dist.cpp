// loom::dist's front end: the job (runtime/communicator.hpp) and the collectives
// as COLLECTIVE nodes (ir/collective.hpp), which src/plan.cpp turns into plan items.
#include <loom/dist.hpp>

#include "ir/collective.hpp"
#include "runtime/communicator.hpp"
#include "src/tensor_ops.hpp"

#include <fmt/format.h>

namespace loom::dist {

void init(int& argc, char**& argv) { comm::init(&argc, &argv); }
void finalize() { comm::finalize(); }
bool initialized() { return comm::initialized(); }

int rank() { return comm::rank("loom::dist::rank"); }
int world_size() { return comm::world_size("loom::dist::world_size"); }
void barrier() { comm::barrier("loom::dist::barrier"); }

namespace {
// The tensor's node, checked: a job to run in, a dtype the collective takes.
const UOpPtr& collective_input(const Tensor& t, const char* what, bool reduces) {
  const UOpPtr& x = detail::uop(t, what);
  if (!comm::initialized())
    throw Error(
        fmt::format("{}: loom::dist::init has not been called; a collective needs a job "
                    "(docs/distributed.md)",
                    what));
  if (reduces && x->dtype.is_bool())
    throw Error(fmt::format("{}: a {} tensor of shape {} cannot be reduced (expected a number dtype)", what,
                            to_string(x->dtype), detail::str(*x->shape())));
  return x;
}
}  // namespace

Tensor all_reduce(const Tensor& t, Op op) {
  const UOpPtr& x = collective_input(t, "all_reduce", true);
  if (op == Op::Mean && !x->dtype.is_float())
    throw Error(fmt::format("all_reduce: Op::Mean of a {} tensor of shape {} (expected a floating dtype)",
                            to_string(x->dtype), detail::str(*x->shape())));
  const CollectiveReduce r = op == Op::Max ? CollectiveReduce::Max : CollectiveReduce::Sum;
  Tensor out = detail::make_tensor(collective(x, {CollectiveKind::AllReduce, r, 0}));
  return op == Op::Mean ? out / static_cast<double>(world_size()) : out;
}

Tensor broadcast(const Tensor& t, int root) {
  const UOpPtr& x = collective_input(t, "broadcast", false);
  if (root < 0 || root >= world_size())
    throw Error(
        fmt::format("broadcast: root {} is no rank of this job (expected 0 to {})", root, world_size() - 1));
  return detail::make_tensor(collective(x, {CollectiveKind::Broadcast, CollectiveReduce::Sum, root}));
}

}  // namespace loom::dist
