// Steps over symbolic sizes beside the same steps in numbers (docs/symbolic.md): measured,
// never asserted. Run
//   ./build/bench/bench_symbolic --benchmark_min_time=2
// cnn_step: the Fashion-MNIST CNN (examples/fashion_mnist.hpp) trained with Adam on one
// batch of random 28x28 images, the batch [n, 1, 28, 28] in numbers or [B=n, ...] (what
// DataLoader::set_batch_variable gives), at n = 64 and at a last batch of 40.
// decode_attention: one decoding step's attention over the first T of 256 cached rows
// ([1, 8, 256, 64]): in numbers (a schedule per T), over T.bind(n), and that step under a
// loom::Capture (one recording for every T).
// cache_row_write: one token's row written into a [1, 8, 2048, 64] cache at a bound position
// (cache.slice(2, P, P + 1).assign(row), a write through a view) and realized.
// column_write: one column of a [4096, 4096] matrix written the same way. Beside
// LOOM_DISABLE=guard_narrowing, which loops over every row to test the guard.
#include "fashion_mnist.hpp"

#include <benchmark/benchmark.h>

#include <cmath>

namespace {

using loom::Tensor;

void cnn_step(benchmark::State& state, bool symbolic) {
  const int64_t rows = state.range(0), batch = 64;
  loom::manual_seed(0);
  Tensor images = Tensor::rand({batch, 1, 28, 28});
  Tensor labels = (Tensor::rand({batch}) * 9.99).cast(loom::DType::Int32);
  images.realize();
  labels.realize();
  const loom::Variable b("B", 1, batch);
  const loom::Dim size = symbolic ? b.bind(rows) : loom::Dim(rows);
  const Tensor x = images.slice(0, 0, size), y = labels.slice(0, 0, size);
  loom::nn::Sequential model = fashion::cnn();
  loom::optim::Adam opt(model.parameters(), 1e-3);
  for (auto _ : state) {
    opt.zero_grad();
    Tensor loss = loom::nn::cross_entropy(model(x), y);
    loss.backward();
    opt.step();
    benchmark::DoNotOptimize(loss.item<float>());
  }
  state.counters["steps/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

enum class Sizes { Numeric, Symbolic, Captured };

void decode_attention(benchmark::State& state, Sizes sizes) {
  const int64_t heads = 8, rows = 256, d = 64, t = state.range(0);
  loom::manual_seed(0);
  Tensor k_cache = Tensor::randn({1, heads, rows, d}), v_cache = Tensor::randn({1, heads, rows, d});
  Tensor q = Tensor::randn({1, heads, 1, d});
  k_cache.realize();
  v_cache.realize();
  q.realize();
  const loom::Variable length("T", 1, rows);
  const loom::Dim size = sizes == Sizes::Numeric ? loom::Dim(t) : length.bind(t);
  const double scale = 1 / std::sqrt(static_cast<double>(d));
  auto attend = [scale](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{(a[0].matmul(a[1].transpose(2, 3)) * scale).softmax(-1).matmul(a[2])};
  };
  loom::Capture step(attend);
  const std::vector<Tensor> args{q, k_cache.slice(2, 0, size), v_cache.slice(2, 0, size)};
  for (auto _ : state) {
    Tensor out = sizes == Sizes::Captured ? step(args)[0] : attend(args)[0];
    out.realize();
    benchmark::DoNotOptimize(out);
  }
}

void cache_row_write(benchmark::State& state) {
  const int64_t heads = 8, rows = 2048, d = 64;
  Tensor cache = Tensor::zeros({1, heads, rows, d}).realize();
  const Tensor row = Tensor::ones({1, heads, 1, d}).realize();
  const loom::Variable position("P", 0, rows - 1);
  int64_t p = 0;
  for (auto _ : state) {
    const loom::Dim at = position.bind(p);
    cache.slice(2, at, at + 1).assign(row);
    cache.realize();
    p = (p + 1) % rows;
  }
}

void column_write(benchmark::State& state) {
  const int64_t n = 4096;
  Tensor matrix = Tensor::zeros({n, n}).realize();
  const Tensor column = Tensor::ones({n, 1}).realize();
  for (auto _ : state) {
    matrix.slice(1, 100, 101).assign(column);
    matrix.realize();
  }
}

}  // namespace

BENCHMARK_CAPTURE(cnn_step, numeric, false)->Arg(64)->Arg(40)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(cnn_step, symbolic_batch, true)->Arg(64)->Arg(40)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(decode_attention, numeric, Sizes::Numeric)->Arg(16)->Arg(128)->Arg(255);
BENCHMARK_CAPTURE(decode_attention, symbolic, Sizes::Symbolic)->Arg(16)->Arg(128)->Arg(255);
BENCHMARK_CAPTURE(decode_attention, captured_symbolic, Sizes::Captured)->Arg(16)->Arg(128)->Arg(255);
BENCHMARK(cache_row_write)->Unit(benchmark::kMicrosecond);
BENCHMARK(column_write)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
