#pragma once
// Pass observers: hooks called after each rewrite stage (on a whole schedule's
// graph) and after each kernel-level pass (on one kernel's AST), with what the
// stage was given and what it made. LOOM_DEBUG=5, LOOM_DUMP_DIR and the tests'
// kernel-IR checker all hang here, so a wrong rewrite is pinned to the stage
// that made it. Off by default: with no observer, a stage pays one atomic load.
#include "ir/uop.hpp"

#include <cstdint>
#include <functional>
#include <string_view>

namespace loom {

enum class PassLevel : uint8_t {
  Graph,   // a schedule-wide graph: the tensor graph, or rangeify's SINK of BUFFERIZEs
  Kernel,  // one kernel's AST (docs/kernel-ir.md)
};

struct PassEvent {
  PassLevel level;
  std::string_view pass;    // the stage's name, as LOOM_DISABLE and docs/pipeline.md spell it
  std::string_view kernel;  // the kernel's name at Kernel level; empty at Graph level
  const UOpPtr& before;
  const UOpPtr& after;  // the same node as `before` when the stage changed nothing
};

using PassObserver = std::function<void(const PassEvent&)>;

// Registers `f` for every later event on every thread; returns a token for
// remove_pass_observer. An observer may throw loom::Error: the stage's caller
// sees it, as if the stage itself had failed.
uint64_t add_pass_observer(PassObserver f);
void remove_pass_observer(uint64_t token);

// Is anyone observing? Stages may skip building an event's inputs when not.
bool pass_observed();

// Calls every observer with `e`, in the order they were added.
void notify_pass(const PassEvent& e);

}  // namespace loom
