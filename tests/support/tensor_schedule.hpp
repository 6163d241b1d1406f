#pragma once
// The kernels the scheduler makes for tensors, without running or allocating
// anything, and the nodes of one op in them: what inspection tests count.
#include "support/graph_builders.hpp"

#include <loom/loom.hpp>

#include <vector>

namespace loom::test {

inline Schedule kernel_asts_of(const std::vector<Tensor>& targets) {
  std::vector<UOpPtr> roots;
  for (const Tensor& t : targets) roots.push_back(t.node()->uop);
  gb::FakeBuffers fb;
  return create_schedule(roots, fb.factory());
}

inline std::vector<UOpPtr> nodes_of(const Schedule& s, Op op) {
  std::vector<UOpPtr> out;
  for (const auto& k : s.kernels)
    for (const auto& n : toposort(k.ast))
      if (n->op == op) out.push_back(n);
  return out;
}

}  // namespace loom::test
