// The strongest C++ peers of loom's workloads on this CPU (docs/performance.md,
// "Peers"): oneDNN's dnnl_sgemm for the matmuls, oneDNN's matmul primitive with
// bias and ReLU fused as post-ops for the linear layer, and Eigen's vectorised
// array math (built with -march=native) for the elementwise rows and softmax.
// The benchmark names are bench_kernels' and bench_matmul's, so bench/compare
// sets them beside loom's. Bench-only: CMake builds it only when libdnnl-dev and
// libeigen3-dev are installed, like torch for bench/peers/peers.py.
//   LOOM_THREADS=2 ./build/bench/peers/bench_peers --benchmark_min_time=0.2
// LOOM_THREADS sets the threads: OpenMP's (Debian's oneDNN runs on OpenMP) and
// Eigen's. LOOM_TARGET=x86-64-v3 caps oneDNN at AVX2 (dnnl_set_max_cpu_isa) and
// leaves out the Eigen rows, whose ISA is fixed when this file is compiled. The
// ISA each peer runs is in the JSON context: onednn_isa, onednn_linear_impl,
// eigen_simd.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <Eigen/Core>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

int threads() {
  const char* t = std::getenv("LOOM_THREADS");
  return t && std::atoi(t) > 0 ? std::atoi(t) : omp_get_num_procs();
}

std::string target() {
  const char* t = std::getenv("LOOM_TARGET");
  return t && *t ? t : "native";
}

const char* isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

std::vector<float> randn(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

void check(dnnl_status_t status, const char* what) {
  if (status != dnnl_success)
    throw std::runtime_error(std::string(what) + " failed: status " + std::to_string(status));
}

// C[m,n] = A[m,k] B[k,n], row-major, as loom's a.matmul(b).
void sgemm(benchmark::State& state, int64_t m, int64_t k, int64_t n) {
  const std::vector<float> a = randn(m * k, 1), b = randn(k * n, 2);
  std::vector<float> c(static_cast<size_t>(m * n));
  state.SetLabel(std::string("oneDNN sgemm ") + isa_name(dnnl_get_effective_cpu_isa()));
  for (auto _ : state) {
    check(dnnl_sgemm('N', 'N', m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c.data(), n), "dnnl_sgemm");
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(m * k * n), benchmark::Counter::kIsIterationInvariantRate);
}

// relu(x @ w + b), x [256,784], w [784,512]: one oneDNN matmul primitive, bias and
// ReLU fused as post-ops. Plain row-major operands, as loom's inputs are (no weights
// packed ahead).
constexpr int64_t kLinearM = 256, kLinearK = 784, kLinearN = 512;

dnnl::memory::desc plain(dnnl::memory::dims dims,
                         dnnl::memory::data_type type = dnnl::memory::data_type::f32) {
  return dnnl::memory::desc(dims, type, dnnl::memory::format_tag::ab);
}

dnnl::matmul::primitive_desc linear_relu_pd(const dnnl::engine& eng) {
  using namespace dnnl;
  post_ops ops;
  ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
  primitive_attr attr;
  attr.set_post_ops(ops);
  const matmul::desc d(plain({kLinearM, kLinearK}), plain({kLinearK, kLinearN}), plain({1, kLinearN}),
                       plain({kLinearM, kLinearN}));
  return matmul::primitive_desc(d, attr, eng);
}

void linear_relu(benchmark::State& state) {
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const matmul::primitive_desc pd = linear_relu_pd(eng);
  state.SetLabel(std::string("oneDNN matmul ") + pd.impl_info_str());
  const matmul prim(pd);
  std::vector<float> x = randn(kLinearM * kLinearK, 3), w = randn(kLinearK * kLinearN, 4),
                     b = randn(kLinearN, 5), y(static_cast<size_t>(kLinearM * kLinearN));
  memory xm(plain({kLinearM, kLinearK}), eng, x.data()), wm(plain({kLinearK, kLinearN}), eng, w.data()),
      bm(plain({1, kLinearN}), eng, b.data()), ym(plain({kLinearM, kLinearN}), eng, y.data());
  for (auto _ : state) {
    prim.execute(s, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST, ym}});
    s.wait();
    benchmark::DoNotOptimize(y.data());
  }
}

// C = A B of n x n bfloat16 matrices, row-major, summed in float32 and stored as bfloat16 (as
// loom's a.matmul(b) of two BFloat16 tensors): oneDNN's matmul primitive, whose bf16 kernels
// use vdpbf16ps where the CPU has AVX512_BF16.
void matmul_bf16(benchmark::State& state, int64_t n) {
  using namespace dnnl;
  using dt = memory::data_type;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const matmul::primitive_desc pd(
      matmul::desc(plain({n, n}, dt::bf16), plain({n, n}, dt::bf16), plain({n, n}, dt::bf16)), eng);
  state.SetLabel(std::string("oneDNN matmul ") + pd.impl_info_str());
  const matmul prim(pd);
  auto bf16 = [](const std::vector<float>& v) {  // the top 16 bits, rounded to nearest even
    std::vector<uint16_t> out;
    for (float x : v) {
      uint32_t w;
      std::memcpy(&w, &x, 4);
      out.push_back(static_cast<uint16_t>((w + 0x7fff + ((w >> 16) & 1)) >> 16));
    }
    return out;
  };
  std::vector<uint16_t> a = bf16(randn(n * n, 8)), b = bf16(randn(n * n, 9)), c(static_cast<size_t>(n * n));
  memory am(plain({n, n}, dt::bf16), eng, a.data()), bm(plain({n, n}, dt::bf16), eng, b.data()),
      cm(plain({n, n}, dt::bf16), eng, c.data());
  for (auto _ : state) {
    prim.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    s.wait();
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(n * n * n), benchmark::Counter::kIsIterationInvariantRate);
}

