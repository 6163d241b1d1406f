#include "tools/stage_dump.hpp"

#include "ir/pass_observer.hpp"
#include "ir/text.hpp"
#include "src/schedule_cache.hpp"

#include <algorithm>
#include <mutex>

namespace loom::tools {

namespace {

// Records every pass event while it lives (events may come from other threads).
class EventRecorder {
 public:
  EventRecorder() : token_(add_pass_observer([this](const PassEvent& e) { record(e); })) {}
  ~EventRecorder() { remove_pass_observer(token_); }
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // The events recorded since the last take, in order.
  std::vector<StageText> take() {
    std::lock_guard lock(mu_);
    return std::exchange(events_, {});
  }

 private:
  void record(const PassEvent& e) {
    StageText s{std::string(e.pass), std::string(e.kernel), to_text(e.after), to_text(e.before), true};
    std::lock_guard lock(mu_);
    events_.push_back(std::move(s));
  }
  std::mutex mu_;
  std::vector<StageText> events_;
  uint64_t token_;
};

std::vector<UOpPtr> uops_of(const std::vector<Tensor>& outputs) {
  std::vector<UOpPtr> out;
  for (const Tensor& t : outputs) {
    if (!t.defined()) throw Error("loom-dump: an output tensor is undefined");
    out.push_back(t.node()->uop);
  }
  return out;
}

}  // namespace

StageDump dump_stages(const std::vector<Tensor>& outputs) {
  const std::shared_ptr<const Flags> flags = loom::flags();
  kernel_cache().clear();
  detail::schedule_cache().clear();
  const std::vector<UOpPtr> targets = uops_of(outputs);
  StageDump dump;
  EventRecorder recorder;
  dump.signature = detail::sign_graph(targets);
  dump.plan =
      detail::schedule_plan(targets, dump.signature, std::vector<int64_t>(targets.size(), -1), *flags);
  std::vector<StageText> scheduled = recorder.take();

  // The tensor graph: what the first schedule-wide stage was given (the
  // graph with its buffers as placeholders), else the targets themselves.
  auto first_graph =
      std::find_if(scheduled.begin(), scheduled.end(), [](const StageText& s) { return s.kernel.empty(); });
  dump.stages.push_back(
      {"tensor", "", first_graph != scheduled.end() ? first_graph->before : to_text(targets), "", false});
  for (const StageText& s : scheduled)
    if (s.kernel.empty()) dump.stages.push_back(s);

  for (detail::PlanKernel& k : dump.plan.kernels) {
    const bool seen = std::find(dump.kernels.begin(), dump.kernels.end(), k.name) != dump.kernels.end();
    if (seen) {  // the same kernel on other buffers: compiled already
      detail::compile_planned_kernel(k, *flags);
      continue;
    }
    dump.kernels.push_back(k.name);
    for (const StageText& s : scheduled)
      if (s.kernel == k.name) dump.stages.push_back(s);
    dump.stages.push_back({"kernel", k.name, to_text(k.ast), "", false});
    const auto compiled = detail::compile_planned_kernel(k, *flags, true);
    for (StageText& s : recorder.take()) {
      const bool optimizer = s.stage == "optimizer";
      dump.stages.push_back(std::move(s));
      // The Opts the optimizer applied (ir/opt.hpp), after what they made of the kernel.
      if (optimizer) dump.stages.push_back({"opts", k.name, to_string(compiled->opts), "", false});
    }
    dump.stages.push_back({"linear", k.name, compiled->linear, "", false});
    dump.stages.push_back({"llvm", k.name, compiled->source, "", false});
    dump.stages.push_back({"asm", k.name, compiled->assembly, "", false});
  }
  return dump;
}

TimedRun time_kernels(const StageDump& dump, int repeat) {
  const std::shared_ptr<const Flags> flags = loom::flags();
  const std::vector<UOpPtr> table = detail::bind_plan(dump.plan, dump.signature);
  TimedRun run;
  for (const auto& k : dump.plan.kernels)
    run.times.push_back({k.name, detail::run_planned_kernel(k, table, *flags)});
  for (size_t i = 0; i < dump.plan.results.size(); ++i)
    run.outputs.push_back(detail::make_tensor(detail::plan_result(dump.plan, table, i)));
  for (int r = 0; r < repeat; ++r)
    for (size_t i = 0; i < run.times.size(); ++i) {
      const detail::KernelTiming t = detail::run_planned_kernel(dump.plan.kernels[i], table, *flags);
      if (r == 0 || t.ms < run.times[i].best.ms) run.times[i].best = t;
    }
  return run;
}

std::vector<std::string> stage_names(const StageDump& dump) {
  std::vector<std::string> names;
  for (const StageText& s : dump.stages)
    if (std::find(names.begin(), names.end(), s.stage) == names.end()) names.push_back(s.stage);
  return names;
}

}  // namespace loom::tools
