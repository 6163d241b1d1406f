#pragma once
// Whether this host runs the kernels of a Target preset: a test plans and compiles
// for every preset it names (ir/target.hpp: a preset is data, on any host), and runs
// the compiled kernels only where the host has the preset's instructions.
#include "ir/target.hpp"

#include <string_view>

namespace loom::test {

inline bool host_runs(const Target& t) { return host_lacks(t).empty(); }
inline bool host_runs(std::string_view preset) { return host_runs(target_named(preset)); }

}  // namespace loom::test
