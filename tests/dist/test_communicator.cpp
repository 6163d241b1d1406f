// The communicator's timeout (runtime/communicator.hpp): a rank that never joins a
// collective ends the job after LOOM_DIST_TIMEOUT, with an error naming the waiting
// rank. The job fails by design, so this case is skipped in the `dist` run:
// tests/dist/timeout.cmake (CTest `dist_timeout`) runs it alone, under its own mpirun,
// and checks the exit, the error and the time.
#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <thread>

using namespace loom;

TEST_CASE("a rank that never joins a collective ends the job" * doctest::skip()) {
  REQUIRE(dist::world_size() == 2);
  if (dist::rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));  // far past the timeout
  } else {
    dist::all_reduce(Tensor::ones({4})).realize();
  }
  FAIL("the all-reduce returned: the job should have ended");
}
