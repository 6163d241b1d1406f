#pragma once
// The collectives of one plan run that are travelling while kernels run
// (docs/distributed.md): started when their input is written, moved on between
// kernels, waited for before the first item that touches their buffers. The
// engine and loom::Capture's replay run plans through this.
#include "runtime/communicator.hpp"
#include "src/plan.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace loom::detail {

class InFlight {
 public:
  InFlight() = default;
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  // Waits for any still travelling (a run unwinding from an error): their
  // buffers must not be freed under the communicator.
  ~InFlight();

  // Starts `c` on its buffers' memory (`debug` >= 2 logs it when it ends); a
  // bucket's `pieces` (the memory of c.pieces, in order) are copied into `out` first.
  void start(const PlanCollective& c, const void* in, void* out, const std::vector<const void*>& pieces,
             int debug);
  // Returns when `c` (started here, named alike) has ended.
  void wait(const PlanCollective& c);
  // Lets the communicator move every collective in flight on: between kernels.
  void progress();

 private:
  struct Item {
    PlanCollective c;
    comm::Request request;
    std::chrono::steady_clock::time_point started;
    int debug = 0;
  };
  std::vector<Item> items_;
};

}  // namespace loom::detail
