// Trains a CNN (or an MLP) on Fashion-MNIST from Debian's dataset-fashion-mnist
// package: Adam, batches of 64 shuffled by a DataLoader whose background thread
// prepares the next batch, a progress bar, test accuracy and images per second
// after each epoch, and a checkpoint after each epoch that --resume continues
// from bit for bit. Each epoch also reports the kernels compiled (none after the
// first epoch's second step) and the memory held (flat over an epoch).
//   fashion_mnist [--model cnn|mlp] [--epochs N] [--batch-size B] [--limit N]
//                 [--test-limit N] [--seed S] [--lr LR] [--checkpoint PATH]
//                 [--resume] [--stop-after N] [--data DIR] [--min-accuracy PERCENT] [--ddp]
//                 [--autocast bf16|f16]
// --ddp trains data parallel over the ranks of an MPI job (docs/distributed.md):
//   mpirun -np 2 -x LOOM_THREADS=1 fashion_mnist --ddp
// each rank on its shard with batches of B, rank 0 printing and checkpointing.
// --stop-after N ends the run after epoch N of the --epochs schedule (as a job's
// time limit would); --resume continues it.
// Exits 77 when the data set is not installed, 1 when the final accuracy is
// below --min-accuracy (tests/ runs it on a subset).
#include "fashion_mnist.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace {

constexpr const char* usage =
    "usage: fashion_mnist [--model cnn|mlp] [--epochs N] [--batch-size B] [--limit N] [--test-limit N]\n"
    "                     [--seed S] [--lr LR] [--checkpoint PATH] [--resume] [--stop-after N]\n"
    "                     [--data DIR] [--min-accuracy PERCENT] [--ddp] [--autocast bf16|f16]\n";

struct Args {
  fashion::Options options;
  int64_t test_limit = 0;
  std::filesystem::path checkpoint;
  bool resume = false;
  int64_t stop_after = 0;  // 0: train all --epochs
  double min_accuracy = 0;
};

Args parse(int argc, char** argv) {
  Args a;
  using Set = std::function<void(const std::string&)>;
  const std::map<std::string, Set> with_value{
      {"--model", [&](const std::string& v) { a.options.model = v; }},
      {"--epochs", [&](const std::string& v) { a.options.epochs = std::stoll(v); }},
      {"--batch-size", [&](const std::string& v) { a.options.batch_size = std::stoll(v); }},
      {"--limit", [&](const std::string& v) { a.options.limit = std::stoll(v); }},
      {"--test-limit", [&](const std::string& v) { a.test_limit = std::stoll(v); }},
      {"--seed", [&](const std::string& v) { a.options.seed = std::stoull(v); }},
      {"--lr", [&](const std::string& v) { a.options.lr = std::stod(v); }},
      {"--checkpoint", [&](const std::string& v) { a.checkpoint = v; }},
      {"--data", [&](const std::string& v) { a.options.dir = v; }},
      {"--min-accuracy", [&](const std::string& v) { a.min_accuracy = std::stod(v); }},
      {"--stop-after", [&](const std::string& v) { a.stop_after = std::stoll(v); }},
      {"--autocast",
       [&](const std::string& v) {
         if (v != "bf16" && v != "f16") throw std::invalid_argument("--autocast is bf16 or f16, not " + v);
         a.options.autocast = v == "bf16" ? loom::DType::BFloat16 : loom::DType::Float16;
       }},
  };
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") throw std::invalid_argument("");  // usage, exit 0
    if (flag == "--resume" || flag == "--ddp") {
      (flag == "--ddp" ? a.options.ddp : a.resume) = true;
      continue;
    }
    const auto it = with_value.find(flag);
    if (it == with_value.end()) throw std::invalid_argument("unknown argument " + flag);
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
    it->second(argv[++i]);
  }
  if (a.options.model != "cnn" && a.options.model != "mlp")
    throw std::invalid_argument("--model is cnn or mlp, not " + a.options.model);
  if (a.options.epochs < 1 || a.options.batch_size < 1)
    throw std::invalid_argument("--epochs and --batch-size must be >= 1");
  if (a.checkpoint.empty()) a.checkpoint = "fashion_mnist_" + a.options.model + ".safetensors";
  return a;
}

