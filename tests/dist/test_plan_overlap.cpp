// A DataParallel step is one plan whose all-reduces start as their buckets are
// written and travel while the rest of the backward pass runs (src/plan_overlap.hpp).
#include "src/graph_key.hpp"
#include "src/plan.hpp"
#include "src/tensor_node.hpp"

#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace loom;
using namespace loom::detail;

namespace {
// A 4-layer MLP, 8 -> 16 -> 16 -> 16 -> 4: parameters w1 b1 ... w4 b4.
struct Mlp {
  std::vector<Tensor> params;
  Mlp() {
    const int64_t widths[] = {8, 16, 16, 16, 4};
    for (int l = 0; l < 4; ++l) {
      const int64_t in = widths[l], out = widths[l + 1];
      std::vector<float> w, b;
      for (int64_t i = 0; i < in * out; ++i) w.push_back(static_cast<float>(std::sin(0.37 * i + l)) / 4);
      for (int64_t i = 0; i < out; ++i) b.push_back(static_cast<float>(std::cos(0.91 * i + l)) / 4);
      params.push_back(Tensor::from_vector(w, {in, out}).requires_grad_());
      params.push_back(Tensor::from_vector(b, {out}).requires_grad_());
    }
  }
  Tensor loss(const Tensor& x) const {
    Tensor h = x;
    for (size_t l = 0; l < 8; l += 2) h = (h.matmul(params[l]) + params[l + 1]).tanh();
    return (h * h).mean();
  }
};

Tensor batch(int rank) {
  std::vector<float> v;
  for (int i = 0; i < 6 * 8; ++i) v.push_back(static_cast<float>(std::sin(0.13 * i + rank)));
  return Tensor::from_vector(v, {6, 8});
}

// The plan of an SGD step's new parameters, p - 0.1 * grad, after backward().
Plan step_plan(const Mlp& m) {
  std::vector<UOpPtr> targets;
  for (const Tensor& p : m.params) targets.push_back((p - p.grad() * 0.1f).node()->uop);
  return plan_schedule(targets, sign_graph(targets), std::vector<int64_t>(targets.size(), -1));
}
}  // namespace

TEST_CASE("DataParallel buckets fill from the last parameter backwards, up to bucket_bytes") {
  Mlp m;
  // Bytes, last first: b4 16, w4 256, b3 64 (336), w3 1024 (over 1088: a new bucket), b2 64
  // (1088), w2 1024 (new), b1 64 (1088), w1 512 (new).
  const dist::DataParallel ddp(m.params, 1088);
  CHECK(ddp.buckets() == std::vector<std::vector<size_t>>{{7, 6, 5}, {4, 3}, {2, 1}, {0}});
  CHECK(dist::DataParallel(m.params).buckets() == std::vector<std::vector<size_t>>{{7, 6, 5, 4, 3, 2, 1, 0}});
  CHECK(dist::DataParallel(m.params, 1).buckets().size() == 8);
  CHECK_THROWS_AS(dist::DataParallel(m.params, 0), Error);
}

