#pragma once
// The pass observer behind LOOM_DEBUG=5 and LOOM_DUMP_DIR. It is registered
// only while some realize needs it, so with both flags off stages pay nothing
// for being observable.
#include "ir/flags.hpp"

namespace loom::detail {

// While any instance lives (on any thread), every stage and pass event is
// logged (LOOM_DEBUG >= 5, when it changed something) and written to
// LOOM_DUMP_DIR, as the flags say at the time of the event.
class StageObservers {
 public:
  explicit StageObservers(const Flags& flags);  // registers if the flags ask for it
  ~StageObservers();
  StageObservers(const StageObservers&) = delete;
  StageObservers& operator=(const StageObservers&) = delete;

 private:
  bool registered_ = false;
};

}  // namespace loom::detail