// Resident memory of this process (VmRSS), in MiB.
double rss_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmRSS:")) return std::stod(line.substr(6)) / 1024;
  return 0;
}

uint64_t kernels_made() {
  const loom::Counters c = loom::counters();
  return c.kernels_compiled + c.kernels_loaded;  // compiled, or loaded from LOOM_CACHE_DIR
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// "epoch 1/3 [=========>          ] 312/937  loss 0.4213  1820 img/s", redrawn in
// place on a terminal; elsewhere (CI logs) a line every tenth of the epoch.
class Progress {
 public:
  // `batch`: the images a step trains on (every rank's), `images`: an epoch's (the last batch
  // may be smaller); `shown`: false on ranks other than 0.
  Progress(int64_t epoch, int64_t epochs, int64_t batch, int64_t images, bool shown)
      : epoch_(epoch), epochs_(epochs), batch_(batch), images_(images), shown_(shown) {}
  void operator()(int64_t step, int64_t steps, float loss) {
    smoothed_ = step == 1 ? loss : 0.95 * smoothed_ + 0.05 * loss;
    if (!shown_) return;
    const bool last = step == steps;
    const double now = seconds();
    if (tty_ ? (now - drawn_ < 0.1 && !last) : (step * 10 / steps == (step - 1) * 10 / steps && !last))
      return;
    drawn_ = now;
    constexpr int width = 30;
    const auto filled = static_cast<int>(width * step / steps);
    std::string bar(static_cast<size_t>(filled), '=');
    if (filled < width) bar += '>' + std::string(static_cast<size_t>(width - filled - 1), ' ');
    fmt::print("{}epoch {}/{} [{}] {:{}}/{}  loss {:.4f}  {:.0f} img/s{}", tty_ ? "\r" : "", epoch_, epochs_,
               bar, step, std::to_string(steps).size(), steps, smoothed_,
               static_cast<double>(std::min(step * batch_, images_)) / std::max(now, 1e-9),
               tty_ && !last ? "" : "\n");
    std::fflush(stdout);
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  int64_t epoch_, epochs_, batch_, images_;
  bool shown_;
  double smoothed_ = 0, drawn_ = -1;
  bool tty_ = isatty(fileno(stdout));
  Clock::time_point start_ = Clock::now();
};

// fmt::print on rank 0 only (every rank when not data parallel).
template <class... A>
void say(bool lead, fmt::format_string<A...> format, A&&... a) {
  if (lead) fmt::print(format, std::forward<A>(a)...);
}

int run(const Args& args) {
  using namespace loom;
  fashion::Trainer trainer(args.options);
  const fashion::Split test = fashion::load(args.options.dir, false, args.test_limit);
  // With --ddp, rank 0 prints; a step trains on every rank's batch.
  const int ranks = args.options.ddp ? dist::world_size() : 1;
  const bool lead = !args.options.ddp || dist::rank() == 0;
  const int64_t steps = trainer.loader.size(), batch = args.options.batch_size * ranks;
  const int64_t images =
      trainer.loader.rows() * ranks;  // an epoch's, every rank's (a shard's padding included)
  size_t params = 0;
  for (const Tensor& p : trainer.model.parameters()) params += static_cast<size_t>(p.numel());
  say(lead, "Fashion-MNIST: {} training images (batches of {}, {} steps an epoch), {} test images\n",
      trainer.train.size(), batch, steps, test.size());
  say(lead,
      "model {} ({} parameters), Adam lr {} annealed (cosine) over {} epochs, seed {}, {} threads{}{}\n",
      args.options.model, params, trainer.opt.lr(), args.options.epochs, args.options.seed, get_num_threads(),
      args.options.ddp ? fmt::format(" on each of {} ranks (data parallel, {} images a rank a step)", ranks,
                                     args.options.batch_size)
                       : "",
      args.options.autocast ? fmt::format(", autocast {}{}", scalar_name(args.options.autocast->scalar),
                                          trainer.scaler ? " with a GradScaler" : "")
                            : "");
  if (args.resume) {
    trainer.resume(args.checkpoint);
    say(lead, "resumed from {} after epoch {}\n", args.checkpoint.string(), trainer.epoch);
  }

  double accuracy = NAN;
  uint64_t compiled_late = 0;  // in training, after the first epoch's second step
  const int64_t last =
      args.stop_after > 0 ? std::min(args.stop_after, args.options.epochs) : args.options.epochs;
  for (bool first = true; trainer.epoch < last; first = false) {
    const int64_t epoch = trainer.epoch + 1;
    Progress progress(epoch, args.options.epochs, batch, images, lead);
    const uint64_t made_before = kernels_made();
    uint64_t made_at_2 = 0;
    double rss_at_2 = 0;
    Counters at_2{};
    const double loss = trainer.train_epoch([&](int64_t step, int64_t n, float l) {
      progress(step, n, l);
      if (step == 2) {
        made_at_2 = kernels_made();
        rss_at_2 = rss_mib();
        at_2 = counters();
      }
    });
    const double train_seconds = progress.seconds();
    const uint64_t made_after = kernels_made();
    const Counters at_end = counters();
    const double rss_at_end = rss_mib();
    if (first)
      compiled_late += made_after - made_at_2;
    else
      compiled_late += made_after - made_before;

    const auto t0 = std::chrono::steady_clock::now();
    accuracy = trainer.accuracy(test);
    const double test_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const uint64_t made_in_test = kernels_made() - made_after;

    say(lead,
        "epoch {}: mean loss {:.4f}, test accuracy {:.2f}%, {:.0f} images/s ({:.1f} s training, {:.1f} s "
        "testing)\n",
        epoch, loss, 100 * accuracy, static_cast<double>(images) / train_seconds, train_seconds,
        test_seconds);
    say(lead, "  kernels compiled: {} in steps 1-2, {} in steps 3-{}, {} in testing\n",
        made_at_2 - made_before, made_after - made_at_2, steps, made_in_test);
    say(lead,
        "  memory from step 2 to the epoch's end: RSS {:.1f} -> {:.1f} MiB, {} -> {} live buffers "
        "({:.1f} -> {:.1f} MiB), {} -> {} IR nodes\n",
        rss_at_2, rss_at_end, at_2.live_buffers, at_end.live_buffers, mib(at_2.live_buffer_bytes),
        mib(at_end.live_buffer_bytes), at_2.live_uops, at_end.live_uops);
    trainer.save(args.checkpoint);
    say(lead, "  checkpoint {} (epoch {})\n", args.checkpoint.string(), trainer.epoch);
  }
  if (std::isnan(accuracy)) accuracy = trainer.accuracy(test);  // resumed at --epochs already
  say(lead, "test accuracy {:.2f}%; kernels compiled in training after the first epoch's second step: {}\n",
      100 * accuracy, compiled_late);
  if (!std::isfinite(accuracy) || 100 * accuracy < args.min_accuracy) {
    if (lead)
      fmt::print(stderr, "fashion_mnist: test accuracy {:.2f}% is below {}%\n", 100 * accuracy,
                 args.min_accuracy);
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse(argc, argv);
  } catch (const std::exception& e) {
    if (!*e.what()) {  // --help
      fmt::print("{}", usage);
      return EXIT_SUCCESS;
    }
    fmt::print(stderr, "fashion_mnist: {}\n{}", e.what(), usage);
    return 2;
  }
  if (!fashion::installed(args.options.dir)) {
    fmt::print(stderr, "fashion_mnist: no Fashion-MNIST in {} (apt-get install dataset-fashion-mnist)\n",
               args.options.dir.string());
    return 77;
  }
  // With --ddp, the job is joined before anything else and left after all else.
  std::optional<loom::dist::Process> job;
  if (args.options.ddp) job.emplace(argc, argv);
  try {
    return run(args);
  } catch (const std::exception& e) {
    fmt::print(stderr, "fashion_mnist: {}\n", e.what());
    return EXIT_FAILURE;
  }
}
