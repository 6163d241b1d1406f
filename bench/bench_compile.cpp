// What a program waits for before its first step: scheduling and compiling
// kernels never seen before. Run
//   ./build/bench/bench_compile --benchmark_min_time=0.5
// Each iteration builds its graphs with constants no earlier iteration used,
// so every kernel is new to the kernel cache; the disk cache is off. "CPU" is
// the process's CPU time (kernels compile on the arena's threads), "Time" the
// wall clock; LOOM_DEBUG=2 prints each kernel's compile time by phase.
#include <loom/loom.hpp>

#include <benchmark/benchmark.h>

#include <vector>

namespace {

loom::Tensor input(int64_t rows, int64_t cols, float scale) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97) * scale - 1.0f;
  return loom::Tensor::from_vector(v, {rows, cols});
}

// A distinct constant per iteration: a new kernel every time.
float fresh() {
  static int n = 0;
  return 1.0f + static_cast<float>(++n) * 1e-6f;
}

// The forward pass of the moons MLP (2-16-16-2 on 200 points) with softmax:
// the first realize schedules and compiles all of its kernels.
void first_mlp_forward(benchmark::State& state) {
  loom::Context off{{"CACHE_DIR", "off"}};
  auto x = input(200, 2, 0.01f), w1 = input(2, 16, 0.1f), w2 = input(16, 16, 0.05f), w3 = input(16, 2, 0.1f);
  for (auto _ : state) {
    const float c = fresh();
    auto h = (x.matmul(w1) * c).relu();
    h = (h.matmul(w2) + c).relu();
    auto p = h.matmul(w3).softmax(1).sum(0);
    p.realize();
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(first_mlp_forward)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

// Tensor::rand: the Philox4x32-10 kernel for a new shape (small: the light
// pipeline; large: O2).
void first_rand(benchmark::State& state) {
  loom::Context off{{"CACHE_DIR", "off"}};
  int64_t n = state.range(0);
  for (auto _ : state) {
    auto r = loom::Tensor::rand({++n});
    r.realize();
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(first_rand)
    ->Arg(256)
    ->Arg(1 << 16)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// cat of 200 small realized tensors: one kernel that reads all of them.
void first_cat_200(benchmark::State& state) {
  loom::Context off{{"CACHE_DIR", "off"}};
  std::vector<loom::Tensor> parts;
  for (int i = 0; i < 200; ++i) parts.push_back(input(4, 8, 0.01f * static_cast<float>(i)));
  for (auto _ : state) {
    auto c = loom::cat(parts, 0) * fresh();
    c.realize();
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(first_cat_200)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
