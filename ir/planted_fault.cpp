#include "ir/planted_fault.hpp"

#include <atomic>

namespace loom {

namespace {
std::atomic<PlantedFault> current{PlantedFault::None};
}

void set_planted_fault(PlantedFault fault) { current.store(fault, std::memory_order_relaxed); }
PlantedFault planted_fault() { return current.load(std::memory_order_relaxed); }

}  // namespace loom
