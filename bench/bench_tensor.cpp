// Speed of the first slice, measured, never asserted: run
//   ./build/bench/bench_tensor --benchmark_min_time=0.05
// Kernels are compiled in the first iteration and cached after, so these time
// scheduling + running a cached kernel, as a training loop's steps would.
#include <loom/loom.hpp>

#include <benchmark/benchmark.h>

#include <numeric>

namespace {

loom::Tensor input(int64_t rows, int64_t cols, float scale) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97) * scale - 1.0f;
  return loom::Tensor::from_vector(v, {rows, cols});
}

// (a*b+c).relu().exp() on [n, n]: one fused kernel, 3 loads and 1 store per element.
void fused_elementwise(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto a = input(n, n, 0.01f), b = input(n, n, 0.02f), c = input(n, n, 0.03f);
  for (auto _ : state) {
    auto y = ((a * b + c).relu() * 0.1f).exp();
    y.realize();
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * n * n * 4 * 4);
}
BENCHMARK(fused_elementwise)->Arg(256)->Arg(1024)->Arg(2048)->Unit(benchmark::kMicrosecond);

// x / x.sum(1, true): a row reduce and a broadcast divide, two kernels.
void normalize_rows(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto x = input(n, n, 0.01f);
  for (auto _ : state) {
    auto y = x / x.sum(1, true);
    y.realize();
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * n * n * 4 * 3);
}
BENCHMARK(normalize_rows)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

// Sum of a large vector: one reduce kernel.
void sum_all(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto x = input(1, n, 0.001f).reshape({n});
  for (auto _ : state) {
    float s = x.sum().item<float>();
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(state.iterations() * n * 4);
}
BENCHMARK(sum_all)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
