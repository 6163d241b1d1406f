// The one check every collective makes first, whichever communicator is built.
#include "runtime/communicator.hpp"

#include <loom/error.hpp>

#include <fmt/format.h>

namespace loom::comm {

void require_job(const char* what) {
  if (!initialized())
    throw Error(
        fmt::format("{}: loom::dist::init has not been called (or the job has ended); "
                    "a collective needs a job (docs/distributed.md)",
                    what));
}

}  // namespace loom::comm
