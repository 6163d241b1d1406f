#include "schedule/stages.hpp"

#include "ir/symbolic.hpp"
#include "schedule/buffer_removal.hpp"
#include "schedule/stage.hpp"

namespace loom {

namespace {

const PatternMatcher& no_rules() {
  static const PatternMatcher pm("none", {});
  return pm;
}

// A realization point's value is wrapped in CONTIGUOUS so that no stage removes
// its buffer; kernel_split takes the value itself.
const PatternMatcher& drop_realize_markers() {
  static const PatternMatcher pm(
      "drop_realize_markers",
      {{UPat::op(Op::BUFFERIZE, {UPat::op(Op::CONTIGUOUS, {UPat::var("x")})}).allow_more_src(),
        [](const Match& m) {
          std::vector<UOpPtr> src = m.root()->src;
          src[0] = m["x"];
          return m.root()->with_src(std::move(src));
        }}});
  return pm;
}

}  // namespace

std::vector<UOpPtr> tensor_stages(const std::vector<UOpPtr>& targets, const Flags&) {
  (void)no_rules;
  return targets;
}

UOpPtr buffer_stages(const UOpPtr& sink, const Flags& flags) {
  StageContext ctx{flags, {}};
  const UOpPtr out =
      run_stages("buffer_stages", {{"symbolic", symbolic, false}, {"buffer_removal", buffer_removal}}, sink,
                 ctx, PassLevel::Graph);
  return graph_rewrite(out, drop_realize_markers());
}

UOpPtr kernel_stages(const UOpPtr& kernel, const Flags&) { return kernel; }

}  // namespace loom
