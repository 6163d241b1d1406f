#pragma once
// The memory page, as the schedule's and the optimiser's cost rules see it.
#include <cstdint>

namespace loom {

// A step this long (a column walk down rows of a page or more) lands on a new
// page every time, where the hardware prefetchers stop following the stream.
inline constexpr int64_t kPageBytes = 4096;

}  // namespace loom
