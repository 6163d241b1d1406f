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
// - later calls replay those kernels on the arguments' buffers, rebound by
//   position, and return fresh tensors holding the results. The function is
//   not called and no graph is built.
// Arguments are realized (and made contiguous) first. A call with another
// signature is a new signature: it runs, records and replays on its own.
// State carried from one call to the next must live in tensors the function
// updates with assign() (as an optimiser updates parameters); a recording that
// rebinds a tensor outliving the call to a new buffer cannot replay, and the
// function then simply runs on every call (captured() says which). Not
// thread-safe: one Capture is called from one thread at a time.
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
