// loom::dist's front end: the job (runtime/communicator.hpp) and the collectives
// as COLLECTIVE nodes (ir/collective.hpp), which src/plan.cpp turns into plan items.
#include <loom/dist.hpp>

#include "ir/collective.hpp"
#include "ir/flags.hpp"
#include "runtime/communicator.hpp"
#include "src/data_parallel.hpp"
#include "src/dist_check.hpp"
#include "src/tensor_ops.hpp"

#include <fmt/format.h>

#include <string>

namespace loom::dist {

void init(int& argc, char**& argv) { comm::init(&argc, &argv); }
void finalize() { comm::finalize(); }
bool initialized() { return comm::initialized(); }

int rank() { return comm::rank("loom::dist::rank"); }
int world_size() { return comm::world_size("loom::dist::world_size"); }
void barrier() { comm::barrier("loom::dist::barrier"); }

namespace {
// The tensor's node, checked: a job to run in, a dtype the collective takes, and
// under LOOM_DIST_CHECK the same call on every rank. `call` names the call as
// the user wrote it, "all_reduce(mean)".
const UOpPtr& collective_input(const Tensor& t, const char* what, bool reduces, const std::string& call) {
  const UOpPtr& x = detail::uop(t, what);
  if (!comm::initialized())
    throw Error(
        fmt::format("{}: loom::dist::init has not been called; a collective needs a job "
                    "(docs/distributed.md)",
                    what));
  if (reduces && x->dtype.is_bool())
    throw Error(fmt::format("{}: a {} tensor of shape {} cannot be reduced (expected a number dtype)", what,
                            to_string(x->dtype), detail::str(*x->shape())));
  if (flags()->dist_check) detail::check_collective_call({call, x->dtype, concrete(*x->shape(), what)});
  return x;
}

const char* reduce_op_name(Op op) { return op == Op::Sum ? "sum" : op == Op::Mean ? "mean" : "max"; }

// MPI has no half-precision arithmetic: the ranks' halves are reduced in Float32
// and the result rounded once, as a half elementwise op rounds (docs/semantics.md).
bool reduced_in_float32(const Tensor& t) { return t.defined() && t.dtype().is_half(); }

}  // namespace

Tensor all_reduce(const Tensor& t, Op op) {
  if (reduced_in_float32(t)) return all_reduce(t.cast(DType::Float32), op).cast(t.dtype());
  const UOpPtr& x =
      collective_input(t, "all_reduce", true, fmt::format("all_reduce({})", reduce_op_name(op)));
  if (op == Op::Mean && !x->dtype.is_float())
    throw Error(fmt::format("all_reduce: Op::Mean of a {} tensor of shape {} (expected a floating dtype)",
                            to_string(x->dtype), detail::str(*x->shape())));
  const CollectiveReduce r = op == Op::Max ? CollectiveReduce::Max : CollectiveReduce::Sum;
  // Under LOOM_DIST_DETERMINISTIC the communicator adds float sums in rank order
  // (runtime/communicator_mpi.cpp): the graph, and so the plan, are the same either way.
  Tensor out = detail::make_tensor(collective(x, {CollectiveKind::AllReduce, r, 0, world_size()}));
  return op == Op::Mean ? out / static_cast<double>(world_size()) : out;
}

}  // namespace loom::dist

namespace loom::detail {

Tensor all_reduce_mean_bucket(const std::vector<Tensor>& parts) {
  if (parts.size() == 1) return dist::all_reduce(parts[0], dist::Op::Mean);
  if (!parts.empty() && dist::reduced_in_float32(parts[0])) {
    std::vector<Tensor> wide;
    for (const Tensor& t : parts) wide.push_back(t.cast(DType::Float32));
    return all_reduce_mean_bucket(wide).cast(parts[0].dtype());
  }
  std::vector<UOpPtr> xs;
  for (const Tensor& t : parts) xs.push_back(detail::uop(t, "all_reduce"));
  const UOpPtr bucket =
      collective_bucket(xs, {CollectiveKind::AllReduce, CollectiveReduce::Sum, 0, dist::world_size()});
  const Tensor sum = make_tensor(bucket);
  // The job, and LOOM_DIST_CHECK's comparison across ranks, on the bucket as a whole.
  dist::collective_input(sum, "all_reduce", true, "all_reduce(mean)");
  return sum / static_cast<double>(dist::world_size());
}

}  // namespace loom::detail

