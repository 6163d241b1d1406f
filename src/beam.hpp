#pragma once
// BEAM search (LOOM_BEAM=N, docs/pipeline.md): the Opts (ir/opt.hpp) of one kernel
// chosen by timing, as tinygrad's BEAM does. Starting from no range split, each entry
// of a beam of width N is extended by one step of the heuristic's own choices
// (codegen/heuristic.hpp's search_moves, then finish_heuristic), each candidate
// compiled and timed on scratch buffers of the kernel's shapes, and the N fastest kept,
// until a level makes nothing faster or LOOM_BEAM_BUDGET seconds are spent. The
// heuristic's list is always a candidate, and its output on the same scratch inputs
// is the reference: a candidate whose output differs from it (beyond the kernel
// checker's tolerance, docs/fuzzing.md) is rejected, so a search never makes loom wrong.
//
// The winner is kept in LOOM_CACHE_DIR under the kernel and the codegen options (the
// Target among them), so another process compiles the kernel with it at once;
// Counters::beam_searches and beam_cache_hits say which happened.
#include "ir/flags.hpp"
#include "ir/opt.hpp"
#include "ir/uop.hpp"

#include <string>
#include <vector>

namespace loom::detail {

struct BeamResult {
  std::vector<Opt> heuristic;  // the heuristic's Opts
  std::vector<Opt> best;       // the winner: the heuristic's unless a candidate was faster
  double heuristic_ms = 0;     // best of several runs on the scratch buffers (0: not timed)
  double best_ms = 0;
  int candidates = 0;       // compiled and run, the heuristic's included
  int rejected = 0;         // of them: failed to compile, or their output differed
  bool from_cache = false;  // answered by an earlier search (disk or this process): nothing timed
  std::string skipped;      // why the kernel was not searched ("" when it was or came from the cache)
};

// The Opts to compile `ast` with under `flags` (LOOM_BEAM > 0): a search's winner, from
// this process's earlier searches, else LOOM_CACHE_DIR, else a search now (stored in both).
// `options` is the kernel cache's text of the codegen flags (engine.cpp's codegen_options).
// A kernel the search cannot run on scratch buffers (symbolic sizes, a gathered index,
// LOOM_CHECK_BOUNDS, a budget of 0) keeps the heuristic's Opts.
BeamResult beam_opts(const UOpPtr& ast, const std::string& name, const Flags& flags,
                     const std::string& options);

// Forgets this process's searches (the disk keeps them): the next beam_opts asks the disk.
void clear_beam_results();

}  // namespace loom::detail
