#pragma once
// The engine's environment flags, read once (docs/env.md is the one list).
namespace loom::detail {

struct Env {
  int debug = 0;       // LOOM_DEBUG: 1 a line per realize, 2 per kernel, 3 kernel ASTs, 4 LLVM IR
  bool noopt = false;  // LOOM_NOOPT=1: no optimiser choices (no parallel range)
};

const Env& env();

}  // namespace loom::detail
