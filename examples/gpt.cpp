// Trains a character-level GPT (examples/gpt.hpp: 4 layers, 4 heads, d_model 256,
// contexts of 256 characters, about 3.2 M parameters) on the fortune cookies of
// Debian's `fortunes` package, then samples from it. As nanoGPT trains its
// Shakespeare model: random windows of the training text, AdamW (betas 0.9, 0.99)
// with weight decay 0.1 on the matrices only, a linear warm-up then a cosine decay
// to a tenth of the rate, gradient clipping at 1.0, dropout 0.1.
//   gpt [--steps N] [--batch-size B] [--block T] [--n-layer L] [--n-head H] [--d-model D]
//       [--dropout P] [--lr LR] [--warmup N] [--seed S] [--eval-every N] [--eval-batches N]
//       [--checkpoint PATH] [--resume] [--stop-after N] [--sample N] [--temperature X]
//       [--top-k K] [--prompt TEXT] [--data DIR]
// A progress bar shows the loss and the tokens per second; every --eval-every steps
// (and before the first) the loss on the validation text is printed and the
// checkpoint written. --stop-after N ends the run after step N of the --steps
// schedule (as a job's time limit would); --resume continues it from the checkpoint
// bit for bit. Equal seeds give equal losses. Then --sample characters are drawn
// from the model in evaluation mode, with --temperature and --top-k, one token at a
// time through a KV cache (gpt::KVCache).
// Exits 77 when the fortunes package is not installed.
#include "gpt.hpp"
#include "host_random.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace {

using loom::Tensor;

constexpr const char* usage =
    "usage: gpt [--steps N] [--batch-size B] [--block T] [--n-layer L] [--n-head H] [--d-model D]\n"
    "           [--dropout P] [--lr LR] [--warmup N] [--seed S] [--eval-every N] [--eval-batches N]\n"
    "           [--checkpoint PATH] [--resume] [--stop-after N] [--sample N] [--temperature X]\n"
    "           [--top-k K] [--prompt TEXT] [--data DIR] [--autocast bf16]\n";

struct Options {
  gpt::Config model;  // vocab_size comes from the corpus
  int64_t steps = 2000, batch_size = 8;
  std::optional<int64_t> warmup;  // default: a tenth of the steps, at most 100
  double lr = 1e-3, min_lr_factor = 0.1, weight_decay = 0.1;
  uint64_t seed = 0;
  int64_t eval_every = 250, eval_batches = 16, stop_after = 0;
  std::filesystem::path checkpoint = "gpt.safetensors", data = gpt::default_dir;
  bool resume = false;
  int64_t sample = 500, top_k = 40;
  double temperature = 0.8;
  std::string prompt = "%\n";  // the line between two fortunes: the sample starts a new one
  // Mixed precision, as torch.autocast on the CPU: the linear layers and attention products
  // take bfloat16 operands and accumulate in float32; norms, softmax and the loss stay float32.
  bool autocast = false;
};

Options parse(int argc, char** argv) {
  Options o;
  using Set = std::function<void(const std::string&)>;
  const auto integer = [](int64_t& field) {
    return [&field](const std::string& v) { field = std::stoll(v); };
  };
  const auto real = [](double& field) { return [&field](const std::string& v) { field = std::stod(v); }; };
  const std::map<std::string, Set> with_value{
      {"--steps", integer(o.steps)},
      {"--batch-size", integer(o.batch_size)},
      {"--block", integer(o.model.block_size)},
      {"--n-layer", integer(o.model.n_layer)},
      {"--n-head", integer(o.model.n_head)},
      {"--d-model", integer(o.model.d_model)},
      {"--dropout", real(o.model.dropout)},
      {"--lr", real(o.lr)},
      {"--warmup", [&](const std::string& v) { o.warmup = std::stoll(v); }},
      {"--seed", [&](const std::string& v) { o.seed = std::stoull(v); }},
      {"--eval-every", integer(o.eval_every)},
      {"--eval-batches", integer(o.eval_batches)},
      {"--checkpoint", [&](const std::string& v) { o.checkpoint = v; }},
      {"--stop-after", integer(o.stop_after)},
      {"--sample", integer(o.sample)},
      {"--temperature", real(o.temperature)},
      {"--top-k", integer(o.top_k)},
      {"--prompt", [&](const std::string& v) { o.prompt = v; }},
      {"--data", [&](const std::string& v) { o.data = v; }},
      {"--autocast",
       [&](const std::string& v) {
         if (v != "bf16") throw std::invalid_argument("--autocast is bf16, not " + v);
         o.autocast = true;
       }},
  };
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") throw std::invalid_argument("");  // usage, exit 0
    if (flag == "--resume") {
      o.resume = true;
      continue;
    }
    const auto it = with_value.find(flag);
    if (it == with_value.end()) throw std::invalid_argument("unknown argument " + flag);
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
    it->second(argv[++i]);
  }
  if (o.steps < 1 || o.batch_size < 1 || o.eval_every < 1 || o.eval_batches < 1)
    throw std::invalid_argument("--steps, --batch-size, --eval-every and --eval-batches must be >= 1");
  if (!o.warmup) o.warmup = std::min<int64_t>(100, o.steps / 10);
  if (*o.warmup < 0 || *o.warmup >= o.steps) throw std::invalid_argument("--warmup must be in [0, --steps)");
  if (!(o.temperature > 0)) throw std::invalid_argument("--temperature must be > 0");
  if (o.prompt.empty()) throw std::invalid_argument("--prompt must not be empty");
  return o;
}

