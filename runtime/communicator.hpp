#pragma once
// The processes of a job and the collectives between them (docs/distributed.md).
// Built on MPI (communicator_mpi.cpp) when loom is configured with LOOM_MPI, else a
// world of one process (communicator_local.cpp). The state is the process's own
// (MPI's, or whether init ran): there is one job per process.
#include "ir/collective.hpp"

#include <loom/dtype.hpp>

#include <cstdint>
#include <memory>

namespace loom::comm {

// Joins the job (MPI_Init_thread unless MPI is already initialised). `argc` and
// `argv` may be null. Throws loom::Error when MPI fails to start.
void init(int* argc, char*** argv);
// Leaves the job (MPI_Finalize, when init started MPI). Collectives are errors after.
void finalize();
// Between init and finalize (or MPI initialised by the program itself).
bool initialized();
// Throws loom::Error naming `what` unless initialized(): a collective needs a job.
void require_job(const char* what);

// This process's rank and the job's size; `what` names the caller in the error
// thrown when the job is not initialised.
int rank(const char* what);
int world_size(const char* what);
void barrier(const char* what);

// A collective in flight: started by start_collective, ended by wait. Its
// buffers must stay untouched (and alive) until then. The state is the
// communicator's own (MPI's request).
struct RequestState;
struct Request {
  std::shared_ptr<RequestState> state;  // null: nothing in flight
};

// Starts collective `c` on `dtype` elements, `elements` of them in `out`: reads
// `in` (the same memory: in place; all_gather's holds elements / ranks,
// reduce_scatter's elements * ranks), writes `out` by the time wait returns
// (MPI_Iallreduce and the like). Every rank of the job must start the same
// collectives in the same order. Throws loom::Error naming the collective when
// the job is not initialised, the dtype has no reduction, or MPI fails.
Request start_collective(const CollectiveArg& c, const void* in, void* out, DType dtype, int64_t elements);
// Lets the communicator move the collective on (MPI progresses non-blocking
// collectives only inside its calls: the executor calls this between kernels);
// true once it has ended.
bool test(Request& r);
// Returns when the collective has ended on this rank. It polls (MPI_Test) for at
// most LOOM_DIST_TIMEOUT seconds: a rank that never joins (dead, hung, or on
// another path of the program) does not block the others forever. On expiry it
// logs an error naming this rank, the collective and the wait, and ends the
// whole job with a non-zero exit (MPI_Abort), so no process is left behind.
// A rank on this host whose process has ended is seen sooner (within 50 ms):
// the error then names the dead rank.
void wait(Request& r);

// start_collective and wait at once: the blocking collective.
void run_collective(const CollectiveArg& c, const void* in, void* out, DType dtype, int64_t elements);

}  // namespace loom::comm
