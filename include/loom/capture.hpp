#pragma once
// loom::Capture: records the kernels a step function runs and replays them
// without building a graph (docs/api.md, "Capture"). Like tinygrad's TinyJit.
#include <loom/tensor.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace loom {

// Wraps a function from tensors to tensors (a training step). Per argument
// signature (shapes, dtypes, which arguments share a buffer):
// - the first call runs the function as it is (it may compile, initialise);
// - the second call runs it too and records every kernel it ran, with the
//   buffers each kernel read and wrote;
// - later calls replay those kernels and return fresh tensors holding the
//   results. The function is not called and no graph is built.
// A replay binds the arguments' buffers by position, and every tensor the
// recorded call assigned (parameters, optimiser moments, a running mean) by
// identity: it reads and writes the buffer the tensor holds at that moment,
// wherever calls of other signatures, run or replayed in any order, moved it.
// Tensors the call only read are read in their recorded buffers while those
// live and no assign has moved the tensor off them. Arguments are realized
// (and made contiguous) first, except a slice of symbolic size of a buffer (a
// batch of B rows, a cache's first T rows): it is bound in place, its signature
// counts each binding as its variable, and a replay runs with its values. A recording that can no longer
// replay exactly (a tensor it binds is gone, changed size or moved) is dropped and the call records again; a
// signature whose recordings keep going stale runs the function on every call. State carried from one call to
// the next must live in tensors the function updates with assign() (as an optimiser updates parameters); a
// recording that reads what the call before it left in a rebound C++ variable cannot replay, and the function
// then simply runs on every call. captured() says which, LOOM_DEBUG=1 logs why. Not thread-safe: one Capture
// is called from one thread at a time.
class Capture {
 public:
  using Step = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  explicit Capture(Step step);

  std::vector<Tensor> operator()(const std::vector<Tensor>& args);

  // Whether calls with these arguments' signature now replay a recording.
  bool captured(const std::vector<Tensor>& args) const;
  // Kernels a replay with these arguments' signature runs (0 when not captured).
  size_t captured_kernels(const std::vector<Tensor>& args) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace loom
