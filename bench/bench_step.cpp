// What a small training loop pays per step beyond its arithmetic: building the
// graph, the schedule cache lookup, binding buffers and dispatching kernels,
// and what loom::Capture's replay leaves of it. Run
//   ./build/bench/bench_step --benchmark_min_time=0.5
// moons_step*: the moons MLP (2-16-16-2, 200 points, cross-entropy, full-batch
// SGD) one step per iteration; items/s is steps per second. tiny_step*: the
// same step on 1-element tensors, so the time is the host overhead per step.
// small_graph: a 64x32 matmul, softmax and sum rebuilt and realized each
// iteration. buffer_*: a 1 MiB and a 64 MiB allocation with and without the pool.
// shared_run/<ops>: one run of a trivial kernel (64 iterations, 16 floats each) shared
// across the threads as a kernel of `ops` operations is (runtime/executor.hpp): 2^20
// is two tasks of slices on 2 threads, -1 (unknown work) a task per slice: the
// executor's own cost per shared run.
#include "runtime/executor.hpp"

#include <loom/loom.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

namespace {

using loom::Tensor;

Tensor values(int64_t rows, int64_t cols, float scale, float shift) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(i) * scale) + shift;
  return Tensor::from_vector(v, {rows, cols});
}

// Two interleaved half circles, labels as one-hot rows.
struct Moons {
  Tensor x, y;
  explicit Moons(int64_t n) {
    std::vector<float> xs, ys;
    for (int64_t i = 0; i < n; ++i) {
      const bool upper = i % 2 == 0;
      const float t = 3.14159265f * static_cast<float>(i / 2) / static_cast<float>(n / 2);
      xs.push_back(upper ? std::cos(t) : 1 - std::cos(t));
      xs.push_back(upper ? std::sin(t) : 0.5f - std::sin(t));
      ys.push_back(upper ? 1.f : 0.f);
      ys.push_back(upper ? 0.f : 1.f);
    }
    x = Tensor::from_vector(xs, {n, 2});
    y = Tensor::from_vector(ys, {n, 2});
  }
};

struct Mlp {
  std::vector<Tensor> params;
  Mlp(int64_t in, int64_t hidden, int64_t out) {
    params = {values(in, hidden, 0.37f, 0), values(1, hidden, 0.11f, 0),   values(hidden, hidden, 0.23f, 0),
              values(1, hidden, 0.13f, 0),  values(hidden, out, 0.29f, 0), values(1, out, 0.17f, 0)};
    for (auto& p : params) {
      p = (p * 0.5f).realize();
      p.requires_grad_();
    }
  }
  // Forward, cross-entropy, backward and the SGD update; the loss is realized with the parameters.
  Tensor step(const Tensor& x, const Tensor& y) {
    const auto& p = params;
    const Tensor h1 = (x.matmul(p[0]) + p[1]).relu();
    const Tensor h2 = (h1.matmul(p[2]) + p[3]).relu();
    const Tensor logits = h2.matmul(p[4]) + p[5];
    const Tensor loss = -(logits.log_softmax(1) * y).sum(1).mean();
    loss.backward();
    {
      loom::NoGrad guard;
      for (auto& q : params) q.assign(q - q.grad() * 0.1f);
    }
    for (auto& q : params) q.zero_grad();
    std::vector<Tensor> all = params;
    all.push_back(loss);
    loom::realize(all);
    return loss;
  }
};

