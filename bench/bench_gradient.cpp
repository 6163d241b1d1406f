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

// Realizes `loss(x)` each iteration; with `backward`, the gradient in the same realize.
template <class Loss>
void run(benchmark::State& state, Loss loss_of, bool backward, int64_t bytes_per_element) {
  const int64_t n = state.range(0);
  loom::Tensor x = input(n).requires_grad_();
  for (auto _ : state) {
    loom::Tensor loss = loss_of(x);
    if (backward) {
      loss.backward();
      loom::realize({loss, x.grad()});
      x.zero_grad();
    } else {
      loss.realize();
    }
    benchmark::DoNotOptimize(loss);
  }
  state.SetBytesProcessed(state.iterations() * n * bytes_per_element);
}

loom::Tensor sum(const loom::Tensor& x) { return x.sum(); }
loom::Tensor l2_norm(const loom::Tensor& x) { return x.square().sum().sqrt(); }

// x.sum(): one pass over x; its gradient is ones, written once.
void sum_forward(benchmark::State& state) { run(state, sum, false, 4); }
void sum_forward_backward(benchmark::State& state) { run(state, sum, true, 8); }
BENCHMARK(sum_forward)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(sum_forward_backward)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();

// |x|: one pass over x; with its gradient x / |x|, the reduce once, then one pass reading x and
// writing the gradient.
void l2_norm_forward(benchmark::State& state) { run(state, l2_norm, false, 4); }
void l2_norm_forward_backward(benchmark::State& state) { run(state, l2_norm, true, 12); }
BENCHMARK(l2_norm_forward)->Arg(1 << 20)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(l2_norm_forward_backward)->Arg(1 << 20)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
