#include "tools/stage_dump.hpp"

#include "tools/expression.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::tools;

TEST_CASE("a timed run computes the outputs over the whole parallel range, every time") {
  const Program p = run_program("a = arange(32768); out = a.reshape(512, 64).cast(f32).sum(1)");
  const StageDump dump = dump_stages({p.outputs[0].tensor});
  REQUIRE(dump.kernels.size() == 1);
  CHECK(dump.plan.kernels[0].parallel_extent == 512);
  const TimedRun run = time_kernels(dump, 3);
  REQUIRE(run.times.size() == 1);
  CHECK(run.times[0].kernel == dump.kernels[0]);
  CHECK(run.times[0].best.ms > 0);
  CHECK(run.times[0].best.flops == 32768.0);  // one fold per element
  CHECK(run.times[0].best.bytes == 32768.0 * 4 + 512 * 4);
  const std::vector<float> got = run.outputs.at(0).to_vector<float>();
  REQUIRE(got.size() == 512);
  for (int i = 0; i < 512; ++i) CHECK(got[i] == static_cast<float>(64 * 64 * i + 63 * 64 / 2));
}

TEST_CASE("the dump holds the tensor graph first and each kernel's stages, ending in its assembly") {
  const Program p = run_program("x = rand(16, 8); out = (x * 3).exp2()");
  const StageDump dump = dump_stages({p.outputs[0].tensor});
  REQUIRE(dump.kernels == std::vector<std::string>{"E_128"});  // range_merge made [16, 8] one loop
  REQUIRE(!dump.stages.empty());
  CHECK(dump.stages.front().stage == "tensor");
  CHECK(dump.stages.front().text.find("EXP2 f32") != std::string::npos);
  CHECK(dump.stages.back().stage == "asm");
  CHECK(dump.stages.back().kernel == "E_128");
  const std::vector<std::string> names = stage_names(dump);
  const auto at = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) - names.begin();
  };
  CHECK(at("tensor") < at("rangeify"));
  CHECK(at("rangeify") < at("kernel"));
  CHECK(at("kernel") < at("optimizer"));
  CHECK(at("optimizer") < at("opts"));  // the Opts it applied, after what they made
  CHECK(at("opts") < at("linear"));
  CHECK(at("linear") < at("llvm"));
  CHECK(at("llvm") < at("asm"));
  for (const StageText& s : dump.stages)
    if (s.rewrite) CHECK_MESSAGE(!s.before.empty(), s.stage);
}
