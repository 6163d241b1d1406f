// lower_kernel: the kernel passes run in order, each reported to the pass
// observers with what it was given and what it made, and each keeps the
// kernel's meaning (interpreted after every pass).
#include "codegen/codegen.hpp"
#include "codegen/run_kernel.hpp"
#include "ir/pass_observer.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace loom;
using namespace loom::test;

namespace {
// out[i] = sum_k in[i*6 + k]
UOpPtr row_sums() {
  auto out = global(0, DType::Float32), in = global(1, DType::Float32);
  auto i = make_range(4, 0), k = make_range(6, 1, AxisKind::Reduce);
  return sink({end(store(index(out, i), reduce(Op::ADD, load(in, i * 6 + k), {k})), {i})});
}

struct Recorder {
  std::vector<std::string> passes;
  std::vector<std::pair<UOpPtr, UOpPtr>> steps;
  uint64_t token = add_pass_observer([this](const PassEvent& e) {
    if (e.level != PassLevel::Kernel || e.kernel != "k_rows") return;
    passes.emplace_back(e.pass);
    steps.emplace_back(e.before, e.after);
  });
  ~Recorder() { remove_pass_observer(token); }
};
}  // namespace

TEST_CASE("lower_kernel: every pass is reported in order, and each keeps the kernel's meaning") {
  Recorder rec;
  const UOpPtr kernel = row_sums();
  const UOpPtr lowered = lower_kernel(kernel, "k_rows", Flags{});
  CHECK(rec.passes == std::vector<std::string>(kernel_pass_names().begin(), kernel_pass_names().end()));
  REQUIRE(!rec.steps.empty());
  CHECK(rec.steps.front().first == kernel);
  CHECK(rec.steps.back().second == lowered);
  for (size_t i = 1; i < rec.steps.size(); ++i) CHECK(rec.steps[i].first == rec.steps[i - 1].second);
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 5) - 1.5f;
  Aligned<float> out(4), in(x);
  for (const auto& [before, after] : rec.steps) check_same_results(before, after, {out, in}, true);
}

TEST_CASE("lower_kernel: LOOM_DISABLE switches the optimizer off, never the lowering the emitter needs") {
  Recorder rec;
  Flags flags;
  flags.disable = {"optimizer", "lower_reduce"};
  const UOpPtr lowered = lower_kernel(row_sums(), "k_rows", flags);
  CHECK(std::find(rec.passes.begin(), rec.passes.end(), "optimizer") == rec.passes.end());
  CHECK(std::find(rec.passes.begin(), rec.passes.end(), "lower_reduce") != rec.passes.end());
  for (const auto& u : toposort(lowered)) {
    CHECK(u->op != Op::REDUCE);
    if (u->op == Op::RANGE) CHECK(u->get<AxisArg>().kind != AxisKind::Parallel);
  }
}
