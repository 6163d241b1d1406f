// Training steps per second, measured, never asserted: run
//   ./build/bench/bench_train --benchmark_min_time=2
// One iteration is a whole step of the moons example (forward, cross-entropy,
// backward, update: one realize); kernels and plans are cached after the first.
// PyTorch's figure for the same loop: bench/moons_torch.py.
#include "moons.hpp"

#include <benchmark/benchmark.h>

#include <memory>

namespace {

void moons_step(benchmark::State& state, bool adam) {
  loom::manual_seed(0);
  const moons::Data data = moons::make_moons(200, 0.1, 42);
  const loom::Tensor x = data.x(), y = data.y();
  moons::MLP model;
  std::unique_ptr<loom::optim::Optimizer> opt;
  if (adam)
    opt = std::make_unique<loom::optim::Adam>(model.parameters(), 1e-2);
  else
    opt = std::make_unique<loom::optim::SGD>(model.parameters(), 0.5);
  for (auto _ : state) {
    opt->zero_grad();
    loom::Tensor loss = loom::nn::cross_entropy(model(x), y);
    loss.backward();
    opt->step();
  }
  state.counters["steps/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK_CAPTURE(moons_step, sgd, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(moons_step, adam, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
