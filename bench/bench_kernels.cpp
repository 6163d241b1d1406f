// The workloads of docs/performance.md, each one realize of a lazy expression
// on realized inputs (kernels compiled in the first iteration, cached after).
// bench/compare runs this beside bench/peers/peers.py and prints one table; the
// benchmark names are the workload names both sides share. Run alone:
//   ./build/bench/bench_kernels --benchmark_min_time=0.2
// LOOM_THREADS sets the thread count (bench/compare passes 2).
#include <loom/loom.hpp>

#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include <functional>
#include <string>

namespace {

using loom::Tensor;

Tensor input(loom::Shape shape) { return Tensor::randn(std::move(shape)).realize(); }

// Times `make(inputs)`'s realize; `bytes` per run are reported as bytes/s.
void run(benchmark::State& state, const std::function<Tensor()>& make, int64_t bytes) {
  make().realize();  // compile outside the timing
  for (auto _ : state) {
    Tensor y = make().realize();
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

Tensor square(int64_t n) { return input({n, n}); }

// Each workload: its name (shared with bench/peers/peers.py) and a registration.
void register_workloads() {
  auto add = [](const std::string& name, std::function<void(benchmark::State&)> fn) {
    benchmark::RegisterBenchmark(name.c_str(), std::move(fn))->Unit(benchmark::kMillisecond)->UseRealTime();
  };
  for (int64_t n : {1024, 4096})
    add(fmt::format("add_{}x{}", n, n), [n](benchmark::State& s) {
      Tensor a = square(n), b = square(n);
      run(
          s, [&] { return a + b; }, 3 * n * n * 4);
    });
  add("relu_exp_4096x4096", [](benchmark::State& s) {
    Tensor a = square(4096), b = square(4096), c = square(4096);
    run(
        s, [&] { return (a * b + c).relu().exp(); }, 4 * a.numel() * 4);
  });
  add("sum_16M", [](benchmark::State& s) {
    Tensor a = input({1 << 24});
    run(
        s, [&] { return a.sum(); }, a.numel() * 4);
  });
  for (int axis : {1, 0})
    add(fmt::format("sum_axis{}_4096x4096", axis), [axis](benchmark::State& s) {
      Tensor a = square(4096);
      run(
          s, [&] { return a.sum(axis); }, a.numel() * 4);
    });
  add("softmax_4096x1024", [](benchmark::State& s) {
    Tensor a = input({4096, 1024});
    run(
        s, [&] { return a.softmax(-1); }, 2 * a.numel() * 4);
  });
  // The bandwidth-bound rows again in bfloat16 and float16 (half the bytes; each
  // op computes in float32 and rounds once, docs/semantics.md): bench/compare
  // prints each against its float32 row.
  for (const auto& [suffix, dt] :
       {std::pair{"bf16", loom::DType::BFloat16}, std::pair{"f16", loom::DType::Float16}}) {
    add(fmt::format("add_{}_4096x4096", suffix), [dt](benchmark::State& s) {
      Tensor a = square(4096).cast(dt).realize(), b = square(4096).cast(dt).realize();
      run(
          s, [&] { return a + b; }, 3 * a.numel() * 2);
    });
    add(fmt::format("softmax_{}_4096x1024", suffix), [dt](benchmark::State& s) {
      Tensor a = input({4096, 1024}).cast(dt).realize();
      run(
          s, [&] { return a.softmax(-1); }, 2 * a.numel() * 2);
    });
  }
  add("log_softmax_4096x1024", [](benchmark::State& s) {
    Tensor a = input({4096, 1024});
    run(
        s, [&] { return a.log_softmax(-1); }, 2 * a.numel() * 4);
  });
  // A float-to-integer cast, a third of whose values lie outside Int32's range
  // (saturated): the numeric rules as vector UOps (codegen/numeric_lowering.cpp).
  add("cast_f32_i32_4M", [](benchmark::State& s) {
    Tensor a = (input({1 << 22}) * 3e9f).realize();
    run(
        s, [&] { return a.cast(loom::DType::Int32); }, 2 * a.numel() * 4);
  });
  const std::pair<const char*, Tensor (Tensor::*)() const> unary[] = {{"exp", &Tensor::exp},
                                                                      {"tanh", &Tensor::tanh},
                                                                      {"sigmoid", &Tensor::sigmoid},
                                                                      {"sin", &Tensor::sin},
                                                                      {"cos", &Tensor::cos}};
  for (const auto& [name, op] : unary)
    add(fmt::format("{}_4096x4096", name), [op](benchmark::State& s) {
      Tensor a = square(4096);
      run(
          s, [&] { return (a.*op)(); }, 2 * a.numel() * 4);
    });
}

}  // namespace

int main(int argc, char** argv) {
  register_workloads();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