// splitmix64's finaliser: the seed of the host generator that picks step `step`'s windows.
uint64_t mix(uint64_t seed, uint64_t step) {
  uint64_t h = seed * 0x9E3779B97F4A7C15ull + step + 1;
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
  return h ^ (h >> 31);
}

// Warm-up then cosine decay, PyTorch's way: LinearLR from lr / warmup to lr over
// `warmup` steps, then CosineAnnealingLR down to `min_lr` at the last step.
std::unique_ptr<loom::optim::LRScheduler> warmup_cosine(loom::optim::Optimizer& opt, int64_t warmup,
                                                        int64_t steps, double min_lr) {
  using namespace loom::optim;
  if (warmup == 0) return std::make_unique<CosineAnnealingLR>(opt, steps, min_lr);
  auto up = std::make_shared<LinearLR>(opt, 1.0 / static_cast<double>(warmup), 1.0, warmup);
  auto down = std::make_shared<CosineAnnealingLR>(opt, steps - warmup, min_lr);
  return std::make_unique<SequentialLR>(opt, std::vector<std::shared_ptr<LRScheduler>>{up, down},
                                        std::vector<int64_t>{warmup});
}

// The model, its optimizer (two parameter groups: weight decay on the matrices only) and
// its schedule: everything a checkpoint holds.
class Trainer {
 public:
  explicit Trainer(Options o, gpt::Corpus c)
      : options(std::move(o)),
        corpus(std::move(c)),
        model(make_model(options, corpus)),
        opt({{.params = model.decay_groups().first, .weight_decay = options.weight_decay},
             {.params = model.decay_groups().second, .weight_decay = 0.0}},
            options.lr, 0.9, 0.99, 1e-8),
        schedule(warmup_cosine(opt, *options.warmup, options.steps, options.lr * options.min_lr_factor)),
        params(model.parameters()) {
    const int64_t t = options.model.block_size;
    if (static_cast<int64_t>(corpus.train.size()) <= t + 1 ||
        static_cast<int64_t>(corpus.val.size()) <= t + 1)
      throw std::invalid_argument("--block " + std::to_string(t) + " is longer than the text");
  }

  // Training step `s` (from 1) on its batch: random windows of the training text,
  // drawn from (seed, s) alone so that a resumed run sees the same ones.
  float step(int64_t s) {
    examples::HostRandom rng(mix(options.seed, static_cast<uint64_t>(s)));
    const auto span =
        static_cast<double>(corpus.train.size() - static_cast<size_t>(options.model.block_size) - 1);
    std::vector<int64_t> offsets;
    for (int64_t b = 0; b < options.batch_size; ++b)
      offsets.push_back(static_cast<int64_t>(rng.uniform() * span));
    const auto [x, y] = windows(corpus.train, offsets);

    opt.zero_grad();
    Tensor loss = loss_of(x, y);
    loss.backward();
    loom::optim::clip_grad_norm_(params, 1.0);
    opt.step();  // the forward, the backward, the clipping and the update: one schedule
    schedule->step();
    ++steps_done;
    return loss.item<float>();
  }

  // The mean loss over eval_batches batches of windows spread evenly over `split`
  // (the same windows every time), in evaluation mode (no dropout).
  double evaluate(const std::vector<int32_t>& split) {
    loom::NoGrad no_grad;
    model.eval();
    const int64_t n = options.eval_batches * options.batch_size;
    const auto span = static_cast<int64_t>(split.size()) - options.model.block_size - 1;
    double total = 0;
    for (int64_t b = 0; b < options.eval_batches; ++b) {
      std::vector<int64_t> offsets;
      for (int64_t i = b * options.batch_size; i < (b + 1) * options.batch_size; ++i)
        offsets.push_back(n > 1 ? i * span / (n - 1) : 0);
      const auto [x, y] = windows(split, offsets);
      total += loss_of(x, y).item<float>();
    }
    model.train();
    return total / static_cast<double>(options.eval_batches);
  }

