// Scheduling time against program size (docs/performance.md, "Scheduling time"):
// recurrences unrolled over T steps in a C++ loop, the training step of each
// (forward, loss, gradient) scheduled without compiling or running anything
// (loom::schedule_of), reported per node of the tensor graph. Linear scheduling
// keeps `us_per_node` flat as T grows.
//   ./build/bench/bench_schedule --benchmark_filter=schedule
// The first_step cases time a whole training step once (forward, loss, backward,
// the optimizer's step, realized: rangeify, the stages, kernel split, compiling
// and running); they run one iteration each, since the step after it is a
// schedule cache hit. Run each in a process of its own, with LOOM_CACHE_DIR=off,
// for the time a fresh program waits:
//   LOOM_CACHE_DIR=off ./build/bench/bench_schedule --benchmark_filter=first_step/lstm/128/
#include <loom/debug.hpp>
#include <loom/gradient.hpp>
#include <loom/graph_file.hpp>
#include <loom/loom.hpp>
#include <loom/nn.hpp>
#include <loom/optim.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <ctime>
#include <string>
#include <vector>

namespace {

using loom::DType;
using loom::Tensor;

constexpr int64_t kBatch = 16, kHidden = 128;                    // the RNN of issue 24
constexpr int64_t kVocab = 256, kEmbed = 64, kLstmHidden = 128;  // the LSTM language model

// A recurrence's training step: its loss, the parameters it trains, and what
// realizing the step means (the loss and every gradient).
struct Step {
  Tensor loss;
  std::vector<Tensor> params;
};

Tensor uniform(loom::Shape shape, double bound) {
  return ((Tensor::rand(std::move(shape)) * 2.0 - 1.0) * bound).realize().requires_grad_();
}

// h = tanh(x_t + h @ W), T steps from h = 0; the loss is the mean square of the last h.
Step rnn(int64_t steps) {
  const Tensor x = Tensor::randn({steps, kBatch, kHidden}).realize();
  Tensor w = uniform({kHidden, kHidden}, 1.0 / std::sqrt(double(kHidden)));
  Tensor h = Tensor::zeros({kBatch, kHidden});
  for (int64_t t = 0; t < steps; ++t)
    h = (x.slice(0, t, t + 1).reshape({kBatch, kHidden}) + h.matmul(w)).tanh();
  return {h.square().mean(), {w}};
}

// An LSTM language model: embedding, one LSTM layer (PyTorch's gate order i, f, g, o),
// a linear read-out and the cross entropy of the next token, summed over T steps.
Step lstm(int64_t steps) {
  const Tensor tokens = Tensor::randint(0, kVocab, {steps + 1, kBatch}).realize();
  const double k = 1.0 / std::sqrt(double(kLstmHidden));
  loom::nn::Embedding embed(kVocab, kEmbed);
  Tensor w_ih = uniform({kEmbed, 4 * kLstmHidden}, k), w_hh = uniform({kLstmHidden, 4 * kLstmHidden}, k),
         b = uniform({4 * kLstmHidden}, k);
  loom::nn::Linear out(kLstmHidden, kVocab);
  Tensor h = Tensor::zeros({kBatch, kLstmHidden}), c = Tensor::zeros({kBatch, kLstmHidden});
  Tensor loss;
  for (int64_t t = 0; t < steps; ++t) {
    const Tensor x = embed(tokens.slice(0, t, t + 1).reshape({kBatch}));
    const Tensor gates = x.matmul(w_ih) + h.matmul(w_hh) + b;
    const auto gate = [&](int64_t i) { return gates.slice(1, i * kLstmHidden, (i + 1) * kLstmHidden); };
    c = gate(1).sigmoid() * c + gate(0).sigmoid() * gate(2).tanh();
    h = gate(3).sigmoid() * c.tanh();
    const Tensor step_loss = loom::nn::cross_entropy(out(h), tokens.slice(0, t + 1, t + 2).reshape({kBatch}));
    loss = loss.defined() ? loss + step_loss : step_loss;
  }
  std::vector<Tensor> params{embed.weight, w_ih, w_hh, b, out.weight, out.bias};
  return {loss / double(steps), params};
}

// Nodes of the tensor graph (loom's text form has one line per node).
int64_t graph_nodes(const std::vector<Tensor>& outputs) {
  const std::string text = loom::graph_to_text(outputs, {.max_data_bytes = 0});
  int64_t n = 0;
  for (size_t i = 0; i < text.size(); i = text.find('\n', i) + 1) {
    n += text[i] == '%';
    if (text.find('\n', i) == std::string::npos) break;
  }
  return n;
}

// CPU time of the process, in microseconds: scheduling runs on the calling thread,
// and the machine the benchmarks share may be loaded.
double cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) * 1e-3;
}

template <Step (*make)(int64_t)>
void schedule(benchmark::State& state) {
  const Step step = make(state.range(0));
  std::vector<Tensor> outputs = loom::gradient(step.loss, step.params);
  outputs.insert(outputs.begin(), step.loss);
  size_t kernels = 0;
  double spent = 0;
  for (auto _ : state) {
    const double t0 = cpu_us();
    const auto s = loom::schedule_of(outputs);
    spent += cpu_us() - t0;
    kernels = s.size();
    benchmark::DoNotOptimize(kernels);
  }
  const double nodes = double(graph_nodes(outputs));
  state.counters["nodes"] = nodes;
  state.counters["kernels"] = double(kernels);
  state.counters["us_per_node"] = spent / double(state.iterations()) / nodes;
}
BENCHMARK(schedule<rnn>)
    ->Name("schedule/rnn")
    ->RangeMultiplier(2)
    ->Range(8, 256)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(schedule<lstm>)
    ->Name("schedule/lstm")
    ->RangeMultiplier(2)
    ->Range(8, 256)
    ->Unit(benchmark::kMillisecond);

// One training step realized from scratch, timed by hand: Adam's state is
// realized when the optimizer is made, before the clock starts.
template <Step (*make)(int64_t)>
void first_step(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    Step step = make(state.range(0));
    loom::optim::Adam opt(step.params, 1e-3);
    const double nodes = double(graph_nodes({step.loss}));
    state.ResumeTiming();
    step.loss.backward();
    opt.step();
    state.counters["nodes"] = nodes;
  }
}
BENCHMARK(first_step<rnn>)
    ->Name("first_step/rnn")
    ->RangeMultiplier(2)
    ->Range(8, 256)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(first_step<lstm>)
    ->Name("first_step/lstm")
    ->RangeMultiplier(2)
    ->Range(8, 256)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The RNN's forward pass alone, realized from scratch (issue 24's first measurement).
void first_realize_rnn(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    const int64_t steps = state.range(0);
    const Tensor x = Tensor::randn({steps, kBatch, kHidden}).realize();
    const Tensor w = (Tensor::randn({kHidden, kHidden}) * 0.05).realize();
    Tensor h = Tensor::zeros({kBatch, kHidden});
    for (int64_t t = 0; t < steps; ++t)
      h = (x.slice(0, t, t + 1).reshape({kBatch, kHidden}) + h.matmul(w)).tanh();
    const double nodes = double(graph_nodes({h}));
    state.ResumeTiming();
    h.realize();
    state.counters["nodes"] = nodes;
  }
}
BENCHMARK(first_realize_rnn)
    ->Name("first_realize/rnn")
    ->RangeMultiplier(2)
    ->Range(8, 256)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
