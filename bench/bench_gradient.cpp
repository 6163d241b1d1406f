// The cost of symbolic gradients, measured, never asserted: run
//   ./build/bench/bench_gradient --benchmark_min_time=0.5
// and bench/torch_gradient.py for PyTorch on the same machine. Each
// forward+backward iteration is one realize of the loss with the gradient, as
// a training step reads them; the ratio to the forward alone is the point.
#include <loom/loom.hpp>

#include <benchmark/benchmark.h>

namespace {

loom::Tensor input(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97) * 0.01f - 0.5f;
  return loom::Tensor::from_vector(v, {n});
}

void report(benchmark::State& state, int64_t bytes_per_iteration) {
  state.SetBytesProcessed(state.iterations() * bytes_per_iteration);
}

// x.sum(): one pass over x.
void sum_forward(benchmark::State& state) {
  const int64_t n = state.range(0);
  loom::Tensor x = input(n).requires_grad_();
  for (auto _ : state) {
    loom::Tensor loss = x.sum();
    loss.realize();
    benchmark::DoNotOptimize(loss);
  }
  report(state, n * 4);
}

// x.sum() and its gradient (ones, written once).
void sum_forward_backward(benchmark::State& state) {
  const int64_t n = state.range(0);
  loom::Tensor x = input(n).requires_grad_();
  for (auto _ : state) {
    loom::Tensor loss = x.sum();
    loss.backward();
    loom::realize({loss, x.grad()});
    x.zero_grad();
    benchmark::DoNotOptimize(loss);
  }
  report(state, n * 8);
}
BENCHMARK(sum_forward)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(sum_forward_backward)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();

// |x| = x.square().sum().sqrt(): one pass over x.
void l2_norm_forward(benchmark::State& state) {
  const int64_t n = state.range(0);
  loom::Tensor x = input(n).requires_grad_();
  for (auto _ : state) {
    loom::Tensor norm = x.square().sum().sqrt();
    norm.realize();
    benchmark::DoNotOptimize(norm);
  }
  report(state, n * 4);
}

// |x| and its gradient x / |x|: the reduce once, then one pass reading x and writing the gradient.
void l2_norm_forward_backward(benchmark::State& state) {
  const int64_t n = state.range(0);
  loom::Tensor x = input(n).requires_grad_();
  for (auto _ : state) {
    loom::Tensor norm = x.square().sum().sqrt();
    norm.backward();
    loom::realize({norm, x.grad()});
    x.zero_grad();
    benchmark::DoNotOptimize(norm);
  }
  report(state, n * 12);
}
BENCHMARK(l2_norm_forward)->Arg(1 << 20)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(l2_norm_forward_backward)->Arg(1 << 20)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
