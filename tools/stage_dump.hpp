#pragma once
// What loom-dump shows: every stage of a computation, in pipeline order, as
// text. The schedule-wide and kernel-level stages come from the pass-observer
// events (ir/pass_observer.hpp), so a stage someone adds later shows up here
// without a change to loom-dump; loom-dump adds the ends it sees itself: the
// tensor graph, each kernel as scheduled, its loops, LLVM IR and assembly.
#include "src/engine.hpp"

#include <loom/tensor.hpp>

#include <string>
#include <vector>

namespace loom::tools {

struct StageText {
  std::string
      stage;  // "tensor", "rangeify", ..., "kernel", "optimizer", "opts", ..., "linear", "llvm", "asm"
  std::string kernel;    // the kernel's name; empty for a schedule-wide graph
  std::string text;      // what the stage made
  std::string before;    // what it was given, for the stages that rewrite the IR ("" otherwise)
  bool rewrite = false;  // a pass-observer stage: `before` and `text` are both the IR's text form
};

struct StageDump {
  std::vector<StageText> stages;     // graph-wide first, then kernel by kernel, each in pipeline order
  std::vector<std::string> kernels;  // kernel names, in the order they run
  detail::GraphSignature signature;
  detail::Plan plan;
};

// Schedules and compiles `outputs` (nothing runs), recording every stage. The
// kernel and schedule caches are emptied first, so every kernel goes through
// every stage.
StageDump dump_stages(const std::vector<Tensor>& outputs);

struct KernelTime {
  std::string kernel;
  detail::KernelTiming best;  // the fastest of the timed runs
};

struct TimedRun {
  std::vector<KernelTime> times;  // per kernel of the plan, in the order they run
  std::vector<Tensor> outputs;    // the computed outputs (every run computes the same values)
};

// Runs the dumped plan once to warm up, then `repeat` more times, timing each kernel.
TimedRun time_kernels(const StageDump& dump, int repeat);

// The stage names of `dump` in pipeline order, each once.
std::vector<std::string> stage_names(const StageDump& dump);

}  // namespace loom::tools
