// loom::dist in a process that never joined a job (test_src has no init; the
// collectives themselves run in tests/dist under mpirun): every call is a
// loom::Error naming what was called.
#include <loom/loom.hpp>

#include "support/error_message.hpp"

using namespace loom;
using test::check_message;
using test::error_of;

TEST_CASE("without init, a collective is an error naming the op") {
  REQUIRE_FALSE(dist::initialized());
  const Tensor x = Tensor::ones({3});
  check_message(error_of([&] { dist::all_reduce(x); }), {"all_reduce", "loom::dist::init"});
  check_message(error_of([&] { dist::all_reduce(x, dist::Op::Mean); }), {"all_reduce", "init"});
  check_message(error_of([&] { dist::broadcast(x, 0); }), {"broadcast", "init"});
  check_message(error_of([] { dist::rank(); }), {"loom::dist::rank", "init"});
  check_message(error_of([] { dist::world_size(); }), {"loom::dist::world_size", "init"});
  check_message(error_of([] { dist::barrier(); }), {"loom::dist::barrier", "init"});
}
