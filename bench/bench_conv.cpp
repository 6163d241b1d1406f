// nn::functional's convolution and pooling, measured, never asserted: run
//   LOOM_THREADS=2 ./build/bench/bench_conv --benchmark_min_time=0.5
// and bench/torch_conv.py for PyTorch (2 threads) on the same machine. A forward is one realize
// of the output; forward+backward one realize of both gradients of sum(y * y).
#include <loom/loom.hpp>

#include <benchmark/benchmark.h>

namespace {

namespace F = loom::nn::functional;

struct Conv {
  int64_t n, c, hw, out, k, stride, padding, groups;
};
// A ResNet 3x3 layer, a ResNet stem (7x7, stride 2) and a depthwise 3x3, at batch 8.
const Conv kConvs[] = {
    {8, 64, 56, 64, 3, 1, 1, 1}, {8, 3, 224, 64, 7, 2, 3, 1}, {8, 128, 28, 128, 3, 1, 1, 128}};

void conv(benchmark::State& state, bool backward) {
  const Conv& p = kConvs[state.range(0)];
  loom::Tensor x = loom::Tensor::rand({p.n, p.c, p.hw, p.hw}),
               w = loom::Tensor::rand({p.out, p.c / p.groups, p.k, p.k});
  loom::realize({x, w});
  if (backward) x.requires_grad_(), w.requires_grad_();
  auto step = [&] {
    const loom::Tensor y = F::conv2d(x, w, {}, p.stride, p.padding, 1, p.groups);
    if (backward) {
      const std::vector<loom::Tensor> g = loom::gradient((y * y).sum(), {x, w});
      loom::realize({g[0], g[1]});
    } else {
      loom::Tensor(y).realize();
    }
  };
  step();  // compiles; the loop measures cached plans
  for (auto _ : state) step();
  const int64_t o = (p.hw + 2 * p.padding - p.k) / p.stride + 1;
  const double flops = 2.0 * static_cast<double>(p.n * p.out * o * o * (p.c / p.groups) * p.k * p.k);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * (backward ? 3 : 1) * 1e-9 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}
void conv2d_forward(benchmark::State& state) { conv(state, false); }
void conv2d_forward_backward(benchmark::State& state) { conv(state, true); }
BENCHMARK(conv2d_forward)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(conv2d_forward_backward)
    ->DenseRange(0, 2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(2);

void max_pool2d_forward(benchmark::State& state) {
  loom::Tensor x = loom::Tensor::rand({8, 64, 56, 56});
  x.realize();
  F::max_pool2d(x, 2).realize();  // compiles
  for (auto _ : state) F::max_pool2d(x, 2).realize();
}
BENCHMARK(max_pool2d_forward)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
