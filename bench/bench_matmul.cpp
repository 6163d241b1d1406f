// The matmul workloads of docs/performance.md: square matmuls, a 500..520 sweep
// (reported per FLOP by bench/compare), GEMV, a fused linear layer, a classifier head, an MLP's SGD
// step and multi-head latent attention's forward pass. The names are shared with
// bench/peers/peers.py; bench/compare runs both and prints one table. Run alone:
//   ./build/bench/bench_matmul --benchmark_min_time=0.2
// LOOM_THREADS sets the thread count (bench/compare passes 2).
#include <loom/loom.hpp>

#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <string>

namespace {

using loom::Tensor;

Tensor input(loom::Shape shape) { return Tensor::randn(std::move(shape)).realize(); }

// Times `make()`'s realize (compiled in a first, untimed run); `flops` per run
// are reported as GFLOP/s.
void run(benchmark::State& state, const std::function<Tensor()>& make, double flops) {
  make().realize();
  for (auto _ : state) {
    Tensor y = make().realize();
    benchmark::DoNotOptimize(y);
  }
  if (flops > 0)
    state.counters["GFLOP/s"] =
        benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// The MLP 784 -> 512 -> 512 -> 10 of the issue, relu between layers.
struct MLP {
  loom::nn::Linear l1{784, 512}, l2{512, 512}, l3{512, 10};
  Tensor operator()(const Tensor& x) const { return l3(l2(l1(x).relu()).relu()); }
  std::vector<Tensor> parameters() const {
    std::vector<Tensor> all;
    for (const auto* l : {&l1, &l2, &l3})
      for (auto& p : l->parameters()) all.push_back(p);
    return all;
  }
};

void mlp_step(benchmark::State& state) {
  loom::manual_seed(0);
  MLP model;
  const Tensor x = input({256, 784}), y = Tensor::randint(0, 10, {256}).realize();
  loom::optim::SGD opt(model.parameters(), 0.01);
  auto step = [&] {
    opt.zero_grad();
    loom::nn::cross_entropy(model(x), y).backward();
    opt.step();
  };
  step();
  for (auto _ : state) step();
  state.counters["steps/s"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
}

// Multi-head latent attention's forward pass, written as bench/peers/peers.py
// writes it in PyTorch: queries, keys and values through their latents, causal
// softmax attention per head, the output projection.
struct MLAShape {
  int64_t batch, seq, heads, head_dim, d_model, latent;
};

void mla_forward(benchmark::State& state, MLAShape c) {
  const int64_t hd = c.heads * c.head_dim;
  const Tensor x = input({c.batch, c.seq, c.d_model});
  const Tensor w_dq = input({c.d_model, c.latent}), w_dkv = input({c.d_model, c.latent});
  const Tensor w_uq = input({c.latent, hd}), w_uk = input({c.latent, hd}), w_uv = input({c.latent, hd});
  const Tensor w_o = input({hd, c.d_model});
  const Tensor causal = Tensor::arange(c.seq).unsqueeze(0) <= Tensor::arange(c.seq).unsqueeze(1);
  auto heads_first = [&](const Tensor& t) {
    return t.reshape({c.batch, c.seq, c.heads, c.head_dim}).permute({0, 2, 1, 3});
  };
  auto forward = [&] {
    const Tensor cq = x.matmul(w_dq), ckv = x.matmul(w_dkv);
    const Tensor q = heads_first(cq.matmul(w_uq)), k = heads_first(ckv.matmul(w_uk));
    const Tensor v = heads_first(ckv.matmul(w_uv));
    const Tensor a = loom::nn::scaled_dot_product_attention(q, k, v, causal);
    return a.permute({0, 2, 1, 3}).reshape({c.batch, c.seq, hd}).matmul(w_o);
  };
  run(state, forward, 0);
}

void register_workloads() {
  auto add = [](const std::string& name, std::function<void(benchmark::State&)> fn) {
    benchmark::RegisterBenchmark(name.c_str(), std::move(fn))->Unit(benchmark::kMillisecond)->UseRealTime();
  };
  auto matmul = [&](int64_t m, int64_t k, int64_t n, const std::string& name) {
    add(name, [m, k, n](benchmark::State& s) {
      const Tensor a = input({m, k}), b = input({k, n});
      run(
          s, [&] { return a.matmul(b); }, 2.0 * static_cast<double>(m * k * n));
    });
  };
  for (int64_t n : {512, 1024, 4096}) matmul(n, n, n, fmt::format("matmul_{}", n));
  for (int64_t n = 500; n <= 520; ++n) matmul(n, n, n, fmt::format("matmul_sweep_{}", n));
  matmul(1, 4096, 4096, "gemv_4096");
  add("linear_relu_256x784x512", [](benchmark::State& s) {
    const Tensor x = input({256, 784}), w = input({784, 512}), b = input({512});
    run(
        s, [&] { return (x.matmul(w) + b).relu(); }, 2.0 * 256 * 784 * 512);
  });
  // A classifier head, nn::Linear(128, 10) on a batch of 128: the logits are dot products
  // along the contiguous input features, each folded from its vector accumulators.
  add("classifier_head_128x128x10", [](benchmark::State& s) {
    const Tensor x = input({128, 128}), w = input({10, 128}), b = input({10});
    run(
        s, [&] { return x.matmul(w.transpose(0, 1)) + b; }, 2.0 * 128 * 128 * 10);
  });
  add("mlp_sgd_step_256", mlp_step);
  add("mla_forward_small", [](benchmark::State& s) { mla_forward(s, {8, 20, 8, 64, 512, 128}); });
  add("mla_forward_big", [](benchmark::State& s) { mla_forward(s, {4, 512, 16, 64, 1024, 256}); });
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