namespace loom::dist {

Tensor broadcast(const Tensor& t, int root) {
  const UOpPtr& x = collective_input(t, "broadcast", false, fmt::format("broadcast(root {})", root));
  if (root < 0 || root >= world_size())
    throw Error(
        fmt::format("broadcast: root {} is no rank of this job (expected 0 to {})", root, world_size() - 1));
  return detail::make_tensor(
      collective(x, {CollectiveKind::Broadcast, CollectiveReduce::Sum, root, world_size()}));
}

namespace {
// `dim` of a tensor of `shape`, counted from the end when negative.
int64_t axis_of(const char* what, const Shape& shape, int64_t dim) {
  const auto rank = static_cast<int64_t>(shape.size());
  if (rank == 0 || dim < -rank || dim >= rank)
    throw Error(fmt::format("{}: dim {} is out of range for a tensor of shape {} (expected {} to {})", what,
                            dim, detail::str(shape), -rank, rank - 1));
  return dim < 0 ? dim + rank : dim;
}
}  // namespace

// The COLLECTIVE gathers a row per rank in front ([ranks] + shape); the rows then
// move to just before `dim` and merge with it, so rank r's block is rows
// [r * n, (r + 1) * n) of `dim`.
Tensor all_gather(const Tensor& t, int64_t dim) {
  const UOpPtr& x = collective_input(t, "all_gather", false, fmt::format("all_gather(dim {})", dim));
  const Shape& shape = *x->shape();
  const int64_t d = axis_of("all_gather", shape, dim);
  const int n = world_size();
  const Tensor rows =
      detail::make_tensor(collective(x, {CollectiveKind::AllGather, CollectiveReduce::Sum, 0, n}));
  std::vector<int> order;
  for (int64_t i = 1; i <= d; ++i) order.push_back(static_cast<int>(i));
  order.push_back(0);
  for (int64_t i = d + 1; i <= static_cast<int64_t>(shape.size()); ++i) order.push_back(static_cast<int>(i));
  Shape out = shape;
  out[static_cast<size_t>(d)] *= n;
  return rows.permute(order).reshape(out);
}

// `dim` splits into (ranks, its size / ranks) and the ranks axis moves to the
// front, where the COLLECTIVE sums each row across ranks and keeps this rank's.
Tensor reduce_scatter(const Tensor& t, int64_t dim) {
  if (reduced_in_float32(t)) return reduce_scatter(t.cast(DType::Float32), dim).cast(t.dtype());
  const UOpPtr& x = collective_input(t, "reduce_scatter", true, fmt::format("reduce_scatter(dim {})", dim));
  const Shape& shape = *x->shape();
  const int64_t d = axis_of("reduce_scatter", shape, dim);
  const int n = world_size();
  if (shape[static_cast<size_t>(d)] % n != 0)
    throw Error(
        fmt::format("reduce_scatter: dim {} of shape {} has size {}, which {} ranks cannot split "
                    "evenly (expected a multiple of {})",
                    dim, detail::str(shape), shape[static_cast<size_t>(d)], n, n));
  Shape split = shape;
  split[static_cast<size_t>(d)] /= n;
  split.insert(split.begin() + d, n);
  std::vector<int> order{static_cast<int>(d)};
  for (int64_t i = 0; i < static_cast<int64_t>(split.size()); ++i)
    if (i != d) order.push_back(static_cast<int>(i));
  const Tensor rows = t.reshape(split).permute(order);
  return detail::make_tensor(collective(detail::uop(rows, "reduce_scatter"),
                                        {CollectiveKind::ReduceScatter, CollectiveReduce::Sum, 0, n}));
}

}  // namespace loom::dist
