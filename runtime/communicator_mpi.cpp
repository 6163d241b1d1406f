// The communicator on MPI: MPI_COMM_WORLD, its collectives non-blocking
// (MPI_Iallreduce and the like, waited for by polling against LOOM_DIST_TIMEOUT)
// and, where the plan allows, in place (MPI_IN_PLACE).
#include "runtime/communicator.hpp"

#include "ir/flags.hpp"
#include "ir/log.hpp"

#include <loom/error.hpp>

#include <fmt/format.h>
#include <mpi.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>
#include <unistd.h>

namespace loom::comm {

namespace {
// Did init start MPI (so finalize ends it)? Set and read only by init and
// finalize, which the program calls from its main thread.
bool g_started = false;

// The other ranks on this host (same host name and pid namespace), whose
// processes a waiting rank can see end: a dead rank is named at once rather
// than after LOOM_DIST_TIMEOUT. Set once by init; ranks elsewhere are caught
// by the timeout alone.
struct Neighbour {
  int rank;
  pid_t pid;
};
std::vector<Neighbour> g_neighbours;
bool g_neighbours_known = false;

void check(int status, const std::string& what) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw Error(fmt::format("{}: MPI failed: {}", what, std::string(text, static_cast<size_t>(length))));
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype.scalar) {
    case Scalar::Bool: return MPI_C_BOOL;
    case Scalar::UInt8: return MPI_UINT8_T;
    case Scalar::Int32: return MPI_INT32_T;
    case Scalar::Int64: return MPI_INT64_T;
    case Scalar::Float32: return MPI_FLOAT;
    case Scalar::Float64: return MPI_DOUBLE;
    // Moved as their bits (broadcast, all_gather): MPI has no half arithmetic, and
    // loom::dist reduces halves in Float32 (src/dist.cpp).
    case Scalar::BFloat16:
    case Scalar::Float16: return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}
}  // namespace

struct RequestState {
  MPI_Request request = MPI_REQUEST_NULL;
  std::string what;      // the collective's name, for the timeout's error
  void* zero = nullptr;  // a reduce's non-root output, zeroed once it has ended
  size_t zero_bytes = 0;
  bool done = false;
  // LOOM_DIST_DETERMINISTIC: every rank's block as received (rank 0's first),
  // summed in rank order into `sum_out` once the exchange has ended.
  std::vector<std::byte> rows;
  void* sum_out = nullptr;
  DType sum_dtype = DType::Float32;
  int64_t sum_elements = 0;
  int ranks = 1;
};

namespace {
// Ends the whole job: a rank waited LOOM_DIST_TIMEOUT seconds for the others.
// Throwing would leave them blocked in the collective; MPI_Abort makes mpirun
// end every process with a non-zero exit.
[[noreturn]] void give_up(const std::string& what, double seconds) {
  int me = -1, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const std::string message = fmt::format(
      "{}: rank {} of {} waited {} s (LOOM_DIST_TIMEOUT) for the other ranks to join it, and they have "
      "not (a rank died, hangs, or runs other collectives); ending the job",
      what, me, n, seconds);
  log().error(message);
  log().flush();
  MPI_Abort(MPI_COMM_WORLD, 1);
  throw Error(message);  // MPI_Abort does not return; if it did, the error still stops this rank
}

// Ends the whole job: rank `dead` on this host has ended (killed, crashed, or
// exited) while this rank waited for it in `what`.
[[noreturn]] void dead_rank(const std::string& what, const Neighbour& dead) {
  int me = -1, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const std::string message = fmt::format(
      "{}: rank {} of {} (pid {}, on this host) has died or exited while rank {} waited for it; "
      "ending the job",
      what, dead.rank, n, dead.pid, me);
  log().error(message);
  log().flush();
  MPI_Abort(MPI_COMM_WORLD, 1);
  throw Error(message);
}

// Has process `pid` of this host ended? Gone, or a zombie its launcher has not
// reaped yet.
bool ended(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;  // no /proc: kill's answer stands
  const size_t paren = line.rfind(')');         // the state follows "pid (name)"
  return paren != std::string::npos && paren + 2 < line.size() &&
         (line[paren + 2] == 'Z' || line[paren + 2] == 'X');
}

std::optional<Neighbour> dead_neighbour() {
  for (const Neighbour& p : g_neighbours)
    if (ended(p.pid)) return p;
  return std::nullopt;
}

// out[i] = ((rows[0][i] + rows[1][i]) + rows[2][i]) + ...: a left fold in rank
// order, the same code and order on every rank (no -ffast-math here: the
// compiler may not reassociate, and vectorising over i keeps each element's order).
template <class T>
void sum_in_rank_order(const std::byte* rows, void* out, int64_t n, int ranks) {
  const T* in = reinterpret_cast<const T*>(rows);
  T* o = static_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) {
    T acc = in[i];
    for (int r = 1; r < ranks; ++r) acc += in[static_cast<int64_t>(r) * n + i];
    o[i] = acc;
  }
}

