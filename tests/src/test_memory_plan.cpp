// The memory planner: dead intermediates' memory is reused inside one plan,
// never a result's, never a buffer still to be read.
#include "src/memory_plan.hpp"

#include "check.hpp"
#include "src/engine.hpp"

#include <loom/debug.hpp>

using namespace loom;
using namespace loom::detail;

namespace {
// A plan over no inputs: kernel k writes args[k][0] (its one output) and reads the rest; all
// allocations hold `size` floats.
Plan chain(const std::vector<std::vector<uint32_t>>& kernels, size_t allocations,
           std::vector<uint32_t> results, int64_t size = 256) {
  Plan plan;
  for (size_t j = 0; j < allocations; ++j) plan.allocations.push_back({DType::Float32, size});
  for (const auto& args : kernels) plan.kernels.push_back({nullptr, "k", args, 1});
  for (uint32_t r : results) plan.results.push_back({r, std::nullopt});
  share_dead_buffers(plan);
  return plan;
}
}  // namespace

TEST_CASE("a chain of intermediates needs two blocks; the result takes a dead one") {
  // t0 -> t1 -> t2 -> t3 (result): t2 reuses t0's block, t3 reuses t1's.
  const Plan plan = chain({{0}, {1, 0}, {2, 1}, {3, 2}}, 4, {3});
  CHECK(plan.memory[0].owner == 0);
  CHECK(plan.memory[1].owner == 1);
  CHECK(plan.memory[2].owner == 0);
  CHECK(plan.memory[3].owner == 1);
  CHECK(plan.memory[0].bytes == 256 * 4);
}

TEST_CASE("a buffer read later, or a result, is never given away") {
  // t0 is read by the last kernel: nothing may take it. t1 is a result.
  // t2 is read by the kernel writing t3, so it is not dead there either.
  const Plan plan = chain({{0}, {1, 0}, {2, 1}, {3, 2, 0}}, 4, {1, 3});
  for (uint32_t j = 0; j < 4; ++j) CHECK(plan.memory[j].owner == j);
  // Without the late read of t0 and with t1 no result, t3 reuses t0 or t1's block.
  const Plan freer = chain({{0}, {1, 0}, {2, 1}, {3, 2}}, 4, {3});
  CHECK(freer.memory[3].owner != 3);
}

TEST_CASE("every output of a kernel of two outputs is a first write, and frees its block once read") {
  // k1 writes t1 and t2 (reading t0), k2 reads both and writes t3 (in t0's block), k3 writes
  // t4 and t5 reading t3: the blocks of t1 and t2, both dead after k2.
  Plan plan;
  plan.allocations.assign(6, {DType::Float32, 256});
  plan.kernels = {{nullptr, "k", {0}, 1},
                  {nullptr, "k", {1, 2, 0}, 2},
                  {nullptr, "k", {3, 1, 2}, 1},
                  {nullptr, "k", {4, 5, 3}, 2}};
  plan.results = {{4, std::nullopt}, {5, std::nullopt}};
  share_dead_buffers(plan);
  CHECK(plan.memory[1].owner == 1);
  CHECK(plan.memory[2].owner == 2);  // t0 is read by the kernel writing t2: not dead there
  CHECK(plan.memory[3].owner == 0);
  CHECK(std::min(plan.memory[4].owner, plan.memory[5].owner) == 1);
  CHECK(std::max(plan.memory[4].owner, plan.memory[5].owner) == 2);
}

TEST_CASE("only a block of the same size class is reused") {
  Plan plan;
  plan.allocations = {{DType::Float32, 256}, {DType::Float32, 100000}, {DType::Float64, 128}};
  plan.kernels = {{nullptr, "k", {0}, 1}, {nullptr, "k", {1, 0}, 1}, {nullptr, "k", {2, 1}, 1}};
  plan.results = {{2, std::nullopt}};
  share_dead_buffers(plan);
  CHECK(plan.memory[1].owner == 1);  // another class than t0's
  CHECK(plan.memory[2].owner == 0);  // 128 doubles: t0's 256 floats' class, and t0 is dead
}

TEST_CASE("a realize with shared intermediates gives the reference's answers") {
  Tensor x = test::make(DType::Float32, test::iota(64 * 16, 0.01), {64, 16});
  Tensor y = x.softmax(1).softmax(1).softmax(1) * 2;
  test::check_ref(y, 4);
}

TEST_CASE("a collective's buffer stays its own until the collective has run") {
  // k0 writes t0, which an in-place collective after k1 reads and writes; k1 writes t1,
  // k2 reads t1. Were t0 free after k0 (its last kernel), t1 would take its block and k1 would
  // overwrite what the collective is about to send.
  Plan plan;
  for (int j = 0; j < 3; ++j) plan.allocations.push_back({DType::Float32, 256});
  for (const auto& args : std::vector<std::vector<uint32_t>>{{0}, {1}, {2, 1}})
    plan.kernels.push_back({nullptr, "k", args, 1});
  plan.collectives.push_back({CollectiveArg{}, 0, 0, DType::Float32, 256, 2, 2, "all_reduce(sum) #0"});
  plan.results.push_back({2, std::nullopt});
  share_dead_buffers(plan);
  CHECK(plan.memory[1].owner == 1);
  // Without the collective, t1 does take t0's block: the check above can fail.
  plan.collectives.clear();
  share_dead_buffers(plan);
  CHECK(plan.memory[1].owner == 0);
}

TEST_CASE("a travelling collective's buffers stay its own until it is waited for") {
  // k0 writes t0, which a collective (not in place: into t4) sends from its start after k0 to
  // its wait before k3; k1 and k2 run meanwhile, and k2 writes t2. Were t0 free once the
  // collective had started, t2 would take its block and overwrite what is being sent.
  Plan plan;
  for (int j = 0; j < 5; ++j) plan.allocations.push_back({DType::Float32, 256});
  for (const auto& args : std::vector<std::vector<uint32_t>>{{0}, {1}, {2, 1}, {3, 4, 2}})
    plan.kernels.push_back({nullptr, "k", args, 1});
  plan.collectives.push_back({CollectiveArg{}, 0, 4, DType::Float32, 256, 1, 3, "all_reduce(sum) #0"});
  plan.results.push_back({3, std::nullopt});
  share_dead_buffers(plan);
  CHECK(plan.memory[2].owner == 2);
  CHECK(plan.memory[4].owner == 4);
  // Waited for at once (before k1), t0 is free for t2: the check above can fail.
  plan.collectives[0].wait = 1;
  share_dead_buffers(plan);
  CHECK(plan.memory[2].owner == 0);
}
