#pragma once
// The random generator's state (manual_seed, in <loom/tensor.hpp>, sets it):
// what a checkpoint saves so that a resumed run draws the numbers (dropout
// masks) the uninterrupted run would have. docs/api.md, "Random numbers".
#include <loom/tensor.hpp>

namespace loom {

// As torch.get_rng_state/set_rng_state: an Int64 [2] tensor holding the seed's
// bits and the blocks drawn since it was set. After set_rng_state(s), the next
// draws are those that followed the state s. A state of another dtype or shape
// is an error.
Tensor get_rng_state();
void set_rng_state(const Tensor& state);

}  // namespace loom
