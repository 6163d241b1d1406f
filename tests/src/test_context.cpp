// loom::Context from the public API: flags switched in code, for a scope.
#include "check.hpp"

#include "runtime/executor.hpp"
#include "support/error_message.hpp"

#include <loom/context.hpp>

using namespace loom;
using test::error_of;
using test::iota;
using test::make;

TEST_CASE("Context{NOOPT} compiles the kernel again without a parallel range, and restores the flags") {
  auto run = [] {
    Tensor a = make(DType::Float32, iota(4096), {64, 64});
    Tensor y = (a * 2 + 1);
    y.realize();
    return std::pair{y.to_vector<float>(), last_run_distinct_threads()};
  };
  const auto optimised = run();
  const auto before = counters();
  std::pair<std::vector<float>, int> plain;
  {
    Context ctx{{"NOOPT", true}, {"THREADS", 2}};
    plain = run();
    CHECK(plain.second == 1);  // no parallel range: the whole kernel is one call
  }
  CHECK(counters().kernels_compiled - before.kernels_compiled == 1);  // the plain variant is its own kernel
  CHECK(plain.first == optimised.first);
  const auto after = counters();
  run();
  CHECK(counters().kernels_compiled == after.kernels_compiled);  // the optimised one is still cached
}

TEST_CASE("Context rejects an unknown flag or a bad value with a loom::Error naming it") {
  CHECK(error_of([] { Context ctx{{"LOOM_DEBGU", 1}}; }).find("'LOOM_DEBGU'") != std::string::npos);
  CHECK(error_of([] {
          Context ctx{{"DEBUG", 9}};
        }) == "Context: LOOM_DEBUG='9': expected a whole number in [0, 6]");
  CHECK(error_of([] { Context ctx{{"LOG", "loud"}}; }).find("LOOM_LOG='loud'") != std::string::npos);
}
