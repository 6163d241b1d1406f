// STREAM's four kernels (McCalpin) on this machine, in plain C++ over TBB: the
// memory bandwidth a streaming kernel can reach, which bench/compare sets
// beside loom's add [4096,4096] (docs/performance.md). Bytes are counted as
// STREAM counts them: each array read or written once (Add: 3 x 4 bytes per
// element), not the write-allocate read a cached store also costs.
//   LOOM_THREADS=2 ./build/bench/bench_stream --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

namespace {

constexpr int64_t kElements = 4096 * 4096;  // the add row's arrays: 64 MB of float each, 2x the L3

int threads() {
  const char* t = std::getenv("LOOM_THREADS");
  return t && std::atoi(t) > 0 ? std::atoi(t) : static_cast<int>(std::thread::hardware_concurrency());
}

// The same static split in every run, so each thread touches the pages it first wrote.
template <class Body>
void in_parallel(tbb::task_arena& arena, Body body) {
  arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, kElements, kElements / 64),
        [&](const tbb::blocked_range<int64_t>& r) { body(r.begin(), r.end()); }, tbb::static_partitioner());
  });
}

struct Arrays {
  std::unique_ptr<float[]> a{new float[kElements]}, b{new float[kElements]}, c{new float[kElements]};
  explicit Arrays(tbb::task_arena& arena) {
    in_parallel(arena, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) a[i] = 1.0f, b[i] = 2.0f, c[i] = 0.0f;
    });
  }
};

// `kernel(a, b, c, lo, hi)` over the arrays; `arrays` of 4 bytes each per element.
template <class Kernel>
void stream(benchmark::State& state, int arrays, Kernel kernel) {
  tbb::task_arena arena(threads());
  Arrays x(arena);
  for (auto _ : state) {
    in_parallel(arena, [&](int64_t lo, int64_t hi) { kernel(x.a.get(), x.b.get(), x.c.get(), lo, hi); });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * arrays * kElements * 4);
  state.counters["threads"] = threads();
}

void register_kernels() {
  auto add = [](const char* name, auto fn) {
    benchmark::RegisterBenchmark(name, fn)->Unit(benchmark::kMillisecond)->UseRealTime();
  };
  add("stream_copy", [](benchmark::State& s) {
    stream(s, 2, [](float* a, float*, float* c, int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) c[i] = a[i];
    });
  });
  add("stream_scale", [](benchmark::State& s) {
    stream(s, 2, [](float*, float* b, float* c, int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) b[i] = 3.0f * c[i];
    });
  });
  add("stream_add", [](benchmark::State& s) {
    stream(s, 3, [](float* a, float* b, float* c, int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) c[i] = a[i] + b[i];
    });
  });
  // Not in STREAM: one array read and nothing written, what a plain loop reads at in a
  // reduction (a sum, a column sum, GEMV's b). Eight SSE partial sums of 4 lanes (GCC's vector
  // extension, not left to the auto-vectoriser, which keeps a float sum in order)
  // keep it a stream, not a chain of adds; the result lands in c so the reads are not dead.
  add("stream_read", [](benchmark::State& s) {
    stream(s, 1, [](float* a, float*, float* c, int64_t lo, int64_t hi) {
      using Quad = float __attribute__((vector_size(16)));
      Quad part[8] = {};
      int64_t i = lo;
      for (; i + 32 <= hi; i += 32)
        for (int p = 0; p < 8; ++p) {
          Quad v;
          std::memcpy(&v, a + i + 4 * p, sizeof v);
          part[p] += v;
        }
      float total = 0;
      for (; i < hi; ++i) total += a[i];
      for (const Quad& p : part) total += p[0] + p[1] + p[2] + p[3];
      c[lo] = total;
    });
  });
  // Not in STREAM either: GEMV's reads in plain C++, the array as [4096, 4096] rows of b
  // times a vector (b's first 4096 floats). Each slice is 64 whole rows (as split_reduceop's
  // parts of a GEMV), read in blocks of 8 rows, each step one 64-byte line of each of the
  // 8 rows, the slice's partial row (c at the slice's start) in L1; what loom's GEMV
  // kernel does (docs/performance.md, GEMV). Bytes: the array once.
  add("stream_gemv", [](benchmark::State& s) {
    stream(s, 1, [](float* a, float* b, float* c, int64_t lo, int64_t hi) {
      using Quad = float __attribute__((vector_size(16)));
      constexpr int64_t n = 4096, rows = 8, line = 16;
      float* y = c + lo;
      std::memset(y, 0, n * sizeof(float));
      for (int64_t r = lo / n; r + rows <= hi / n; r += rows)
        for (int64_t j = 0; j < n; j += line) {
          Quad acc[line / 4];
          std::memcpy(acc, y + j, sizeof acc);
          for (int64_t i = 0; i < rows; ++i)
            for (int q = 0; q < line / 4; ++q) {
              Quad v;
              std::memcpy(&v, a + (r + i) * n + j + 4 * q, sizeof v);
              acc[q] += v * b[r + i];
            }
          std::memcpy(y + j, acc, sizeof acc);
        }
    });
  });
  add("stream_triad", [](benchmark::State& s) {
    stream(s, 3, [](float* a, float* b, float* c, int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) a[i] = b[i] + 3.0f * c[i];
    });
  });
}

}  // namespace

int main(int argc, char** argv) {
  register_kernels();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
