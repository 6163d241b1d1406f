#pragma once
// Testing only: deliberately wrong rewrite and gradient rules, off in every
// real run. The fuzzer's own test switches one on to prove that the fuzzer
// catches a wrong rewrite (and pins it to its pass), or a wrong gradient,
// within its CI budget (docs/fuzzing.md), that its recompute bound catches
// fusion that recomputes too much, that LOOM_CHECK_BOUNDS stops an
// access outside a buffer (docs/faults.md), and that a BEAM search rejects a
// candidate whose output differs (src/beam.hpp).
#include <cstdint>

namespace loom {

enum class PlantedFault : uint8_t {
  None,
  FlipConstantSub,       // the simplifier rewrites float x - c to x + c (a flipped sign)
  DoubledSqrtGradient,   // the gradient rule of SQRT drops its factor 1/2: g / sqrt(x)
  LoadPastEnd,           // kernel_split reads each input at index + 1: one past the end at the last element
  WrongSearchCandidate,  // a BEAM search's candidates (not the heuristic's) get a wrong first output element
  InlineEveryBuffer,     // buffer_removal inlines every proposed buffer, whatever the recomputation costs
};

// Thread-safe; process-wide.
void set_planted_fault(PlantedFault fault);
PlantedFault planted_fault();

}  // namespace loom
