// nn::functional's convolution and pooling, measured, never asserted: run
//   LOOM_THREADS=2 ./build/bench/bench_conv --benchmark_min_time=0.5
// and bench/torch_conv.py for PyTorch (2 threads) on the same machine; bench/compare runs both. A forward is
// one realize of the output; forward+backward one realize of both gradients of sum(y * y).
#include <loom/loom.hpp>

#include <benchmark/benchmark.h>

#include <string>

namespace {

namespace F = loom::nn::functional;

struct Conv {
  const char* name;
  int64_t n, c, hw, out, k, stride, padding, groups;
};
// bench/compare's rows (bench/peers/peers.py runs the same in PyTorch): a ResNet 3x3 layer, a
// ResNet stem (7x7, stride 2) and a depthwise 3x3 at batch 64, as issue 26 asks; and the same
// at batch 8, quicker to run by hand.
const Conv kConvs[] = {
    {"conv2d_3x3_64x64x56x56", 64, 64, 56, 64, 3, 1, 1, 1},
    {"conv2d_stem_64x3x224x224", 64, 3, 224, 64, 7, 2, 3, 1},
    {"conv2d_depthwise_64x128x28x28", 64, 128, 28, 128, 3, 1, 1, 128},
    {"conv2d_3x3_8x64x56x56", 8, 64, 56, 64, 3, 1, 1, 1},
    {"conv2d_stem_8x3x224x224", 8, 3, 224, 64, 7, 2, 3, 1},
    {"conv2d_depthwise_8x128x28x28", 8, 128, 28, 128, 3, 1, 1, 128},
};

void conv(benchmark::State& state, const Conv& p, bool backward) {
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

const bool kRegistered = [] {
  for (const Conv& p : kConvs) {
    benchmark::RegisterBenchmark((std::string(p.name) + "_forward").c_str(),
                                 [&p](benchmark::State& s) { conv(s, p, false); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((std::string(p.name) + "_forward_backward").c_str(),
                                 [&p](benchmark::State& s) { conv(s, p, true); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(p.n > 8 ? 1 : 2);
  }
  return true;
}();

// A decoder's upsampling: a strided transposed conv (src/nn_conv_phase.hpp), loom only.
void conv_transpose2d_8x64x28x28(benchmark::State& state, bool backward) {
  loom::Tensor x = loom::Tensor::rand({8, 64, 28, 28}), w = loom::Tensor::rand({64, 32, 4, 4});
  loom::realize({x, w});
  if (backward) x.requires_grad_(), w.requires_grad_();
  auto step = [&] {
    const loom::Tensor y = F::conv_transpose2d(x, w, {}, 2, 1);
    if (backward) {
      const std::vector<loom::Tensor> g = loom::gradient((y * y).sum(), {x, w});
      loom::realize({g[0], g[1]});
    } else {
      loom::Tensor(y).realize();
    }
  };
  step();  // compiles
  for (auto _ : state) step();
}
BENCHMARK_CAPTURE(conv_transpose2d_8x64x28x28, forward, false)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(conv_transpose2d_8x64x28x28, forward_backward, true)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void max_pool2d_forward(benchmark::State& state) {
  loom::Tensor x = loom::Tensor::rand({8, 64, 56, 56});
  x.realize();
  F::max_pool2d(x, 2).realize();  // compiles
  for (auto _ : state) F::max_pool2d(x, 2).realize();
}
BENCHMARK(max_pool2d_forward)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
