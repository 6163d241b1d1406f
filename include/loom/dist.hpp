#pragma once
// loom::dist: data parallelism across the processes of a job launched by MPI's
// mpirun (docs/distributed.md). The collectives are lazy graph nodes like any op:
// gradients flow through them, and a realize runs each as an item of its plan
// between the kernels that produce its input and those that read its result.
//
//   int main(int argc, char** argv) {
//     loom::dist::Process job(argc, argv);  // MPI_Init ... MPI_Finalize
//     loom::Tensor g = loom::dist::all_reduce(local_gradient, loom::dist::Op::Mean);
//   }
//
// Every rank must realize the same collectives in the same order (the same
// graphs, as data-parallel training does). Built without MPI (LOOM_MPI off), a
// job is one process: rank 0 of a world of 1.
#include <loom/checkpoint.hpp>
#include <loom/tensor.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

namespace loom::detail {
struct GradientBuckets;  // src/data_parallel.hpp
}

namespace loom::dist {

// Joins the job (MPI_Init_thread, unless the program initialised MPI itself).
// Call it once, before any collective; again is a no-op.
void init(int& argc, char**& argv);
// Leaves the job (MPI_Finalize, when init started MPI). No collective may follow.
void finalize();
bool initialized();

// init on construction, finalize on destruction.
class Process {
 public:
  Process(int& argc, char**& argv) { init(argc, argv); }
  // A destructor must not throw: a failing MPI_Finalize at the end of the job is ignored.
  ~Process() {
    try {
      finalize();
    } catch (...) {
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
};

// This process's rank in [0, world_size()), and the number of processes; throw
// loom::Error before init.
int rank();
int world_size();
// Returns when every rank has called it.
void barrier();

enum class Op { Sum, Mean, Max };

// Every rank gets the elementwise sum, mean (floating dtypes) or maximum of all
// ranks' `t`, which must have the same shape and dtype on every rank.
Tensor all_reduce(const Tensor& t, Op op = Op::Sum);
// Every rank gets rank `root`'s `t`; the others' values are ignored, their
// shape and dtype must match.
Tensor broadcast(const Tensor& t, int root = 0);
// Every rank gets all ranks' `t` joined along `dim` (negative counts from the
// end), rank r's at [r * n, (r + 1) * n) where n is t's size there.
Tensor all_gather(const Tensor& t, int64_t dim = 0);
// Sums all ranks' `t` and gives rank r block r of `dim` (of size n / world_size,
// n a multiple of it): the gradient of all_gather, and all_gather is its.
Tensor reduce_scatter(const Tensor& t, int64_t dim = 0);

// A checkpoint in a job: every rank realizes `tensors` (they may hold
// collectives, which every rank must run), rank 0 alone writes them
// (loom::save), and no rank returns before the file is complete, so a
// loom::load after it reads the whole file on any rank that sees rank 0's file
// system. A failure to write is a loom::Error on every rank. Reading needs
// nothing of the kind: every rank calls loom::load.
void save(const std::filesystem::path& path, const NamedTensors& tensors);

// Data parallelism over a model's parameters (a list of tensors, as
// Module::parameters() gives): each rank trains on its own shard of the batch, and
//
//   loom::dist::DataParallel ddp(model.parameters());  // every rank starts from rank 0's values
//   for (...) { opt.zero_grad(); loss(shard).backward(); opt.step(); }
//
// keeps the ranks' parameters equal: from then on, backward() gives each of these
// parameters the mean of every rank's gradient (with equal shards and a mean
// loss, the whole batch's). The gradients travel in buckets of about
// `bucket_bytes`, one all-reduce each, filled from the last parameter backwards
// (the last layers' gradients are ready first in the backward pass). The
// all-reduces are lazy: they join the step's schedule, where each starts as
// soon as the kernels computing its bucket have run and the rest of the
// backward pass runs while it travels (docs/distributed.md).
class DataParallel {
 public:
  static constexpr int64_t kDefaultBucketBytes = int64_t{25} << 20;  // PyTorch's default
  // Broadcasts every parameter from rank 0 into the parameter itself (assign),
  // realized before it returns, and groups the float parameters that require
  // a gradient into buckets (at least 1 byte: a parameter larger than the
  // bucket is a bucket of its own; INT64_MAX: one bucket, one all-reduce).
  explicit DataParallel(std::vector<Tensor> parameters, int64_t bucket_bytes = kDefaultBucketBytes);

  // Does nothing: backward() averages the gradients already. Kept for programs
  // written before it did (it used to be called between backward() and step()).
  void average_gradients() const {}

  const std::vector<Tensor>& parameters() const { return parameters_; }
  // Each bucket's parameters (indices into parameters()), in the order their
  // all-reduces start.
  const std::vector<std::vector<size_t>>& buckets() const { return buckets_; }

 private:
  std::vector<Tensor> parameters_;
  std::vector<std::vector<size_t>> buckets_;
  std::shared_ptr<const detail::GradientBuckets> averaging_;  // what the parameters' nodes point at
};

}  // namespace loom::dist
