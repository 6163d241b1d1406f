// The plan's cost against its graph with every op realized (src/plan.hpp): the
// recompute ratio that loom-fuzz bounds and LOOM_DEBUG=1 prints.
#include "check.hpp"

#include "ir/planted_fault.hpp"
#include "src/graph_key.hpp"
#include "src/plan.hpp"

#include <loom/loom.hpp>

using namespace loom;

namespace {
Tensor ramp(const Shape& shape) {
  const int64_t n = element_count(shape);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>((i % 29) - 14) / 32.0f;
  return Tensor::from_vector<float>(v, shape);
}

detail::PlanCost cost_of(const std::vector<Tensor>& tensors) {
  std::vector<UOpPtr> roots;
  for (const Tensor& t : tensors) roots.push_back(t.node()->uop);
  const detail::GraphSignature sig = detail::sign_graph(roots);
  const detail::Plan plan = detail::plan_schedule(roots, sig, std::vector<int64_t>(roots.size(), -1));
  return detail::plan_cost(plan, sig, roots);
}

// Switches a planted fault on for its lifetime.
struct Planted {
  explicit Planted(PlantedFault f) { set_planted_fault(f); }
  ~Planted() { set_planted_fault(PlantedFault::None); }
};
}  // namespace

TEST_CASE("plan_cost: an elementwise chain fused into one kernel computes each op once, and moves less") {
  const Tensor x = ramp({64, 48}), y = ramp({64, 48});
  const detail::PlanCost c = cost_of({x * y + x});
  const double n = 64 * 48;
  CHECK(c.materialised_ops == 2 * n);  // MUL, ADD
  CHECK(c.scheduled_ops == c.materialised_ops);
  // One kernel reads x and y and writes the result: 3n floats, one operation per
  // element (4 bytes), and one launch (1,024 operations). Realized, MUL and ADD
  // each move 3n, in two kernels.
  CHECK(c.scheduled == 2 * n + 3 * n + 1024);
  CHECK(c.materialised == 2 * n + 6 * n + 2 * 1024);
  CHECK(c.recompute_ratio() < 1);
}

TEST_CASE("plan_cost: a softmax's row reduces fused into the rows that read them are not recomputed") {
  const Tensor x = ramp({32, 100});
  const detail::PlanCost c = cost_of({x.softmax(-1)});
  CHECK(c.materialised_ops > 0);
  CHECK(c.scheduled_ops <= 1.25 * c.materialised_ops);
  CHECK(c.recompute_ratio() <= 1.25);
}

TEST_CASE("plan_cost: a sum read by every element of a broadcast, inlined by a planted fault, counts again") {
  // y[i, j] = z[i, j] - x[j].sum(): the sum's buffer is read at 256 rows; inlined
  // there (the planted fault), its 1,024 folds run once per element read.
  const Tensor x = ramp({16, 1024}), z = ramp({256, 16});
  const Tensor y = z - x.sum(1).reshape({1, 16});
  const detail::PlanCost kept = cost_of({y});
  CHECK(kept.scheduled_ops == 16 * 1024 + 256 * 16);  // the folds once, then the subtractions
  CHECK(kept.recompute_ratio() <= 1.25);
  const Planted fault(PlantedFault::InlineEveryBuffer);
  const detail::PlanCost inlined = cost_of({y});
  CHECK(inlined.scheduled_ops == 256 * 16 * 1024 + 256 * 16);
  CHECK(inlined.materialised == kept.materialised);
  CHECK(inlined.recompute_ratio() > 10);
}