using Array = Eigen::Array<float, Eigen::Dynamic, 1>;

// `rows` rows of `cols` floats split into one contiguous block per thread; each
// thread runs `fn(first row, row count)`. Eigen's array expressions are single
// threaded (setNbThreads covers its products only), so the threads are OpenMP's.
void parallel_rows(int64_t rows, const std::function<void(int64_t, int64_t)>& fn) {
  const int n = threads();
#pragma omp parallel for num_threads(n) schedule(static)
  for (int t = 0; t < n; ++t) {
    const int64_t lo = rows * t / n, hi = rows * (t + 1) / n;
    fn(lo, hi - lo);
  }
}

// Eigen's widest vector ISA in this build, e.g. "Eigen AVX512".
std::string eigen_label() {
  const std::string simd = Eigen::SimdInstructionSetsInUse();
  return "Eigen " + simd.substr(0, simd.find(','));
}

// y = op(x), x [4096,4096]; `op` maps an Eigen array expression.
template <typename Op>
void unary(benchmark::State& state, Op op) {
  constexpr int64_t rows = 4096, cols = 4096;
  const std::vector<float> x = randn(rows * cols, 6);
  std::vector<float> y(x.size());
  state.SetLabel(eigen_label());
  for (auto _ : state) {
    parallel_rows(rows, [&](int64_t r, int64_t count) {
      Eigen::Map<const Array> in(x.data() + r * cols, count * cols);
      Eigen::Map<Array> out(y.data() + r * cols, count * cols);
      out = op(in);
    });
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * rows * cols * 4);
}

// softmax over the last axis of x [4096,1024]: per row, max, exp of the difference, scale.
void softmax(benchmark::State& state) {
  constexpr int64_t rows = 4096, cols = 1024;
  const std::vector<float> x = randn(rows * cols, 7);
  std::vector<float> y(x.size());
  state.SetLabel(eigen_label());
  for (auto _ : state) {
    parallel_rows(rows, [&](int64_t r0, int64_t count) {
      for (int64_t r = r0; r < r0 + count; ++r) {
        Eigen::Map<const Array> in(x.data() + r * cols, cols);
        Eigen::Map<Array> out(y.data() + r * cols, cols);
        out = (in - in.maxCoeff()).exp();
        out *= 1.f / out.sum();
      }
    });
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * rows * cols * 4);
}

void register_workloads(bool eigen) {
  auto add = [](const std::string& name, std::function<void(benchmark::State&)> fn) {
    benchmark::RegisterBenchmark(name.c_str(), std::move(fn))->Unit(benchmark::kMillisecond)->UseRealTime();
  };
  for (int64_t n : {512, 1024, 4096})
    add("matmul_" + std::to_string(n), [n](benchmark::State& s) { sgemm(s, n, n, n); });
  for (int64_t n : {511, 513, 520})
    add("matmul_sweep_" + std::to_string(n), [n](benchmark::State& s) { sgemm(s, n, n, n); });
  add("linear_relu_256x784x512", linear_relu);
  for (int64_t n : {1024, 4096})
    add("matmul_bf16_" + std::to_string(n), [n](benchmark::State& s) { matmul_bf16(s, n); });
  if (!eigen) return;
  add("exp_4096x4096", [](benchmark::State& s) { unary(s, [](const auto& a) { return a.exp(); }); });
  add("tanh_4096x4096", [](benchmark::State& s) { unary(s, [](const auto& a) { return a.tanh(); }); });
  add("sin_4096x4096", [](benchmark::State& s) { unary(s, [](const auto& a) { return a.sin(); }); });
  add("softmax_4096x1024", softmax);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = threads();
  const std::string level = target();
  omp_set_num_threads(n);
  Eigen::setNbThreads(n);
  // x86-64-v3 is AVX2 with FMA: oneDNN's AVX2 kernels, as loom's v3 kernels and
  // OpenBLAS's Haswell ones. Eigen's ISA is this file's compile flags, so no Eigen rows.
  if (level == "x86-64-v3") check(dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2), "dnnl_set_max_cpu_isa");
  const bool eigen = level == "native" || level == "x86-64-v4";
  benchmark::AddCustomContext("threads", std::to_string(n));
  benchmark::AddCustomContext("target", level);
  benchmark::AddCustomContext("onednn_isa", isa_name(dnnl_get_effective_cpu_isa()));
  // The implementation oneDNN picks for the fused linear layer, e.g. brg:avx512_core.
  benchmark::AddCustomContext("onednn_linear_impl",
                              linear_relu_pd(dnnl::engine(dnnl::engine::kind::cpu, 0)).impl_info_str());
  const dnnl_version_t* v = dnnl_version();
  benchmark::AddCustomContext("onednn_version", std::to_string(v->major) + "." + std::to_string(v->minor) +
                                                    "." + std::to_string(v->patch));
  if (eigen) {
    benchmark::AddCustomContext("eigen_simd", Eigen::SimdInstructionSetsInUse());
    benchmark::AddCustomContext("eigen_version", std::to_string(EIGEN_WORLD_VERSION) + "." +
                                                     std::to_string(EIGEN_MAJOR_VERSION) + "." +
                                                     std::to_string(EIGEN_MINOR_VERSION));
  }
  register_workloads(eigen);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
