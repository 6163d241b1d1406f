#pragma once
// Counters that tests and tools read to see what the engine did.
#include <cstdint>

namespace loom {

struct Counters {
  uint64_t kernels_compiled = 0;
  uint64_t kernels_executed = 0;
  uint64_t schedules_built = 0;
};
Counters counters();
void reset_counters();

namespace detail {
void count_kernel_compiled();
void count_kernel_executed();
void count_schedule_built();
}  // namespace detail

}  // namespace loom
