// Training steps of real models written the obvious way (bench/models/*.hpp),
// each in four variants: as written, under loom::Capture, and both with
// `.contiguous()` after every layer and activation. One iteration is a whole
// step: forward, loss, backward, the optimizer's update, the loss realized.
// bench/peers/model_twins.py has the PyTorch twins; bench/compare runs both and
// prints one row per model. Run alone:
//   ./build/bench/bench_models --benchmark_min_time=0.5
// Counters: steps/s; kernels/step (kernels run per timed step); loss_1, the
// loss of the first step (the twin's too: same weights, same data), and, where
// not captured, loss_20, the loss of the twentieth: the untimed warm-up runs 20
// steps, or 3 under Capture (it records at the second and replays from the third).
// mlp_block_step_autocast, gpt_step_autocast and conv_net_step_autocast: the step as written in a
// loom::Autocast(BFloat16) scope, as torch.autocast; bench/compare prints each
// against its float32 step (issue 28's GPT target: 1.4x).
//
// char_transformer_first_step: a fresh character transformer's first step,
// construction included, with the disk cache off. Only the first benchmark a
// process runs is cold (kernels compiled in this process stay in memory), so
// run it alone; its kernels_compiled counter says how much it compiled:
//   ./build/bench/bench_models --benchmark_filter=first_step
#include "char_gpt.hpp"
#include "char_transformer.hpp"
#include "conv_net.hpp"
#include "fashion_mlp.hpp"
#include "lstm.hpp"
#include "mlp_block.hpp"
#include "residual_stack.hpp"

#include <benchmark/benchmark.h>

#include <memory>
#include <string>

namespace {

using loom::Tensor;

constexpr int kWarmupSteps = 20, kCapturedWarmupSteps = 3;

struct AnySession {
  virtual ~AnySession() = default;
};

// A model, its optimizer and its batch, warmed up: the first steps compile
// (and, captured, record) what the timed ones run.
template <class Model>
struct Session : AnySession {
  const bool contiguous, captured, autocast;
  Model model;
  std::unique_ptr<loom::optim::Optimizer> opt = optimizer_of(model);
  std::vector<Tensor> batch = model.batch();
  loom::Capture capture{[this](const std::vector<Tensor>& b) { return step_of(b); }};
  double first_loss = 0, last_warmup_loss = 0;

  Session(bool contiguous_, bool captured_, bool autocast_)
      : contiguous(contiguous_),
        captured(captured_),
        autocast(autocast_),
        model(models::Layout{contiguous_}) {
    for (int i = 1; i <= (captured ? kCapturedWarmupSteps : kWarmupSteps); ++i) {
      const double loss = step().template item<float>();
      if (i == 1) first_loss = loss;
      last_warmup_loss = loss;
    }
  }

  // A model whose step is more than one optimizer's (char_gpt: clipping, two AdamW)
  // defines train_step and owns its optimizers.
  static std::unique_ptr<loom::optim::Optimizer> optimizer_of(const Model& m) {
    if constexpr (requires { m.optimizer(); })
      return m.optimizer();
    else
      return nullptr;
  }

  std::vector<Tensor> step_of(const std::vector<Tensor>& b) {
    const loom::Autocast scope(loom::DType::BFloat16, autocast);
    if constexpr (requires { model.train_step(b); }) {
      return {model.train_step(b)};
    } else {
      opt->zero_grad();
      Tensor loss = model.loss(b);
      loss.backward();
      opt->step();
      return {loss};
    }
  }
  Tensor step() {
    if (captured) return capture(batch)[0];
    Tensor loss = step_of(batch)[0];
    return loss.realize();
  }
};

// The session of the benchmark running, kept while it runs (Google Benchmark
// calls a benchmark several times to choose its iteration count); main() drops
// it before loom's own statics go.
std::unique_ptr<AnySession> current_session;

template <class Model>
Session<Model>& session(bool contiguous, bool captured, bool autocast) {
  auto* s = dynamic_cast<Session<Model>*>(current_session.get());
  if (!s || s->contiguous != contiguous || s->captured != captured || s->autocast != autocast) {
    current_session.reset();
    auto fresh = std::make_unique<Session<Model>>(contiguous, captured, autocast);
    s = fresh.get();
    current_session = std::move(fresh);
  }
  return *s;
}

template <class Model>
void model_step(benchmark::State& state, bool contiguous, bool captured, bool autocast) {
  Session<Model>& s = session<Model>(contiguous, captured, autocast);
  const uint64_t kernels = loom::counters().kernels_executed;
  for (auto _ : state) {
    Tensor loss = s.step();
    benchmark::DoNotOptimize(loss);
  }
  const double steps = static_cast<double>(state.iterations());
  state.counters["steps/s"] = benchmark::Counter(steps, benchmark::Counter::kIsRate);
  state.counters["kernels/step"] = static_cast<double>(loom::counters().kernels_executed - kernels) / steps;
  state.counters["loss_1"] = s.first_loss;
  if (!captured) state.counters["loss_20"] = s.last_warmup_loss;
}

template <class Model>
void register_model() {
  for (const bool contiguous : {false, true})
    for (const bool captured : {false, true}) {
      const std::string name =
          std::string(Model::name) + (contiguous ? "_contiguous" : "") + (captured ? "_captured" : "");
      benchmark::RegisterBenchmark(name.c_str(), model_step<Model>, contiguous, captured, false)
          ->Unit(benchmark::kMillisecond);
    }
}

// The step as written under bfloat16 Autocast.
template <class Model>
void register_autocast() {
  const std::string name = std::string(Model::name) + "_autocast";
  benchmark::RegisterBenchmark(name.c_str(), model_step<Model>, false, false, true)
      ->Unit(benchmark::kMillisecond);
}

void char_transformer_first_step(benchmark::State& state) {
  loom::Context off{{"CACHE_DIR", "off"}};
  const uint64_t compiled = loom::counters().kernels_compiled;
  for (auto _ : state) {
    models::CharTransformer model(models::Layout{});
    const auto opt = model.optimizer();
    const std::vector<Tensor> batch = model.batch();
    Tensor loss = model.loss(batch);
    loss.backward();
    opt->step();
    benchmark::DoNotOptimize(loss.realize());
  }
  state.counters["kernels_compiled"] = static_cast<double>(loom::counters().kernels_compiled - compiled);
}

}  // namespace

int main(int argc, char** argv) {
  // First, so that a run of every benchmark starts with it while the process is cold.
  benchmark::RegisterBenchmark("char_transformer_first_step", char_transformer_first_step)
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond)
      ->MeasureProcessCPUTime()
      ->UseRealTime();
  register_model<models::MlpBlock>();
  register_model<models::ResidualStack>();
  register_model<models::Lstm>();
  register_model<models::CharTransformer>();
  register_model<models::CharGpt>();
  register_model<models::ConvNet>();
  register_model<models::FashionMlp>();
  register_autocast<models::MlpBlock>();
  register_autocast<models::CharGpt>();
  register_autocast<models::ConvNet>();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  current_session.reset();
  benchmark::Shutdown();
  return 0;
}
