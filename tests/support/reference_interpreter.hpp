#pragma once
// The reference interpreter: the tests' oracle for tensor-level UOp graphs.
// It evaluates a graph with plain nested loops over flat row-major vectors,
// node by node in toposort order, and shares no code with schedule/ or codegen/
// (it stands on ir/ alone), so a compiled result that agrees with it was not
// checked against itself. Element semantics: support/reference_scalar.hpp.
#include "ir/uop.hpp"
#include "support/reference_tensor.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace loom::ref {

// The raw bytes of a BUFFER node: size elements of its dtype.
using BufferSource = std::function<const void*(const UOpPtr& buffer)>;
// Sees every node's value as it is computed (the fuzzer measures magnitudes with it).
using NodeObserver = std::function<void(const UOpPtr& node, const RefTensor& value)>;

// Evaluates the tensor-level graph under `root`. BUFFER contents come from
// `buffers` (asked once per buffer), DEFINE_VAR values from `vars` (by name).
// An ASSIGN evaluates to its value; its target is not read. REDUCE_AXIS
// accumulates in its own dtype (a source of another dtype is cast first).
// Kernel-level ops, ill-formed args and mismatched shapes or dtypes throw
// loom::Error naming the op.
RefTensor evaluate(const UOpPtr& root, const BufferSource& buffers,
                   const std::map<std::string, int64_t>& vars = {}, const NodeObserver& observe = {});

}  // namespace loom::ref