void finish(RequestState& s) {
  if (s.done) return;
  s.done = true;
  if (s.zero) std::memset(s.zero, 0, s.zero_bytes);
  if (s.sum_out) {
    if (s.sum_dtype == DType::Float64)
      sum_in_rank_order<double>(s.rows.data(), s.sum_out, s.sum_elements, s.ranks);
    else
      sum_in_rank_order<float>(s.rows.data(), s.sum_out, s.sum_elements, s.ranks);
    s.rows = {};
  }
}

// Polls `s` until it ends or LOOM_DIST_TIMEOUT seconds have passed, looking
// every 50 ms for a rank of this host that has ended.
void poll(RequestState& s) {
  if (s.done) return;
  const double seconds = flags()->dist_timeout;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(seconds);
  auto look = start + std::chrono::milliseconds(50);
  for (;;) {
    int done = 0;
    check(MPI_Test(&s.request, &done, MPI_STATUS_IGNORE), s.what);
    if (done) return finish(s);
    const auto now = std::chrono::steady_clock::now();
    if (now >= look) {
      if (const auto dead = dead_neighbour()) dead_rank(s.what, *dead);
      look = now + std::chrono::milliseconds(50);
    }
    if (now >= deadline) give_up(s.what, seconds);
    // The ranks may share cores with each other and with other work: past a short
    // spin, a rank waiting for a slower one sleeps between tests rather than hold a
    // core the others (and what else runs there) could use. A test every 50 us or so
    // adds at most that to each round of the collective's progress.
    if (now - start < std::chrono::microseconds(200))
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Each rank's host name, pid namespace and pid, gathered once: the ranks that
// share this rank's host and namespace become its neighbours.
void find_neighbours() {
  if (g_neighbours_known) return;
  g_neighbours_known = true;
  struct Entry {
    char host[MPI_MAX_PROCESSOR_NAME + 64] = {};
    int64_t pid = 0;
  } mine;
  int length = 0;
  MPI_Get_processor_name(mine.host, &length);
  char ns[64] = {};  // "pid:[4026531836]": ranks in other containers see other pids
  if (readlink("/proc/self/ns/pid", ns, sizeof ns - 1) > 0)
    std::strncat(mine.host, ns, sizeof mine.host - std::strlen(mine.host) - 1);
  mine.pid = getpid();
  int me = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::vector<Entry> all(static_cast<size_t>(n));
  RequestState s;
  s.what = "loom::dist::init";
  check(MPI_Iallgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, MPI_COMM_WORLD,
                       &s.request),
        s.what);
  poll(s);
  for (int r = 0; r < n; ++r)
    if (r != me && std::strcmp(all[static_cast<size_t>(r)].host, mine.host) == 0)
      g_neighbours.push_back({r, static_cast<pid_t>(all[static_cast<size_t>(r)].pid)});
}
}  // namespace

void init(int* argc, char*** argv) {
  if (initialized()) {  // MPI started by the program
    find_neighbours();
    return;
  }
  int provided = 0;
  // Serialized: the realize that runs a collective may be on any thread, one at a time.
  check(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "loom::dist::init");
  g_started = true;
  // Errors come back as codes, which become loom::Errors, instead of aborting the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  find_neighbours();
}

void finalize() {
  if (!g_started || !initialized()) return;
  check(MPI_Finalize(), "loom::dist::finalize");
  g_started = false;
}

bool initialized() {
  int started = 0, ended = 0;
  MPI_Initialized(&started);
  MPI_Finalized(&ended);
  return started && !ended;
}

int rank(const char* what) {
  require_job(what);
  int r = 0;
  check(MPI_Comm_rank(MPI_COMM_WORLD, &r), what);
  return r;
}

int world_size(const char* what) {
  require_job(what);
  int n = 0;
  check(MPI_Comm_size(MPI_COMM_WORLD, &n), what);
  return n;
}

void barrier(const char* what) {
  require_job(what);
  RequestState s;
  s.what = what;
  check(MPI_Ibarrier(MPI_COMM_WORLD, &s.request), what);
  poll(s);
}

bool test(Request& r) {
  if (!r.state || r.state->done) return true;
  int ended = 0;
  check(MPI_Test(&r.state->request, &ended, MPI_STATUS_IGNORE), r.state->what);
  if (ended) finish(*r.state);
  return ended != 0;
}

void wait(Request& r) {
  if (r.state) poll(*r.state);
}

