// The machine's float32 fused multiply-add peak, in plain C++ over TBB: on each
// thread, independent FMA chains that never leave the registers, as wide as the
// host's vectors. bench/compare sets it beside loom's matmul rows as their
// ceiling (docs/performance.md). LOOM_TARGET=x86-64-v3 gives AVX2's peak.
//   LOOM_THREADS=2 ./build/bench/bench_peak --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

// Chains in flight: a core issues 2 FMAs per cycle with a latency of 4 or 5
// cycles, so at least 10 independent accumulators keep both pipes busy.
constexpr int kChains = 12;
constexpr int64_t kSteps = 1 << 18;  // FMA rounds per thread and iteration: about 0.5 ms

int threads() {
  const char* t = std::getenv("LOOM_THREADS");
  return t && std::atoi(t) > 0 ? std::atoi(t) : static_cast<int>(std::thread::hardware_concurrency());
}

// Each returns a sum of its chains, so the compiler cannot drop them.
__attribute__((target("avx2,fma"))) float chains_avx2(int64_t steps) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-6f);
  for (int64_t s = 0; s < steps; ++s) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], m, a);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  return _mm256_cvtss_f32(sum);
}

__attribute__((target("avx512f"))) float chains_avx512(int64_t steps) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-6f);
  for (int64_t s = 0; s < steps; ++s) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], m, a);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  return _mm512_reduce_add_ps(sum);
}

// LOOM_TARGET as loom reads it (docs/env.md), so the peak is the one loom's kernels
// may reach: x86-64-v3 is AVX2 with FMA whatever the host has beyond it, x86-64-v2
// has no FMA; native and x86-64-v4 take AVX-512 where the host has it.
std::string target() {
  const char* t = std::getenv("LOOM_TARGET");
  return t && *t ? t : "native";
}

void fma_peak(benchmark::State& state) {
  const std::string level = target();
  if (level == "x86-64-v2") {
    state.SkipWithError("LOOM_TARGET=x86-64-v2 has no FMA");
    return;
  }
  const bool avx512 = __builtin_cpu_supports("avx512f") && level != "x86-64-v3";
  if (!avx512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    state.SkipWithError("the host has neither AVX2 with FMA nor AVX-512");
    return;
  }
  const int n = threads(), lanes = avx512 ? 16 : 8;
  tbb::task_arena arena(n);
  for (auto _ : state) {
    arena.execute([&] {
      tbb::parallel_for(
          tbb::blocked_range<int>(0, n, 1),
          [&](const tbb::blocked_range<int>&) {
            benchmark::DoNotOptimize(avx512 ? chains_avx512(kSteps) : chains_avx2(kSteps));
          },
          tbb::static_partitioner());
    });
  }
  const double flops = 2.0 * lanes * kChains * static_cast<double>(kSteps) * n;
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = n;
  state.counters["lanes"] = lanes;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::RegisterBenchmark("fma_peak_f32", fma_peak)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
