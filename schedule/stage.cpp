#include "schedule/stage.hpp"

#include "ir/profile.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace loom {

bool stage_on(const Stage& stage, const Flags& flags) {
  return !stage.optional || (!flags.disabled(stage.name) && (stage.by_default || flags.enabled(stage.name)));
}

namespace {

// The union of the enabled stages' rules, built once per (group, enabled set):
// a realize runs every group, and composing tables re-indexes every rule.
const PatternMatcher& group_rules(std::string_view group, const std::vector<Stage>& stages,
                                  const Flags& flags) {
  std::string key(group);
  std::vector<const Stage*> on;
  for (const auto& s : stages)
    if (stage_on(s, flags)) {
      on.push_back(&s);
      key += ' ';
      key += s.name;
    }
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<const PatternMatcher>>* cache =
      new std::map<std::string, std::unique_ptr<const PatternMatcher>>();  // never destroyed: used at exit
  std::lock_guard lock(mu);
  auto& slot = (*cache)[key];
  if (!slot) {
    PatternMatcher pm(std::string(group), {});
    for (const Stage* s : on) pm = pm + s->rules();
    slot = std::make_unique<const PatternMatcher>(std::move(pm));
  }
  return *slot;
}

}  // namespace

std::unordered_map<const UOp*, int> buffer_reads(const std::vector<UOpPtr>& nodes) {
  std::unordered_map<const UOp*, int> reads;
  for (const UOpPtr& u : nodes)
    if (u->op == Op::INDEX && u->src[0]->op == Op::BUFFERIZE) ++reads[u->src[0].get()];
  return reads;
}

void notify_graph_stage(std::string_view group, const UOpPtr& before, const UOpPtr& after) {
  notify_pass({PassLevel::Graph, group, "", before, after});
}

UOpPtr run_stages(std::string_view group, const std::vector<Stage>& stages, const UOpPtr& root,
                  StageContext& ctx, const StageReport& report) {
  const PatternMatcher& pm = group_rules(group, stages, ctx.flags);
  UOpPtr after = root;
  if (pm.size()) {
    ProfileSpan span("stage", std::string(group));
    after = graph_rewrite(root, pm, ctx);
  }
  report(group, root, after);
  return after;
}

}  // namespace loom
