#pragma once
// The engine's side of loom::Capture: while a Capture records a call on this
// thread, every plan the engine runs reports its kernels, buffers and the
// tensor nodes it bound (src/capture.cpp keeps them).
#include "ir/flags.hpp"
#include "src/plan.hpp"
#include "src/tensor_node.hpp"

#include <memory>
#include <vector>

namespace loom::detail {

// Called by the engine after running `plan` over `table`, before pointing
// `pending[i]` at target i's result. A no-op unless a recording is active.
// `values` are the run's values of the plan's variables (Plan::variables).
void record_plan_run(const Plan& plan, const std::vector<UOpPtr>& table, const std::vector<int64_t>& values,
                     const std::vector<std::shared_ptr<TensorNode>>& pending, const Flags& flags);

}  // namespace loom::detail
