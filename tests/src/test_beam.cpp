// BEAM search (src/beam.hpp): a searched kernel computes what the reference
// interpreter does; a candidate whose output differs is never chosen; a winner
// found once is read from LOOM_CACHE_DIR instead of searched again; a budget of 0
// keeps the heuristic. Tiny kernels and budgets of a fraction of a second.
#include "check.hpp"

#include "codegen/heuristic.hpp"
#include "ir/planted_fault.hpp"
#include "ir/target.hpp"
#include "runtime/kernel_cache.hpp"
#include "src/beam.hpp"
#include "src/graph_key.hpp"
#include "src/schedule_cache.hpp"

#include <loom/context.hpp>

#include <filesystem>

using namespace loom;
using test::iota;
using test::make;
namespace fs = std::filesystem;

namespace {

std::string fresh_dir(const std::string& name) {
  const std::string dir = std::string(std::getenv("LOOM_CACHE_DIR")) + "/beam_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Every compiled kernel, plan and search winner of this process forgotten, as a new process starts.
void forget_everything() {
  detail::schedule_cache().clear();
  kernel_cache().clear();
  detail::clear_beam_results();
}

// A [m, k] @ [k, n] product of odd sizes and a column sum: a register tile's kernel and a one-row tile's.
Tensor product(int64_t m, int64_t k, int64_t n) {
  Tensor a = make(DType::Float32, iota(m * k, 0.013, -1), {m, k});
  Tensor b = make(DType::Float32, iota(k * n, -0.007, 1), {k, n});
  return a.matmul(b);
}

// The kernels realizing `t` would run, as scheduled (nothing compiled).
std::vector<UOpPtr> kernels_of(const Tensor& t) {
  const std::vector<UOpPtr> targets{t.node()->uop};
  const detail::GraphSignature sig = detail::sign_graph(targets);
  const detail::Plan plan = detail::schedule_plan(targets, sig, {-1}, *flags());
  std::vector<UOpPtr> out;
  for (const auto& k : plan.kernels) out.push_back(k.ast);
  return out;
}

}  // namespace

TEST_CASE("BEAM: a searched kernel's output equals the reference interpreter") {
  forget_everything();
  const Context ctx{{"BEAM", 2}, {"BEAM_BUDGET", "0.5"}, {"CACHE_DIR", fresh_dir("values")}};
  reset_counters();
  test::check_ref(product(13, 37, 45), 64);
  Tensor x = make(DType::Float32, iota(33 * 70, 0.01, -3), {33, 70});
  test::check_ref(x.sum(0), 64);
  test::check_ref((x * 2.0f).exp().sum(1), 64);
  CHECK(counters().beam_searches >= 3);
  forget_everything();
}

TEST_CASE("BEAM: a candidate whose output differs from the heuristic's is rejected") {
  forget_everything();
  const Context ctx{{"BEAM", 2}, {"BEAM_BUDGET", "0.5"}, {"CACHE_DIR", "off"}};
  const UOpPtr ast = kernels_of(product(12, 20, 40)).at(0);
  const std::vector<Opt> heuristic = heuristic_opts(ast, target_of(*flags()));
  set_planted_fault(PlantedFault::WrongSearchCandidate);
  const detail::BeamResult planted = detail::beam_opts(ast, "planted", *flags(), "test planted");
  set_planted_fault(PlantedFault::None);
  CHECK(planted.skipped == "");
  CHECK(planted.heuristic == heuristic);
  CHECK(planted.best == heuristic);
  CHECK(planted.candidates > 1);                      // the search tried others
  CHECK(planted.rejected == planted.candidates - 1);  // and refused every one
  // Without the fault the same search compiles and compares the same candidates.
  const detail::BeamResult fair = detail::beam_opts(ast, "fair", *flags(), "test fair");
  CHECK(fair.skipped == "");
  CHECK(fair.candidates > 1);
  CHECK(fair.rejected < fair.candidates - 1);
  forget_everything();
}

TEST_CASE("BEAM: a second process with the same LOOM_CACHE_DIR searches nothing") {
  forget_everything();
  const Context ctx{{"BEAM", 2}, {"BEAM_BUDGET", "0.3"}, {"CACHE_DIR", fresh_dir("second_process")}};
  reset_counters();
  const std::vector<double> first = test::values(product(9, 30, 50) + 1.0f);
  const Counters searched = counters();
  CHECK(searched.beam_searches >= 1);
  CHECK(searched.beam_cache_hits == 0);

  forget_everything();  // the second process: nothing in memory, the same directory
  reset_counters();
  const std::vector<double> second = test::values(product(9, 30, 50) + 1.0f);
  const Counters loaded = counters();
  CHECK(loaded.beam_searches == 0);
  CHECK(loaded.beam_cache_hits == searched.beam_searches);
  CHECK(second == first);  // the same winners, the same code
  forget_everything();
}

TEST_CASE("BEAM: a budget of 0 keeps the heuristic's Opts and searches nothing") {
  forget_everything();
  const Context ctx{{"BEAM", 2}, {"BEAM_BUDGET", "0"}, {"CACHE_DIR", "off"}};
  reset_counters();
  Tensor t = product(10, 24, 40);
  const UOpPtr ast = kernels_of(t).at(0);
  const detail::BeamResult r = detail::beam_opts(ast, "budget0", *flags(), "test budget 0");
  CHECK(r.skipped == "the budget is 0");
  CHECK(r.best == heuristic_opts(ast, target_of(*flags())));
  test::check_ref(t, 64);
  CHECK(detail::compile_kernel(ast, "budget0", *flags())->opts == heuristic_opts(ast, target_of(*flags())));
  CHECK(counters().beam_searches == 0);
  forget_everything();
}
