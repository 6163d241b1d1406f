#pragma once
// The scheduler's interface to the engine: tensor-level graphs in, an ordered
// list of kernels out. Each kernel is an AST (docs/kernel-ir.md) that refers to
// buffers only by argument slot, plus the buffers bound to those slots.
#include "ir/target.hpp"
#include "ir/uop.hpp"

#include <functional>
#include <string>
#include <vector>

namespace loom {

// Makes the BUFFER node standing for a fresh buffer. The engine passes
// placeholders without memory and binds real buffers after scheduling
// (src/plan.hpp), so a schedule is a plan it can cache and run again. The
// size is the buffer's elements, symbolic when the graph's sizes are.
using BufferFactory = std::function<UOpPtr(DType dtype, const Dim& size)>;

struct ScheduledKernel {
  UOpPtr ast;                   // SINK of END(STORE ...)s with DEFINE_GLOBAL slots
  std::vector<UOpPtr> buffers;  // slot -> tensor-level BUFFER node: [0, outputs) stored, then those read
  std::string name;             // unique within the schedule, given at kernel split (ir/kernel_name.hpp)
  size_t outputs = 1;           // buffers the kernel stores (docs/kernel-ir.md, several outputs)
};

struct Schedule {
  std::vector<ScheduledKernel> kernels;  // in dependency order
  std::vector<UOpPtr> results;           // per target: a view of its BUFFER with the target's shape
};

// Is `u` already realized: a BUFFER, or a RESHAPE of one (a contiguous view)?
bool is_buffer_view(const UOpPtr& u);

// What the scheduler is told of the code generator: the width of a register
// tile's column panel in bytes (schedule/panel_packing.hpp; 0: no tiles, so
// no packing), and its rows, the height of a's row panels (0: a not packed),
// and the rows of k it sums per block (kc, which sizes the panel's share of L1);
// and the machine the kernels are for, whose caches size the stages' blocks.
struct ScheduleOptions {
  int64_t panel_bytes = 0;
  int64_t panel_rows = 0;
  int64_t panel_depth = 0;
  Target target = current_target();
};

// `into[i]`, when given and not null, is an existing BUFFER that target i is
// stored into (assign). Every other kernel that reads that buffer's old value
// is ordered before the write. Where that is impossible (a kernel needs both
// the old value and the new one) or the writing kernel reads the buffer at
// another element than the one it writes, target i gets a fresh buffer, as if
// `into[i]` were null.
Schedule create_schedule(const std::vector<UOpPtr>& targets, const BufferFactory& make_buffer,
                         const std::vector<UOpPtr>& into = {}, const ScheduleOptions& options = {});

}  // namespace loom