  // `n` characters after `prompt`, each drawn from the softmax of the last
  // position's logits / temperature, restricted to the top_k largest. Tokens are
  // decoded one at a time through a KVCache (gpt::Model::decode), the prompt's too:
  // each costs one position's work, and under loom::Capture every one after the second
  // replays the first's kernels without building a graph. When the context fills the
  // block, the cache is rebuilt from its last half (positions are absolute, so the kept
  // tokens move to the front).
  std::string sample(int64_t n, double temperature, int64_t top_k, const std::string& prompt) {
    loom::NoGrad no_grad;
    model.eval();
    examples::HostRandom rng(mix(options.seed, ~0ull));
    const int64_t block = options.model.block_size, vocab = corpus.vocab_size();
    const loom::Autocast ac = autocast_scope();
    gpt::Decoder decode(model);
    std::vector<int32_t> context;  // the tokens in the cache, position 0 first
    const auto feed_one = [&](int32_t token) {
      const auto position = static_cast<int32_t>(context.size());
      context.push_back(token);
      return decode(token, position);
    };
    Tensor logits;
    const auto feed = [&](int32_t token) {
      if (static_cast<int64_t>(context.size()) == block) {
        const std::vector<int32_t> kept(context.end() - block / 2, context.end());
        context.clear();
        for (const int32_t t : kept) feed_one(t);
      }
      logits = feed_one(token);
    };
    for (const int32_t t : corpus.encode(prompt)) feed(t);
    std::vector<int32_t> drawn;
    for (int64_t i = 0; i < n; ++i) {
      Tensor scaled = logits / temperature;
      if (top_k > 0 && top_k < vocab) {
        const Tensor kth = scaled.topk(top_k).first.slice(0, top_k - 1, top_k);
        scaled = scaled.masked_fill(scaled.lt(kth), -std::numeric_limits<double>::infinity());
      }
      const std::vector<float> probs = scaled.softmax(-1).to_vector<float>();
      double u = rng.uniform();
      int32_t next = 0;
      for (; next < vocab - 1; ++next) {
        u -= probs[static_cast<size_t>(next)];
        if (u < 0) break;
      }
      drawn.push_back(next);
      if (i + 1 < n) feed(next);
    }
    model.train();
    return corpus.decode(drawn);
  }

  // Model, optimizer and schedule, the steps done, loom's generator (the
  // dropout masks), the vocabulary and the options the run depends on, in one
  // safetensors file (loom::save replaces it only once complete).
  void save(const std::filesystem::path& path) const {
    loom::NamedTensors all;
    for (const auto& [name, t] : model.state_dict("model")) all.emplace_back(name, t);
    for (const auto& [name, t] : opt.state_dict()) all.emplace_back("opt." + name, t);
    for (const auto& [name, t] : schedule->state_dict()) all.emplace_back("schedule." + name, t);
    all.emplace_back("steps_done", Tensor::from_vector<int64_t>({steps_done}, {}));
    all.emplace_back("rng_state", loom::get_rng_state());
    all.emplace_back("vocab", Tensor::from_vector(corpus.vocab, {corpus.vocab_size()}));
    all.emplace_back("run", Tensor::from_vector(run_options(), {static_cast<int64_t>(run_options().size())}));
    loom::save(path, all);
  }

  // Continues from a checkpoint `save` wrote for the same options and corpus.
  void resume(const std::filesystem::path& path) {
    const auto all = loom::load(path);
    const auto at = [&](const std::string& name) -> const Tensor& {
      const auto it = all.find(name);
      if (it == all.end()) throw std::runtime_error("resume " + path.string() + ": no '" + name + "' in it");
      return it->second;
    };
    if (at("run").to_vector<double>() != run_options() || at("vocab").to_vector<uint8_t>() != corpus.vocab)
      throw std::runtime_error("resume " + path.string() +
                               ": written for other options (seed, batch size, model sizes, learning rate, "
                               "schedule, dropout, autocast) or another corpus; pass the same ones");
    std::map<std::string, std::map<std::string, Tensor>> parts;
    for (const auto& [name, t] : all)
      if (const auto dot = name.find('.'); dot != std::string::npos)
        parts[name.substr(0, dot)].emplace(name.substr(dot + 1), t);
    model.load_state_dict(parts["model"]);
    opt.load_state_dict(parts["opt"]);
    schedule->load_state_dict(parts["schedule"]);
    loom::set_rng_state(at("rng_state"));
    steps_done = at("steps_done").item<int64_t>();
  }

