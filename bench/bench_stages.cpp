// The rewrite stages measured on and off (docs/pipeline.md): run
//   ./build/bench/bench_stages --benchmark_min_time=0.2
// Each case takes a LOOM_DISABLE list (empty: every stage on). Kernels compile
// in the first iteration and are cached after; the schedule cache skips the
// stages on later iterations, so these time the kernels a stage leaves behind.
#include <loom/context.hpp>
#include <loom/loom.hpp>

#include <benchmark/benchmark.h>

#include <string>

namespace {

using loom::DType;
using loom::Tensor;

constexpr int64_t kRows = 65536, kWidth = 64, kLookups = 256;

// An embedding lookup written as a one-hot product: 256 rows of a [65536, 64]
// table. With reduce_collapse it reads the 256 rows; without, it sums 65536
// rows per output (1G multiply-adds).
void one_hot_lookup(benchmark::State& state, const std::string& disable) {
  const Tensor idx = Tensor::randint(0, kRows, {kLookups}).realize();
  const Tensor table = Tensor::rand({kRows, kWidth}).realize();
  loom::Context ctx{{"DISABLE", disable}};
  for (auto _ : state) {
    Tensor y = (idx.one_hot(kRows).cast(DType::Float32).unsqueeze(-1) * table).sum(1);
    y.realize();
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * kLookups * kWidth * 4);
}
BENCHMARK_CAPTURE(one_hot_lookup, all_stages, std::string(""))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(one_hot_lookup, no_reduce_collapse, std::string("reduce_collapse"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// index_select, the same rows through the gather the front end builds.
void index_select_lookup(benchmark::State& state, const std::string& disable) {
  const Tensor idx = Tensor::randint(0, kRows, {kLookups}).realize();
  const Tensor table = Tensor::rand({kRows, kWidth}).realize();
  loom::Context ctx{{"DISABLE", disable}};
  for (auto _ : state) {
    Tensor y = table.index_select(0, idx);
    y.realize();
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * kLookups * kWidth * 4);
}
BENCHMARK_CAPTURE(index_select_lookup, all_stages, std::string(""))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(index_select_lookup, no_reduce_collapse, std::string("reduce_collapse"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// The lookup's gradient with respect to the table (nn::Embedding's backward):
// with scatter_reduce a zero fill of the table's gradient plus 256 rows added
// in; without, a sum over the 256 lookups for each of its 4M elements.
void one_hot_lookup_gradient(benchmark::State& state, const std::string& disable) {
  const Tensor idx = Tensor::randint(0, kRows, {kLookups}).realize();
  const Tensor table = Tensor::rand({kRows, kWidth}).realize();
  const Tensor upstream = Tensor::rand({kLookups, kWidth}).realize();
  loom::Context ctx{{"DISABLE", disable}};
  for (auto _ : state) {
    const Tensor y = (idx.one_hot(kRows).cast(DType::Float32).unsqueeze(-1) * table).sum(1);
    Tensor g = loom::gradient((y * upstream).sum(), {table})[0];
    g.realize();
    benchmark::DoNotOptimize(g);
  }
  state.SetBytesProcessed(state.iterations() * kRows * kWidth * 4);
}
BENCHMARK_CAPTURE(one_hot_lookup_gradient, all_stages, std::string(""))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(one_hot_lookup_gradient, no_scatter_reduce, std::string("scatter_reduce"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// A full sum of 16M floats: with split_reduceop two kernels, 256 partial sums
// across threads, then their sum; without, one reduce on one thread.
void sum_16m(benchmark::State& state, const std::string& disable) {
  const int64_t n = int64_t{1} << 24;
  const Tensor x = Tensor::rand({n}).realize();
  loom::Context ctx{{"DISABLE", disable}};
  for (auto _ : state) {
    float s = x.sum().item<float>();
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(state.iterations() * n * 4);
}
BENCHMARK_CAPTURE(sum_16m, all_stages, std::string(""))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(sum_16m, no_split_reduceop, std::string("split_reduceop"))->Unit(benchmark::kMillisecond);

// An elementwise add on [1024, 1024]: range_merge makes it one loop of 1048576.
void add_1024(benchmark::State& state, const std::string& disable) {
  const Tensor a = Tensor::rand({1024, 1024}).realize(), b = Tensor::rand({1024, 1024}).realize();
  loom::Context ctx{{"DISABLE", disable}};
  for (auto _ : state) {
    Tensor y = a + b;
    y.realize();
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * 1024 * 1024 * 4 * 3);
}
BENCHMARK_CAPTURE(add_1024, all_stages, std::string(""))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(add_1024, no_range_merge, std::string("range_merge"))->Unit(benchmark::kMicrosecond);

// LOOM_PCONTIG: t = a @ b with a short inner dimension (4) is 128 times larger
// than its inputs; read at two indices (t + t.flip(0)) it is buffered at level 0
// and recomputed per read at level 3.
void small_k_matmul_read_twice(benchmark::State& state, int pcontig) {
  const Tensor a = Tensor::rand({1024, 4}).realize(), b = Tensor::rand({4, 1024}).realize();
  loom::Context ctx{{"PCONTIG", pcontig}};
  for (auto _ : state) {
    const Tensor t = a.matmul(b);
    Tensor y = t + t.flip(0);
    y.realize();
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * 1024 * 1024 * 4);
}
BENCHMARK_CAPTURE(small_k_matmul_read_twice, pcontig_0, 0)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(small_k_matmul_read_twice, pcontig_3, 3)->Unit(benchmark::kMicrosecond);

// LOOM_PCONTIG on a softmax over [4096, 1024], where nothing qualifies: the
// same kernels at either level.
void softmax_rows(benchmark::State& state, int pcontig) {
  const Tensor x = Tensor::rand({4096, 1024}).realize();
  loom::Context ctx{{"PCONTIG", pcontig}};
  for (auto _ : state) {
    Tensor y = x.softmax(1);
    y.realize();
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * 4096 * 1024 * 4 * 2);
}
BENCHMARK_CAPTURE(softmax_rows, pcontig_0, 0)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(softmax_rows, pcontig_3, 3)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
