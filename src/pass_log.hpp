#pragma once
// LOOM_DEBUG=5: what a stage or pass changed, as text for loom's logger. A
// function of one pass event, so every observer that shows stages (the debug
// log, loom-dump) prints them alike.
#include "ir/pass_observer.hpp"

#include <string>

namespace loom::detail {

// The heading of an event: "stage range_merge, kernel r_1024_16" or "stage rangeify".
std::string pass_heading(const PassEvent& e);

// The heading and the graph before and after, or "" when the stage changed nothing.
std::string pass_log_text(const PassEvent& e);

}  // namespace loom::detail
