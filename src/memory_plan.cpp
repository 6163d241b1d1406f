#include "src/memory_plan.hpp"

#include "runtime/buffer.hpp"

#include <algorithm>
#include <map>

namespace loom::detail {

namespace {
constexpr size_t kNever = ~size_t{0};

int64_t bytes_of(const PlanBuffer& a) { return a.size * a.dtype.itemsize(); }
}  // namespace

void share_dead_buffers(Plan& plan) {
  const size_t n = plan.allocations.size();
  plan.memory.assign(n, {});
  std::vector<size_t> first(n, kNever), last(n, kNever);  // kernels writing first / reading last
  std::vector<char> result(n, 0);
  for (const auto& r : plan.results)
    if (r.buffer >= plan.inputs) result[r.buffer - plan.inputs] = 1;
  for (size_t k = 0; k < plan.kernels.size(); ++k)
    for (size_t slot = 0; slot < plan.kernels[k].args.size(); ++slot) {
      const uint32_t t = plan.kernels[k].args[slot];
      if (t < plan.inputs) continue;
      const size_t j = t - plan.inputs;
      if (slot < plan.kernels[k].outputs && first[j] == kNever) first[j] = k;
      last[j] = k;
    }
  // A collective uses its buffers from its start (before kernel `after`) until it
  // is waited for (before kernel `wait`): none is free before kernel `wait` has run.
  // A bucket's pieces are copied in when it starts: none is free before kernel `after`.
  for (const auto& c : plan.collectives) {
    for (const uint32_t t : {c.input, c.output}) {
      if (t < plan.inputs) continue;
      size_t& l = last[t - plan.inputs];
      l = l == kNever ? c.wait : std::max(l, c.wait);
    }
    for (const BucketPiece& p : c.pieces) {
      if (p.buffer < plan.inputs) continue;
      size_t& l = last[p.buffer - plan.inputs];
      l = l == kNever ? c.after : std::max(l, c.after);
    }
  }
  for (size_t j = 0; j < n; ++j) plan.memory[j] = {static_cast<uint32_t>(j), bytes_of(plan.allocations[j])};
  // Free blocks by size class: a block is reused only by a buffer of its class, so
  // sharing never grows a block by more than its class allows.
  std::map<size_t, std::vector<uint32_t>> free_blocks;
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    for (size_t j = 0; j < n; ++j) {
      if (first[j] != k) continue;
      auto& blocks = free_blocks[buffer_size_class(static_cast<size_t>(bytes_of(plan.allocations[j])))];
      if (blocks.empty()) continue;
      const uint32_t owner = blocks.back();
      blocks.pop_back();
      plan.memory[j].owner = owner;
      plan.memory[owner].bytes = std::max(plan.memory[owner].bytes, bytes_of(plan.allocations[j]));
    }
    for (size_t j = 0; j < n; ++j)
      if (last[j] == k && !result[j] && first[j] != kNever)
        free_blocks[buffer_size_class(static_cast<size_t>(bytes_of(plan.allocations[j])))].push_back(
            plan.memory[j].owner);
  }
}

}  // namespace loom::detail
