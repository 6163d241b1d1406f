// The matmul workloads of docs/performance.md: square matmuls, a 500..520 sweep
// (reported per FLOP by bench/compare), GEMV, a fused linear layer, a classifier head, an MLP's SGD
// step, multi-head latent attention's forward pass, and kernels over symbolic rows or a
// symbolic sum against the same kernels with constants. The names are shared with
// bench/peers/peers.py; bench/compare runs both and prints one table. Run alone:
//   ./build/bench/bench_matmul --benchmark_min_time=0.2
// LOOM_THREADS sets the thread count (bench/compare passes 2).
#include <loom/loom.hpp>

// The kernel-level rows build kernels directly: the front end has no symbolic sizes yet.
#include "codegen/codegen.hpp"
#include "ir/uop.hpp"
#include "runtime/executor.hpp"
#include "runtime/jit.hpp"

#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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

// An [m, 512] @ [512, 512] product as one kernel (issue 27's symbolic extents), m
// rows of a variable bound per launch (1 to 1024) or constant: the symbolic kernel is
// compiled once and serves every m, as one for a growing sequence length must. The
// plain variant is that kernel with the Opts 7d121ce chose before register tiles took
// symbolic rows: lanes along the columns, four accumulators, no tile.
constexpr int64_t kSymK = 512, kSymN = 512, kSymMaxRows = 1024;
enum class Rows { Symbolic, Constant, Plain };

// out[i, j] = sum_k a[i, k] * b[k, j] over kSymN columns as one kernel: `m` rows (a
// constant or a variable), or with `m` null one row and no row range (as the schedule
// leaves a GEMV); `k_len` terms.
loom::UOpPtr product_kernel(const loom::UOpPtr& m, const loom::UOpPtr& k_len) {
  using namespace loom;
  const DType f32 = DType::Float32;
  const auto global = [&](int64_t slot) { return UOp::make(Op::DEFINE_GLOBAL, f32.ptr_to(), {}, slot); };
  const auto index = [](const UOpPtr& buf, const UOpPtr& at) {
    return UOp::make(Op::INDEX, buf->dtype, {buf, at});
  };
  const auto load = [&](const UOpPtr& idx) { return UOp::make(Op::LOAD, f32, {idx}); };
  const UOpPtr i = m ? make_range(m, 0) : nullptr, j = make_range(kSymN, 1);
  const UOpPtr k = make_range(k_len, 2, AxisKind::Reduce);
  const UOpPtr product =
      load(index(global(1), i ? i * k_len + k : k)) * load(index(global(2), k * kSymN + j));
  const UOpPtr sum = UOp::make(Op::REDUCE, f32, {product, k}, ReduceArg{Op::ADD, {}});
  const UOpPtr stored = UOp::make(Op::STORE, f32, {index(global(0), i ? i * kSymN + j : j), sum});
  std::vector<UOpPtr> end{stored};
  if (i) end.push_back(i);
  end.push_back(j);
  return UOp::make(Op::SINK, DType::Int64, {UOp::make(Op::END, f32, std::move(end))});
}

// A decoding step's p @ v: [1, T] @ [T, 512], T a variable (1 to 4096) or constant.
constexpr int64_t kSymMaxSum = 4096;

// 64-byte aligned floats, as the kernel ABI promises its buffers.
struct FreeFloats {
  void operator()(float* p) const { std::free(p); }
};
struct Floats {
  explicit Floats(int64_t n)
      : data(static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>((n * 4 + 63) / 64 * 64)))) {
    std::fill(data.get(), data.get() + n, 0.5f);
  }
  std::unique_ptr<float, FreeFloats> data;
};