  Options options;
  gpt::Corpus corpus;
  gpt::Model model;
  loom::optim::AdamW opt;
  std::unique_ptr<loom::optim::LRScheduler> schedule;
  std::vector<Tensor> params;
  int64_t steps_done = 0;

 private:
  static gpt::Model make_model(const Options& o, const gpt::Corpus& c) {
    loom::manual_seed(o.seed);
    gpt::Config config = o.model;
    config.vocab_size = c.vocab_size();
    return gpt::Model(config);
  }
  // Windows of block_size + 1 tokens at `offsets`: the inputs [B, T] and, shifted
  // by one, the characters to predict [B * T].
  std::pair<Tensor, Tensor> windows(const std::vector<int32_t>& split,
                                    const std::vector<int64_t>& offsets) const {
    const int64_t t = options.model.block_size, b = static_cast<int64_t>(offsets.size());
    std::vector<int32_t> x, y;
    for (const int64_t o : offsets) {
      x.insert(x.end(), split.begin() + o, split.begin() + o + t);
      y.insert(y.end(), split.begin() + o + 1, split.begin() + o + t + 1);
    }
    return {Tensor::from_vector(x, {b, t}), Tensor::from_vector(y, {b * t})};
  }
  Tensor loss_of(const Tensor& x, const Tensor& y) const {
    const loom::Autocast ac = autocast_scope();
    return loom::nn::cross_entropy(model(x).reshape({-1, corpus.vocab_size()}), y);
  }
  // A scope of bfloat16 autocast with --autocast; without, a disabled one (as outside any).
  loom::Autocast autocast_scope() const { return loom::Autocast(loom::DType::BFloat16, options.autocast); }
  std::vector<double> run_options() const {
    const auto d = [](int64_t v) { return static_cast<double>(v); };
    const gpt::Config& m = model.config;
    return {static_cast<double>(options.seed),
            d(options.batch_size),
            d(options.steps),
            d(*options.warmup),
            options.lr,
            options.min_lr_factor,
            options.weight_decay,
            d(m.vocab_size),
            d(m.block_size),
            d(m.n_layer),
            d(m.n_head),
            d(m.d_model),
            m.dropout,
            d(static_cast<int64_t>(corpus.train.size())),
            d(static_cast<int64_t>(corpus.val.size())),
            options.autocast ? 1.0 : 0.0};
  }
};

uint64_t kernels_made() {
  const loom::Counters c = loom::counters();
  return c.kernels_compiled + c.kernels_loaded;  // compiled, or loaded from LOOM_CACHE_DIR
}

// "step 120/2000 [==>        ] loss 2.3456  lr 9.6e-04  4612 tok/s", redrawn in
// place on a terminal; elsewhere (CI logs) a line every tenth of the run.
class Progress {
 public:
  Progress(int64_t first, int64_t steps) : first_(first), steps_(steps) {}
  void operator()(int64_t step, float loss, double lr, double tokens_per_second) {
    smoothed_ = step == first_ ? loss : 0.9 * smoothed_ + 0.1 * loss;
    const bool last = step == steps_;
    const double now = wall();
    if (tty_ ? (now - drawn_ < 0.1 && !last) : (step * 10 / steps_ == (step - 1) * 10 / steps_ && !last))
      return;
    drawn_ = now;
    constexpr int width = 30;
    const auto filled = static_cast<int>(width * step / steps_);
    std::string bar(static_cast<size_t>(filled), '=');
    if (filled < width) bar += '>' + std::string(static_cast<size_t>(width - filled - 1), ' ');
    fmt::print("{}step {:{}}/{} [{}] loss {:.4f}  lr {:.1e}  {:.0f} tok/s{}", tty_ ? "\r" : "", step,
               std::to_string(steps_).size(), steps_, bar, smoothed_, lr, tokens_per_second,
               tty_ ? "" : "\n");
    std::fflush(stdout);
  }
  // Ends the redrawn line before other output.
  void newline() const {
    if (tty_) fmt::print("\n");
  }

