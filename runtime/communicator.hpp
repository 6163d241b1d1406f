#pragma once
// The processes of a job and the collectives between them (docs/distributed.md).
// Built on MPI (communicator_mpi.cpp) when loom is configured with LOOM_MPI, else a
// world of one process (communicator_local.cpp). The state is the process's own
// (MPI's, or whether init ran): there is one job per process.
#include "ir/collective.hpp"

#include <loom/dtype.hpp>

#include <cstdint>

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

// Runs collective `c` on `dtype` elements, `elements` of them in `out`: reads
// `in` (the same memory: in place; all_gather's holds elements / ranks,
// reduce_scatter's elements * ranks), writes `out`. Every rank of the job must run the same
// collectives in the same order. Throws loom::Error naming the collective when
// the job is not initialised, the dtype has no reduction, or MPI fails.
void run_collective(const CollectiveArg& c, const void* in, void* out, DType dtype, int64_t elements);

}  // namespace loom::comm