void run_collective(const CollectiveArg& c, const void* in, void* out, DType dtype, int64_t elements) {
  Request r = start_collective(c, in, out, dtype, elements);
  wait(r);
}

Request start_collective(const CollectiveArg& c, const void* in, void* out, DType dtype, int64_t elements) {
  const std::string what = collective_name(c);
  require_job(what.c_str());
  if (elements > INT_MAX)
    throw Error(fmt::format("{}: {} elements of {}, more than MPI's count of {} in one call", what, elements,
                            to_string(dtype), INT_MAX));
  if (c.kind != CollectiveKind::Broadcast && c.kind != CollectiveKind::AllGather &&
      (dtype.is_bool() || dtype.is_half()))
    throw Error(fmt::format("{}: cannot reduce a {} tensor", what, to_string(dtype)));
  const int me = rank(what.c_str());
  if (c.ranks != world_size(what.c_str()) &&
      (c.kind == CollectiveKind::AllGather || c.kind == CollectiveKind::ReduceScatter))
    throw Error(fmt::format("{}: the graph was built for {} ranks, the job has {}", what, c.ranks,
                            world_size(what.c_str())));
  const MPI_Datatype type = mpi_type(dtype);
  const int n = static_cast<int>(collective_block(c, elements));
  const bool in_place = in == out;
  const MPI_Op op = c.reduce == CollectiveReduce::Max ? MPI_MAX : MPI_SUM;
  const size_t bytes = static_cast<size_t>(elements) * dtype.itemsize();
  auto s = std::make_shared<RequestState>();
  s->what = what;
  MPI_Request* req = &s->request;
  // LOOM_DIST_DETERMINISTIC: MPI may add the ranks' floats in any order (Open MPI
  // picks its algorithm by message size and layout), so a float sum moves every
  // rank's block unreduced, and finish() adds them in rank order: the same bits on
  // every rank and in every run. Integer sums and maxima are exact in any order.
  const int ranks = world_size(what.c_str());
  if (flags()->dist_deterministic && ranks > 1 && c.reduce == CollectiveReduce::Sum &&
      (dtype == DType::Float32 || dtype == DType::Float64) && c.kind != CollectiveKind::Broadcast &&
      c.kind != CollectiveKind::AllGather) {
    const bool receives = c.kind != CollectiveKind::Reduce || me == c.root;
    const size_t block = static_cast<size_t>(n) * dtype.itemsize();
    if (receives) {
      s->rows.resize(block * static_cast<size_t>(ranks));
      s->sum_out = out;
      s->sum_dtype = dtype;
      s->sum_elements = n;
      s->ranks = ranks;
    }
    switch (c.kind) {
      case CollectiveKind::AllReduce:  // every rank gets every rank's whole input
        check(MPI_Iallgather(in, n, type, s->rows.data(), n, type, MPI_COMM_WORLD, req), what);
        break;
      case CollectiveKind::Reduce:  // the root gets every rank's input; the others zeros
        check(MPI_Igather(in, n, type, receives ? s->rows.data() : nullptr, n, type, static_cast<int>(c.root),
                          MPI_COMM_WORLD, req),
              what);
        if (!receives) s->zero = out, s->zero_bytes = bytes;
        break;
      default:  // ReduceScatter: rank r gets block r of every rank's input
        check(MPI_Ialltoall(in, n, type, s->rows.data(), n, type, MPI_COMM_WORLD, req), what);
        break;
    }
    return Request{std::move(s)};
  }
  switch (c.kind) {
    case CollectiveKind::AllReduce:
      check(MPI_Iallreduce(in_place ? MPI_IN_PLACE : in, out, n, type, op, MPI_COMM_WORLD, req), what);
      break;
    case CollectiveKind::Broadcast:
      if (!in_place && me == c.root) std::memcpy(out, in, bytes);
      check(MPI_Ibcast(out, n, type, static_cast<int>(c.root), MPI_COMM_WORLD, req), what);
      break;
    case CollectiveKind::Reduce:
      check(MPI_Ireduce(in_place && me == c.root ? MPI_IN_PLACE : in, out, n, type, op,
                        static_cast<int>(c.root), MPI_COMM_WORLD, req),
            what);
      if (me != c.root) s->zero = out, s->zero_bytes = bytes;
      break;
    case CollectiveKind::AllGather:
      check(MPI_Iallgather(in, n, type, out, n, type, MPI_COMM_WORLD, req), what);
      break;
    case CollectiveKind::ReduceScatter:
      check(MPI_Ireduce_scatter_block(in, out, n, type, op, MPI_COMM_WORLD, req), what);
      break;
  }
  return Request{std::move(s)};
}

}  // namespace loom::comm
