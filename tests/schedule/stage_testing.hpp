#pragma once
// Helpers for the per-stage tests: a graph in loom's text form goes in, one
// stage's pattern set (with the simplifier) runs to a fixpoint, and the result
// is compared by pointer with the expected graph, also parsed from text.
#include "ir/flags.hpp"
#include "ir/symbolic.hpp"
#include "ir/text.hpp"
#include "schedule/stage.hpp"

#include <string_view>

namespace loom::testing {

// Runs `stage` (and the simplifier, unless `with_symbolic` is false) on the
// graph of `text`, under `flags` (defaults: every stage on, LOOM_PCONTIG 0).
inline UOpPtr apply_stage(const PatternMatcher& stage, std::string_view text, const Flags& flags = Flags{},
                          bool with_symbolic = true) {
  StageContext ctx{flags, {}};
  const PatternMatcher pm = with_symbolic ? symbolic() + stage : stage;
  return graph_rewrite(parse_text(text), pm, ctx);
}

// The same for an explicit Target: a test whose expectation depends on the machine's
// caches or cores (split_reduceop's blocks, panel_packing's thresholds) holds on any host.
inline UOpPtr apply_stage(const PatternMatcher& stage, std::string_view text, const Target& target,
                          bool with_symbolic = true) {
  StageContext ctx{Flags{}, {}};
  ctx.target = target;
  const PatternMatcher pm = with_symbolic ? symbolic() + stage : stage;
  return graph_rewrite(parse_text(text), pm, ctx);
}

// The simplified graph of `text`: what a stage's output is compared with.
inline UOpPtr expect(std::string_view text) { return simplify(parse_text(text)); }

}  // namespace loom::testing
