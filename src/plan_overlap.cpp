#include "src/plan_overlap.hpp"

#include <algorithm>
#include <unordered_map>

namespace loom::detail {

namespace {
bool writes(const PlanKernel& k, uint32_t buffer) {
  return std::find(k.args.begin(), k.args.begin() + static_cast<std::ptrdiff_t>(k.outputs), buffer) !=
         k.args.begin() + static_cast<std::ptrdiff_t>(k.outputs);
}
bool touches(const PlanKernel& k, uint32_t buffer) {
  return std::find(k.args.begin(), k.args.end(), buffer) != k.args.end();
}

// Per kernel of the part (indices relative to `first`): the earlier kernels it
// must follow, because they write what it reads or touch what it writes.
std::vector<std::vector<size_t>> dependencies(const std::vector<PlanKernel>& kernels, size_t first) {
  const size_t n = kernels.size() - first;
  std::vector<std::vector<size_t>> deps(n);
  std::unordered_map<uint32_t, size_t> writer;                // buffer -> its last writer
  std::unordered_map<uint32_t, std::vector<size_t>> readers;  // buffer -> readers since then
  for (size_t j = 0; j < n; ++j) {
    const PlanKernel& k = kernels[first + j];
    for (size_t slot = 0; slot < k.args.size(); ++slot) {
      const uint32_t b = k.args[slot];
      if (const auto w = writer.find(b); w != writer.end() && w->second != j) deps[j].push_back(w->second);
      if (slot < k.outputs)
        for (size_t r : readers[b])
          if (r != j) deps[j].push_back(r);
    }
    for (size_t slot = 0; slot < k.args.size(); ++slot) {
      const uint32_t b = k.args[slot];
      if (slot < k.outputs) {
        writer[b] = j;
        readers[b].clear();
      } else {
        readers[b].push_back(j);
      }
    }
  }
  return deps;
}
}  // namespace

std::vector<size_t> order_for_inputs(std::vector<PlanKernel>& kernels, size_t first,
                                     const std::vector<std::vector<uint32_t>>& inputs) {
  const size_t n = kernels.size() - first;
  const std::vector<std::vector<size_t>> deps = dependencies(kernels, first);
  std::vector<char> placed(n, 0);
  std::vector<size_t> order;  // part-relative kernel indices, in their new order
  // The kernels collective i's inputs still need: their writers and the writers'
  // dependencies, not yet placed.
  auto needs = [&](const std::vector<uint32_t>& buffers) {
    std::vector<char> in(n, 0);
    std::vector<size_t> stack;
    for (size_t j = 0; j < n; ++j)
      for (const uint32_t b : buffers)
        if (!placed[j] && !in[j] && writes(kernels[first + j], b)) in[j] = 1, stack.push_back(j);
    while (!stack.empty()) {
      const size_t j = stack.back();
      stack.pop_back();
      for (size_t d : deps[j])
        if (!placed[d] && !in[d]) in[d] = 1, stack.push_back(d);
    }
    return in;
  };
  std::vector<size_t> done;
  std::vector<char> taken(inputs.size(), 0);
  for (size_t round = 0; round < inputs.size(); ++round) {
    size_t best = inputs.size(), best_count = 0;
    std::vector<char> best_set;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (taken[i]) continue;
      std::vector<char> set = needs(inputs[i]);
      const auto count = static_cast<size_t>(std::count(set.begin(), set.end(), 1));
      if (best == inputs.size() || count < best_count)
        best = i, best_count = count, best_set = std::move(set);
    }
    taken[best] = 1;
    done.push_back(best);
    for (size_t j = 0; j < n; ++j)  // in the part's order: a dependency before its dependents
      if (best_set[j]) placed[j] = 1, order.push_back(j);
  }
  for (size_t j = 0; j < n; ++j)
    if (!placed[j]) order.push_back(j);
  std::vector<PlanKernel> part;
  part.reserve(n);
  for (size_t j : order) part.push_back(std::move(kernels[first + j]));
  std::move(part.begin(), part.end(), kernels.begin() + static_cast<std::ptrdiff_t>(first));
  return done;
}

size_t ready_after(const std::vector<PlanKernel>& kernels, const std::vector<uint32_t>& buffers) {
  for (size_t k = kernels.size(); k > 0; --k)
    for (const uint32_t b : buffers)
      if (writes(kernels[k - 1], b)) return k;
  return 0;
}

void set_waits(Plan& plan) {
  for (size_t i = 0; i < plan.collectives.size(); ++i) {
    PlanCollective& c = plan.collectives[i];
    auto mine = [&](uint32_t b) { return b == c.input || b == c.output; };
    c.wait = plan.kernels.size();
    for (size_t k = c.after; k < plan.kernels.size(); ++k)
      if (touches(plan.kernels[k], c.input) || touches(plan.kernels[k], c.output)) {
        c.wait = k;
        break;
      }
    for (size_t j = i + 1; j < plan.collectives.size(); ++j)
      if (mine(plan.collectives[j].input) || mine(plan.collectives[j].output))
        c.wait = std::min(c.wait, plan.collectives[j].after);
  }
}

}  // namespace loom::detail