// Compiles `kernel` once (with `opts`, else the heuristic's) and times it with `vars`
// over `out`, `a` and `b` of the given sizes; `flops` per run as GFLOP/s, the Opts the label.
void run_product(benchmark::State& state, const loom::UOpPtr& kernel, const std::vector<loom::Opt>* opts,
                 const std::vector<int64_t>& vars, int64_t out_n, int64_t a_n, int64_t b_n, double flops) {
  const auto flags = loom::flags();
  std::vector<loom::Opt> applied;
  const loom::UOpPtr lowered =
      loom::lower_kernel(kernel, "symbolic_product", *flags, loom::KernelLowering{&applied, opts});
  const loom::KernelFn fn = loom::Jit::instance()
                                .compile(loom::emit_llvm_ir(lowered, "symbolic_product"), "symbolic_product",
                                         loom::JitOptions{.target = flags->target})
                                .fn;
  Floats out(out_n), a(a_n), b(b_n);
  const std::vector<void*> bufs{out.data.get(), a.data.get(), b.data.get()};
  const loom::RunWork work =
      loom::run_work(flops + static_cast<double>(out_n + a_n + b_n), loom::target_of(*flags));
  const int64_t extent = loom::parallel_extent(lowered, vars);
  for (auto _ : state) loom::run_kernel(fn, bufs, vars, extent, {}, work);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(loom::to_string(applied));
}

void rows_product(benchmark::State& state, Rows rows, int64_t m) {
  const loom::UOpPtr kernel =
      product_kernel(rows == Rows::Constant ? loom::const_i64(m) : loom::make_var("m", 1, kSymMaxRows),
                     loom::const_i64(kSymK));
  // The plain path's Opts are those of 16 lanes (AVX-512); on AVX2 its upcast is 8.
  const std::vector<loom::Opt> plain =
      loom::parse_opts(loom::target_of(*loom::flags()).vector_bytes == 64
                           ? "[upcast(1, 16), unroll(3, 4), block_sum(2, 256), parallel(0)]"
                           : "[upcast(1, 8), unroll(3, 4), block_sum(2, 256), parallel(0)]");
  const std::vector<int64_t> vars = rows == Rows::Constant ? std::vector<int64_t>{} : std::vector<int64_t>{m};
  run_product(state, kernel, rows == Rows::Plain ? &plain : nullptr, vars, m * kSymN, m * kSymK,
              kSymK * kSymN, 2.0 * static_cast<double>(m * kSymK * kSymN));
}

void sum_product(benchmark::State& state, bool symbolic, int64_t t) {
  const loom::UOpPtr kernel =
      product_kernel(nullptr, symbolic ? loom::make_var("T", 1, kSymMaxSum) : loom::const_i64(t));
  const std::vector<int64_t> vars = symbolic ? std::vector<int64_t>{t} : std::vector<int64_t>{};
  run_product(state, kernel, nullptr, vars, kSymN, t, t * kSymN, 2.0 * static_cast<double>(t * kSymN));
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
  // bfloat16 operands and result, summed in float32: on AVX512_BF16 the pair-dot unit
  // (codegen/pair_dot.hpp). bench/compare prints each against matmul_<n> and oneDNN's bf16 matmul.
  for (int64_t n : {1024, 4096})
    add(fmt::format("matmul_bf16_{}", n), [n](benchmark::State& s) {
      const Tensor a = input({n, n}).cast(loom::DType::BFloat16).realize();
      const Tensor b = input({n, n}).cast(loom::DType::BFloat16).realize();
      run(
          s, [&] { return a.matmul(b); }, 2.0 * static_cast<double>(n * n * n));
    });
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
  for (int64_t m : {1, 100, 1000, 1024})
    for (const auto& [rows, name] : {std::pair{Rows::Symbolic, "symbolic"},
                                     std::pair{Rows::Constant, "constant"}, std::pair{Rows::Plain, "plain"}})
      add(fmt::format("rows_{}_{}x512x512", name, m),
          [rows, m](benchmark::State& s) { rows_product(s, rows, m); });
  for (int64_t t : {64, 1024, 4096})
    for (bool symbolic : {true, false})
      add(fmt::format("gemv_sum_{}_{}x512", symbolic ? "symbolic" : "constant", t),
          [symbolic, t](benchmark::State& s) { sum_product(s, symbolic, t); });
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
