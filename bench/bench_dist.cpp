// A DataParallel training step with its gradient all-reduces overlapped with the
// backward pass (buckets of 1 MiB and 8 MiB: 6 and 3 buckets) against one all-reduce at the end
// (bucket_bytes = INT64_MAX). Run as a job; only rank 0 reports:
//   mpirun -np 2 --oversubscribe -x LOOM_THREADS=1 ./build/bench/bench_dist
// dp_step/B: an MLP 1024-1024-1024-1024-10 (3.2 M parameters, 12.6 MB of
// gradients), a batch of 128 rows per rank, cross-entropy, SGD; one step per
// iteration, bucket_bytes = B. A fixed iteration count: every rank must run the same
// collectives, so the library cannot pick the count per rank.
#include <loom/loom.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace {

using loom::Tensor;

Tensor values(int64_t rows, int64_t cols, float scale, float shift) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(i) * scale + shift) * 0.05f;
  return Tensor::from_vector(v, {rows, cols});
}

void dp_step(benchmark::State& state) {
  const int64_t widths[] = {1024, 1024, 1024, 1024, 10};
  const int64_t batch = 128;
  std::vector<Tensor> params;
  for (int l = 0; l < 4; ++l) {
    params.push_back(values(widths[l], widths[l + 1], 0.37f, static_cast<float>(l)).requires_grad_());
    params.push_back(values(1, widths[l + 1], 0.11f, static_cast<float>(l)).requires_grad_());
  }
  const loom::dist::DataParallel ddp(params, state.range(0));
  loom::optim::SGD opt(params, 0.01);
  const int rank = loom::dist::rank();
  const Tensor x = values(batch, widths[0], 0.13f, static_cast<float>(rank)) * 20.0f;
  std::vector<float> labels(batch * 10, 0.0f);
  for (int64_t i = 0; i < batch; ++i) labels[static_cast<size_t>(i * 10 + (i + rank) % 10)] = 1;
  const Tensor y = Tensor::from_vector(labels, {batch, 10});
  auto step = [&] {
    opt.zero_grad();
    Tensor h = x;
    for (int l = 0; l < 4; ++l) {
      h = h.matmul(params[2 * l]) + params[2 * l + 1];
      if (l < 3) h = h.relu();
    }
    Tensor loss = -(h.log_softmax(1) * y).sum(1).mean();
    loss.backward();
    opt.step();
    return loss;
  };
  for (int i = 0; i < 3; ++i) step();  // compile, and the schedule cache
  for (auto _ : state) benchmark::DoNotOptimize(step());
  state.counters["buckets"] = static_cast<double>(ddp.buckets().size());
  state.SetItemsProcessed(state.iterations() * batch * loom::dist::world_size());
}
BENCHMARK(dp_step)
    ->Arg(1 << 20)
    ->Arg(8 << 20)
    ->Arg(INT64_MAX)
    ->Iterations(20)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Rank 0 reports; the others run the same benchmarks silently.
class Silent : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  loom::dist::Process job(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (loom::dist::rank() == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    Silent silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
  return 0;
}
