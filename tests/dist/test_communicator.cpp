// The communicator's timeout (runtime/communicator.hpp): a rank that never joins a
// collective ends the job after LOOM_DIST_TIMEOUT, with an error naming the waiting
// rank. The job fails by design, so this case is skipped in the `dist` run:
// tests/dist/timeout.cmake (CTest `dist_timeout`) runs it alone, under its own mpirun,
// and checks the exit, the error and the time.
#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
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

// A rank killed during training (tests/dist/fault.cmake, CTest `dist_fault`): every
// rank trains under DataParallel, and the last one SIGKILLs itself at step 3, in
// the middle of the job. The others must not finish the loop: the job ends with
// an error naming the dead rank.
TEST_CASE("a rank killed during training ends the job" * doctest::skip()) {
  REQUIRE(dist::world_size() >= 2);
  const int me = dist::rank(), last = dist::world_size() - 1;
  Tensor w = Tensor::full({8, 4}, 0.1).requires_grad_(), b = Tensor::zeros({4}).requires_grad_();
  dist::DataParallel ddp({w, b});
  optim::SGD opt({w, b}, 0.01);
  const Tensor x = Tensor::full({16, 8}, 1.0 + me), y = Tensor::full({16, 4}, 2.0);
  for (int step = 0; step < 200; ++step) {
    if (step == 3 && me == last) std::raise(SIGKILL);
    opt.zero_grad();
    const Tensor d = x.matmul(w) + b - y;
    (d * d).mean().backward();
    opt.step();
    realize({w, b});
  }
  FAIL("rank ", me, " finished training: the job should have ended at step 3");
}
