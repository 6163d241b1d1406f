// A collective is an item of the plan beside kernels (src/plan.hpp): the
// kernels computing its input run before it, those reading its result after.
#include "src/graph_key.hpp"
#include "src/plan.hpp"
#include "src/tensor_node.hpp"

#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace loom;
using namespace loom::detail;

namespace {
Plan plan_of(const Tensor& y) {
  const std::vector<UOpPtr> targets{y.node()->uop};
  return plan_schedule(targets, sign_graph(targets), {-1});
}

// The plan's items in run order: "k" for a kernel, "c" for a collective's start,
// "w" for the wait for it.
std::string items(const Plan& plan) {
  std::string out;
  for_each_item(
      plan, [&](const PlanKernel&) { out += 'k'; }, [&](const PlanCollective&) { out += 'c'; },
      [&](const PlanCollective&) { out += 'w'; });
  return out;
}

bool reads(const PlanKernel& k, uint32_t buffer) {
  return std::find(k.args.begin() + static_cast<std::ptrdiff_t>(k.outputs), k.args.end(), buffer) !=
         k.args.end();
}
}  // namespace

TEST_CASE("all_reduce between two kernels runs in place on the first kernel's output") {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Plan plan = plan_of(dist::all_reduce(x.exp() * 2.0f).sqrt());
  CHECK(items(plan) == "kcwk");
  REQUIRE(plan.collectives.size() == 1);
  const PlanCollective& c = plan.collectives[0];
  CHECK(c.arg == CollectiveArg{CollectiveKind::AllReduce, CollectiveReduce::Sum, 0, dist::world_size()});
  CHECK(c.dtype == DType::Float32);
  CHECK(c.size == 6);
  CHECK(c.after == 1);
  CHECK(c.input == c.output);
  CHECK(plan.kernels[0].args[0] == c.input);  // the first kernel writes it
  CHECK(reads(plan.kernels[1], c.output));    // the second reads the result
  CHECK(plan.results[0].buffer == plan.kernels[1].args[0]);
}

TEST_CASE("a collective of an input buffer copies it: no kernel before it") {
  const Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3});
  const Plan plan = plan_of(dist::broadcast(x, 0) + 1.0);
  CHECK(items(plan) == "cwk");
  REQUIRE(plan.collectives.size() == 1);
  const PlanCollective& c = plan.collectives[0];
  CHECK(c.input < plan.inputs);  // x's buffer, left as it is
  CHECK(c.output >= plan.inputs);
  CHECK(reads(plan.kernels[0], c.output));
}

TEST_CASE("two collectives in a chain and a gradient's collective each get their item") {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3});
  const Tensor s = dist::all_reduce(x * 2.0f);
  const Plan plan = plan_of(dist::all_reduce(s.exp(), dist::Op::Max) - s);
  CHECK(items(plan) == "kcwkcwk");
  REQUIRE(plan.collectives.size() == 2);
  CHECK(plan.collectives[0].name != plan.collectives[1].name);
  CHECK(plan.collectives[1].arg.reduce == CollectiveReduce::Max);
  // The first result is read after the second collective: it is not overwritten in place.
  CHECK(plan.collectives[1].input != plan.collectives[0].output);
}
