#pragma once
// Kernel names a reader can place: the kind and the range sizes, the same in
// every run, process, dump, trace and error message.
//
//   r_1024_1024   a kernel with a REDUCE: output range 1024, reduce range 1024
//   E_4096_16     an elementwise kernel over 4096 x 16
//   E_4096_16_h3f2a, E_4096_16_h91c0   two different kernels of one schedule
//
// Sizes come from the kernel as scheduled: output ranges first, then reduce
// ranges, each group in axis-id order; a symbolic size prints as its variable's
// name. A scalar kernel is `E_1`. A kernel of several outputs lists every END's
// ranges: `r_512_25_32_256_256` is a weight gradient's [512, 25 x 32] over a batch of
// 256 and its bias gradient's own sum over the 256 (docs/kernel-ir.md).
#include "ir/uop.hpp"

#include <string>
#include <vector>

namespace loom {

// The name of `kernel` taken alone: the kind and the range sizes, no suffix.
std::string kernel_name(const UOpPtr& kernel);

// Names for the kernels of one schedule. Where distinct kernels share a name,
// each gets `_h` and the leading hex digits of its structural hash (UOp::hash),
// at least four and as many as tell the group apart. Equal kernels get equal
// names. The result depends on the set of kernels, never on their order.
std::vector<std::string> kernel_names(const std::vector<UOpPtr>& kernels);

}  // namespace loom