TEST_CASE("a DataParallel step's all-reduces are interleaved with the backward kernels") {
  Mlp m;
  const dist::DataParallel ddp(m.params, 1088);
  m.loss(batch(dist::rank())).backward();
  const Plan plan = step_plan(m);
  REQUIRE(plan.collectives.size() == 4);
  std::string items;
  for_each_item(
      plan, [&](const PlanKernel&) { items += 'k'; }, [&](const PlanCollective&) { items += 'c'; },
      [&](const PlanCollective&) { items += 'w'; });
  INFO(items);  // k kernel, c a start, w a wait
  // Each bucket's all-reduce starts as soon as its gradients are written (the bucket
  // needing the fewest kernels first): right after the last kernel writing one of its
  // pieces, or with the start before it (starts keep their order; two buckets finished
  // by one kernel start together). Kernels of the backward pass run between the starts,
  // and the first all-reduce travels over the others' kernels.
  for (size_t i = 0; i < plan.collectives.size(); ++i) {
    const PlanCollective& c = plan.collectives[i];
    // A bucket of several gradients is copied in by its collective: no kernel writes it.
    std::vector<uint32_t> inputs{c.input};
    if (!c.pieces.empty()) {
      CHECK(c.input == c.output);
      inputs.clear();
      for (const BucketPiece& p : c.pieces) inputs.push_back(p.buffer);
    }
    size_t written = 0;  // 1 + the last kernel writing an input
    for (size_t k = 0; k < plan.kernels.size(); ++k)
      for (const uint32_t b : inputs)
        for (size_t slot = 0; slot < plan.kernels[k].outputs; ++slot)
          if (plan.kernels[k].args[slot] == b) written = k + 1;
    CHECK(c.after == std::max(written, i == 0 ? size_t{0} : plan.collectives[i - 1].after));
    for (const PlanKernel& k : plan.kernels)
      for (size_t slot = 0; slot < k.outputs && !c.pieces.empty(); ++slot) CHECK(k.args[slot] != c.output);
  }
  size_t pieces = 0;
  for (const PlanCollective& c : plan.collectives) pieces += c.pieces.empty() ? 1 : c.pieces.size();
  CHECK(pieces == m.params.size());
  const PlanCollective& first = plan.collectives.front();
  CHECK(first.after < plan.collectives.back().after);
  CHECK(first.wait >= plan.collectives.back().after);
  // Nothing runs between a start and its wait that touches the collective's memory.
  for (const PlanCollective& c : plan.collectives) {
    CHECK(c.after <= c.wait);
    auto block = [&](uint32_t b) {
      return b < plan.inputs ? -1 - int64_t{b} : int64_t{plan.memory[b - plan.inputs].owner};
    };
    for (size_t k = c.after; k < c.wait; ++k)
      for (uint32_t a : plan.kernels[k].args) {
        CHECK(a != c.input);
        CHECK(a != c.output);
        CHECK(block(a) != block(c.input));
        CHECK(block(a) != block(c.output));
      }
  }
  // With one bucket (bucket_bytes = infinity), the one all-reduce waits for every gradient.
  Mlp one;
  const dist::DataParallel all(one.params, INT64_MAX);
  one.loss(batch(dist::rank())).backward();
  const Plan end = step_plan(one);
  REQUIRE(end.collectives.size() == 1);
  CHECK(end.collectives[0].after > first.after);
}

TEST_CASE("what a DataParallel step realizes beside the update is computed before the all-reduce, once") {
  // The loss needs no collective: it is scheduled with the bucket's gradients and
  // shares their forward pass, instead of computing it again after the all-reduce.
  // The plan's kernels then read the batch no more often than the plan of the same
  // step without DataParallel (the forward's first layer, the first weight's gradient).
  const Tensor x = batch(dist::rank());
  // The kernels of an SGD step's plan (the loss realized with the update) that read x,
  // and the plan.
  auto x_readers = [&](const Mlp& m, Plan& plan) {
    const Tensor loss = m.loss(x);
    loss.backward();
    std::vector<UOpPtr> targets;
    for (const Tensor& p : m.params) targets.push_back((p - p.grad() * 0.1f).node()->uop);
    targets.push_back(loss.node()->uop);
    const GraphSignature sig = sign_graph(targets);
    plan = plan_schedule(targets, sig, std::vector<int64_t>(targets.size(), -1));
    size_t x_slot = sig.inputs();  // the batch's buffer: the one of 6 x 8 elements
    for (size_t p = 0; p < sig.inputs(); ++p)
      if (sig.buffer(p)->get<std::vector<int64_t>>().at(1) == 6 * 8) x_slot = p;
    REQUIRE(x_slot < sig.inputs());
    std::vector<size_t> readers;
    for (size_t k = 0; k < plan.kernels.size(); ++k)
      if (std::count(plan.kernels[k].args.begin(), plan.kernels[k].args.end(), x_slot) > 0)
        readers.push_back(k);
    return readers;
  };
  Mlp m, plain;
  const dist::DataParallel all(m.params, INT64_MAX);
  Plan plan, plain_plan;
  const std::vector<size_t> reading_x = x_readers(m, plan), plain_reading_x = x_readers(plain, plain_plan);
  REQUIRE(plan.collectives.size() == 1);
  REQUIRE(plain_plan.collectives.empty());
  REQUIRE(!reading_x.empty());
  CHECK(reading_x.size() <= plain_reading_x.size());
  CHECK(reading_x.back() < plan.collectives[0].wait);
}