void run_steps(benchmark::State& state, int64_t points, bool capture) {
  const Moons data(points);
  Mlp model(2, 16, 2);
  loom::Capture captured(
      [&](const std::vector<Tensor>& a) { return std::vector<Tensor>{model.step(a[0], a[1])}; });
  for (int i = 0; i < 3; ++i) captured({data.x, data.y});  // compile, then record
  for (auto _ : state) {
    Tensor loss = capture ? captured({data.x, data.y})[0] : model.step(data.x, data.y);
    benchmark::DoNotOptimize(loss);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["loss"] = model.step(data.x, data.y).item<float>();
}

void moons_step(benchmark::State& state) { run_steps(state, 200, false); }
void moons_step_captured(benchmark::State& state) { run_steps(state, 200, true); }
void tiny_step(benchmark::State& state) { run_steps(state, 2, false); }
void tiny_step_captured(benchmark::State& state) { run_steps(state, 2, true); }
BENCHMARK(moons_step)->Unit(benchmark::kMicrosecond);
BENCHMARK(moons_step_captured)->Unit(benchmark::kMicrosecond);
BENCHMARK(tiny_step)->Unit(benchmark::kMicrosecond);
BENCHMARK(tiny_step_captured)->Unit(benchmark::kMicrosecond);

// The first training step of a fresh model: every kernel scheduled and compiled
// (the disk cache off); a new hidden width per iteration makes every kernel new.
void first_moons_step(benchmark::State& state) {
  loom::Context off{{"CACHE_DIR", "off"}};
  const Moons data(200);
  int64_t hidden = 16;
  for (auto _ : state) {
    Mlp model(2, ++hidden, 2);
    benchmark::DoNotOptimize(model.step(data.x, data.y));
  }
}
BENCHMARK(first_moons_step)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

// The small graph rebuilt and realized each iteration: the schedule cache hits.
void small_graph(benchmark::State& state) {
  const Tensor a = values(64, 32, 0.1f, 0), b = values(32, 32, 0.2f, 0);
  for (auto _ : state) {
    Tensor s = a.matmul(b).softmax(1).sum();
    s.realize();
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(small_graph)->Unit(benchmark::kMicrosecond);

// A kernel writing a new buffer of the given bytes: its output block comes from
// the pool, or fresh from the system after loom::empty_cache() released it
// (page faults included: huge pages from 2 MiB up).
void buffer_alloc(benchmark::State& state, bool pooled) {
  const int64_t n = state.range(0) / 4;
  const Tensor x = values(1, n, 0.001f, 0);
  for (auto _ : state) {
    if (!pooled) loom::empty_cache();
    Tensor t = x + 1.0f;
    t.realize();
    benchmark::DoNotOptimize(t);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
void buffer_pooled(benchmark::State& state) { buffer_alloc(state, true); }
void buffer_unpooled(benchmark::State& state) { buffer_alloc(state, false); }
BENCHMARK(buffer_pooled)->Arg(1 << 20)->Arg(64 << 20)->Unit(benchmark::kMicrosecond);
BENCHMARK(buffer_unpooled)->Arg(1 << 20)->Arg(64 << 20)->Unit(benchmark::kMicrosecond);

// cat and stack of 200 small realized tensors, first realize (new kernels each time).
void first_stack_200(benchmark::State& state) {
  loom::Context off{{"CACHE_DIR", "off"}};
  std::vector<Tensor> parts;
  for (int i = 0; i < 200; ++i) parts.push_back(values(4, 8, 0.01f * static_cast<float>(i + 1), 0));
  float c = 1;
  for (auto _ : state) {
    Tensor s = loom::stack(parts, 0) * (c += 1e-6f);
    s.realize();
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(first_stack_200)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

}  // namespace

// out[16 i, 16 i + 16) += 1 for i in [begin, end): the kernel ABI, next to no work.
void add_one(void* const* bufs, const int64_t*, int64_t begin, int64_t end) {
  auto* out = static_cast<float*>(bufs[0]);
  for (int64_t i = begin * 16; i < end * 16; ++i) out[i] += 1.0f;
}

void shared_run(benchmark::State& state) {
  std::vector<float> out(64 * 16);
  const std::vector<void*> bufs{out.data()};
  const auto ops = static_cast<double>(state.range(0));
  const loom::RunWork work = loom::run_work(ops < 0 ? loom::kUnknownWork : ops, loom::current_target());
  for (auto _ : state) loom::run_kernel(add_one, bufs, {}, 64, {}, work);
  state.counters["tasks"] =
      static_cast<double>(loom::shared_run_tasks(64 / loom::slice_grain(64, work), work));
}
BENCHMARK(shared_run)->Arg(1 << 20)->Arg(-1)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