 private:
  double wall() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  int64_t first_, steps_;
  double smoothed_ = 0, drawn_ = -1;
  bool tty_ = isatty(fileno(stdout));
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

int run(const Options& o) {
  using Clock = std::chrono::steady_clock;
  Trainer trainer(o, gpt::load(o.data));
  const gpt::Config& c = trainer.model.config;
  int64_t n_params = 0;
  for (const Tensor& p : trainer.params) n_params += p.numel();
  fmt::print("fortunes: {} files, {} training and {} validation characters, {} distinct\n",
             trainer.corpus.files.size(), trainer.corpus.train.size(), trainer.corpus.val.size(),
             c.vocab_size);
  fmt::print(
      "GPT: {} layers, {} heads, d_model {}, block {}, dropout {}: {} parameters; batches of {} x {}, "
      "AdamW lr {} (warm-up {} steps, cosine to {}), seed {}, {} threads{}\n",
      c.n_layer, c.n_head, c.d_model, c.block_size, c.dropout, n_params, o.batch_size, c.block_size, o.lr,
      *o.warmup, o.lr * o.min_lr_factor, o.seed, loom::get_num_threads(),
      o.autocast ? ", autocast bf16" : "");
  if (o.resume) {
    trainer.resume(o.checkpoint);
    fmt::print("resumed from {} after step {}\n", o.checkpoint.string(), trainer.steps_done);
  } else {
    fmt::print("step {}: val loss {:.6f}\n", 0, trainer.evaluate(trainer.corpus.val));
  }
  std::fflush(stdout);  // the lines so far, before the first step's wait, in a log too

  const int64_t last = o.stop_after > 0 ? std::min(o.stop_after, o.steps) : o.steps;
  const int64_t first = trainer.steps_done + 1, tokens_per_step = o.batch_size * c.block_size;
  Progress progress(first, o.steps);
  // The rate leaves out the run's first step, which compiles the step's kernels.
  double first_seconds = 0, steady_seconds = 0, loss_sum = 0;
  int64_t losses = 0;
  const auto rate = [&](int64_t s) {
    return s == first ? static_cast<double>(tokens_per_step) / first_seconds
                      : static_cast<double>((s - first) * tokens_per_step) / steady_seconds;
  };
  // Kernels made after the run's second step, the validation's first compile left out
  // (a resumed run evaluates for the first time at its first checkpoint).
  uint64_t made_at_2 = kernels_made(), made_by_evaluation = 0;
  while (trainer.steps_done < last) {
    const auto t0 = Clock::now();
    const double lr = trainer.opt.lr();
    const float loss = trainer.step(trainer.steps_done + 1);
    const int64_t s = trainer.steps_done;
    (s == first ? first_seconds : steady_seconds) += std::chrono::duration<double>(Clock::now() - t0).count();
    if (!std::isfinite(loss)) {
      progress.newline();
      fmt::print(stderr, "gpt: the loss at step {} is {}\n", s, loss);
      return EXIT_FAILURE;
    }
    loss_sum += loss;
    ++losses;
    progress(s, loss, lr, rate(s));
    if (s == first + 1) made_at_2 = kernels_made();
    if (s % o.eval_every == 0 || s == last) {
      progress.newline();
      const uint64_t made_before = kernels_made();
      const double val = trainer.evaluate(trainer.corpus.val);
      if (s > first) made_by_evaluation += kernels_made() - made_before;
      trainer.save(o.checkpoint);
      fmt::print(
          "step {}: train loss {:.6f} (mean of the last {} steps), val loss {:.6f}, {:.0f} tok/s; "
          "checkpoint {}\n",
          s, loss_sum / static_cast<double>(losses), losses, val, rate(s), o.checkpoint.string());
      std::fflush(stdout);
      loss_sum = 0;
      losses = 0;
    }
  }
  if (last > first)
    fmt::print(
        "trained steps {}-{}: the first in {:.1f} s (compiling), the others {:.0f} ms each; training "
        "kernels compiled after step {}: {}\n",
        first, last, first_seconds, 1e3 * steady_seconds / static_cast<double>(last - first), first + 1,
        kernels_made() - made_at_2 - made_by_evaluation);
  if (o.sample > 0) {
    const auto t0 = Clock::now();
    const std::string text = trainer.sample(o.sample, o.temperature, o.top_k, o.prompt);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    fmt::print("sample ({} characters, temperature {}, top-k {}, {:.1f} characters/s):\n{}{}\n", o.sample,
               o.temperature, o.top_k, static_cast<double>(o.sample) / seconds, o.prompt, text);
  }
  return EXIT_SUCCESS;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parse(argc, argv);
  } catch (const std::exception& e) {
    if (!*e.what()) {  // --help
      fmt::print("{}", usage);
      return EXIT_SUCCESS;
    }
    fmt::print(stderr, "gpt: {}\n{}", e.what(), usage);
    return 2;
  }
  if (!gpt::installed(options.data)) {
    fmt::print(stderr, "gpt: no fortune files in {} (apt-get install fortunes)\n", options.data.string());
    return 77;
  }
  try {
    return run(options);
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpt: {}\n", e.what());
    return EXIT_FAILURE;
  }
}
