#pragma once
// Fashion-MNIST (Xiao, Rasul and Vollgraf, 2017: 28x28 grey images of ten
// kinds of clothing, 60,000 to train on and 10,000 to test) and the two models
// the fashion_mnist example trains, written as a PyTorch tutorial writes them:
// nn::Sequential, Adam, a shuffling DataLoader, a checkpoint after each epoch.
// tests/examples trains the same models to check that a resumed run equals an
// uninterrupted one bit for bit.
#include <loom/loom.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fashion {

// Where Debian's dataset-fashion-mnist package puts the files.
inline const std::filesystem::path default_dir = "/usr/share/datasets/fashion-mnist";

inline bool installed(const std::filesystem::path& dir = default_dir) {
  return std::filesystem::exists(dir / "train-images-idx3-ubyte.gz");
}

// Images UInt8 [n, 28, 28] and labels UInt8 [n]: the first `limit` of the split (all when 0).
struct Split {
  loom::Tensor images, labels;
  int64_t size() const { return images.shape()[0]; }
};
inline Split load(const std::filesystem::path& dir, bool train, int64_t limit = 0) {
  const std::string prefix = train ? "train" : "t10k";
  Split s{loom::data::read_idx(dir / (prefix + "-images-idx3-ubyte.gz")),
          loom::data::read_idx(dir / (prefix + "-labels-idx1-ubyte.gz"))};
  if (limit > 0 && limit < s.size()) {
    s.images = s.images.slice(0, 0, limit).contiguous().realize();
    s.labels = s.labels.slice(0, 0, limit).contiguous().realize();
  }
  return s;
}

// Pixels to the network's input: Float32 [n, 1, 28, 28], scaled to [0, 1] and
// normalised by the training set's mean and standard deviation (0.2860, 0.3530).
inline loom::Tensor to_input(const loom::Tensor& images) {
  const loom::Tensor x = images.cast(loom::DType::Float32).reshape({-1, 1, 28, 28}) / 255.0f;
  return (x - 0.2860f) / 0.3530f;
}

// 784-256-128-10 with ReLUs.
inline loom::nn::Sequential mlp() {
  using namespace loom::nn;
  return Sequential(Flatten(), Linear(784, 256), ReLU(), Linear(256, 128), ReLU(), Linear(128, 10));
}

// Two 3x3 convolutions (32 and 64 channels, padding 1) each with batch norm,
// ReLU and 2x2 max-pooling (28 -> 14 -> 7), then dropout and two linear layers.
inline loom::nn::Sequential cnn() {
  using namespace loom::nn;
  return Sequential(Conv2d(1, 32, 3, 1, 1), BatchNorm2d(32), ReLU(), MaxPool2d(2),   //
                    Conv2d(32, 64, 3, 1, 1), BatchNorm2d(64), ReLU(), MaxPool2d(2),  //
                    Flatten(), Dropout(0.25), Linear(64 * 7 * 7, 128), ReLU(), Linear(128, 10));
}

struct Options {
  std::string model = "cnn";  // or "mlp"
  int64_t epochs = 1;         // the learning rate anneals to 0 over them
  int64_t batch_size = 64;
  int64_t limit = 0;  // training images used (all when 0)
  uint64_t seed = 0;
  double lr = 1e-3;
  std::filesystem::path dir = default_dir;
  // Data parallel over the job's ranks (loom::dist initialised): each rank trains
  // on its shard of every epoch with batches of batch_size, so a step sees
  // batch_size * ranks images, and the gradients are averaged across ranks.
  bool ddp = false;
  // Mixed precision (loom::Autocast around the forward, in training and testing): the convs and
  // linear layers run in BFloat16 or Float16 (accumulating in Float32); the parameters, norms
  // and loss stay Float32. Float16 scales the loss (loom::GradScaler).
  std::optional<loom::DType> autocast;
};

// A model, its optimizer and the shuffled training data: everything a
// checkpoint holds. Constructing it seeds loom's generator (the initial
// weights, the dropout masks) and the data order with options.seed. With
// options.ddp every rank holds a Trainer: the same seed, so the same order to
// shard and the same weights to start from.
class Trainer {
 public:
  explicit Trainer(Options o)
      : options(std::move(o)),
        model(make_model(options)),
        opt(model.parameters(), options.lr),
        train(load(options.dir, true, options.limit)),
        // Every image is trained on, the last, smaller batch included. Its first size is the
        // variable B (docs/symbolic.md), so the step is one graph for every batch and its
        // kernels are compiled in the first steps of the first epoch, the last batch's too.
        loader({train.images, train.labels}, options.batch_size, /*shuffle=*/true, options.seed,
               /*drop_last=*/false, shard_of(options)),
        // Cosine annealing, stepped every batch: the MLP gains about half a point
        // in two epochs over a constant rate (PyTorch, same model and data).
        schedule(opt, options.epochs * loader.size()) {
    loader.set_batch_variable(loom::Variable("B", 1, options.batch_size));
    if (options.ddp) ddp.emplace(model.parameters());
    if (options.autocast == loom::DType::Float16) scaler.emplace();
  }

  // One training step on a batch; returns its loss (already computed: the
  // optimizer's step realizes it with the parameters).
  float step(const loom::Tensor& images, const loom::Tensor& labels) {
    opt.zero_grad();
    loom::Tensor loss;
    {
      const auto ac = autocast_scope();
      loss = loom::nn::cross_entropy(model(to_input(images)), labels.cast(loom::DType::Int32));
    }
    if (scaler) {
      scaler->scale(loss).backward();
      if (ddp) ddp->average_gradients();
      scaler->step(opt);
      scaler->update();
    } else {
      loss.backward();
      if (ddp) ddp->average_gradients();
      opt.step();
    }
    schedule.step();
    return loss.item<float>();
  }

  // One epoch over the training data; `on_step(step, steps, loss)` after each step.
  // Returns the mean loss.
  double train_epoch(const std::function<void(int64_t, int64_t, float)>& on_step = {}) {
    model.train();
    double total = 0;
    int64_t steps = 0;
    while (auto batch = loader.next()) {
      const float loss = step((*batch)[0], (*batch)[1]);
      total += loss;
      ++steps;
      if (on_step) on_step(steps, loader.size(), loss);
    }
    ++epoch;
    if (ddp) average_buffers();
    return total / static_cast<double>(steps);
  }

  // The fraction of `split` whose largest logit is the label, in evaluation mode.
  double accuracy(const Split& split, int64_t batch_size = 1000) {
    loom::NoGrad no_grad;
    model.eval();
    loom::data::DataLoader batches({split.images, split.labels}, batch_size);
    batches.set_batch_variable(loom::Variable("B", 1, batch_size));  // a smaller last batch compiles nothing
    int64_t right = 0;
    const auto ac = autocast_scope();
    while (auto b = batches.next())
      right += model(to_input((*b)[0])).argmax(1).eq((*b)[1].cast(loom::DType::Int32)).sum().item<int32_t>();
    model.train();
    return static_cast<double>(right) / static_cast<double>(split.size());
  }

  // Model, optimizer, learning-rate schedule, the epochs done, loom's generator
  // and what the data order depends on, in one safetensors file (loom::save, replaced only once complete).
  // With ddp, rank 0 writes it and every rank returns once it is complete (dist::save).
  void save(const std::filesystem::path& path) const {
    loom::NamedTensors all;
    for (const auto& [name, t] : model.state_dict("model")) all.emplace_back(name, t);
    for (const auto& [name, t] : opt.state_dict()) all.emplace_back("optim." + name, t);
    for (const auto& [name, t] : schedule.state_dict()) all.emplace_back("schedule." + name, t);
    all.emplace_back("epoch", loom::Tensor::scalar(static_cast<double>(epoch), loom::DType::Int64));
    all.emplace_back("rng_state", loom::get_rng_state());
    all.emplace_back("data.order", loom::Tensor::from_vector<int64_t>(data_order(), {5}));
    if (ddp)
      loom::dist::save(path, all);
    else
      loom::save(path, all);
  }

  // Continues from a checkpoint `save` wrote for the same options (model, seed,
  // batch size, limit, epochs): the next epoch sees the batches, dropout masks and
  // optimizer state the uninterrupted run would have.
  void resume(const std::filesystem::path& path) {
    const auto all = loom::load(path);
    std::map<std::string, loom::Tensor> model_state, opt_state, schedule_state;
    for (const auto& [name, t] : all) {
      if (name.starts_with("model.")) model_state.emplace(name.substr(6), t);
      if (name.starts_with("optim.")) opt_state.emplace(name.substr(6), t);
      if (name.starts_with("schedule.")) schedule_state.emplace(name.substr(9), t);
    }
    const auto order = at(all, "data.order", path).to_vector<int64_t>();
    if (order != data_order()) {
      std::string written;
      for (const int64_t v : order) written += (written.empty() ? "" : ", ") + std::to_string(v);
      throw std::runtime_error("resume " + path.string() +
                               ": written with seed, batch size, limit, epochs, ranks = " + written +
                               "; pass the same options");
    }
    model.load_state_dict(model_state);  // strict: a checkpoint of the other model is an error
    opt.load_state_dict(opt_state);
    schedule.load_state_dict(schedule_state);
    loom::set_rng_state(at(all, "rng_state", path));
    epoch = at(all, "epoch", path).item<int64_t>();
    loader.set_epoch(epoch);
  }

  Options options;
  loom::nn::Sequential model;
  loom::optim::Adam opt;
  Split train;
  loom::data::DataLoader loader;
  loom::optim::CosineAnnealingLR schedule;
  std::optional<loom::dist::DataParallel> ddp;
  std::optional<loom::GradScaler> scaler;  // with --autocast f16
  int64_t epoch = 0;                       // epochs done

 private:
  // A scope of options.autocast; without one, a disabled scope (autocast off, as outside any).
  loom::Autocast autocast_scope() const {
    return loom::Autocast(options.autocast.value_or(loom::DType::BFloat16), options.autocast.has_value());
  }
  // What the batches, and the rate, depend on besides the epoch.
  std::vector<int64_t> data_order() const {
    return {static_cast<int64_t>(options.seed), options.batch_size, options.limit, options.epochs,
            options.ddp ? loom::dist::world_size() : 1};
  }
  static loom::data::Shard shard_of(const Options& o) {
    if (!o.ddp) return {};
    return {loom::dist::rank(), loom::dist::world_size()};
  }
  // The batch-norm statistics, which each rank gathered from its own shard,
  // averaged across the ranks at the end of an epoch: every rank then evaluates
  // and checkpoints the same model. (The parameters agree already; the integer
  // batch counts are alike on every rank.)
  void average_buffers() {
    std::vector<loom::Tensor> averaged;
    for (loom::Tensor b : model.buffers())
      if (b.dtype().is_float()) {
        b.assign(loom::dist::all_reduce(b, loom::dist::Op::Mean));
        averaged.push_back(b);
      }
    loom::realize(averaged);
  }
  static loom::nn::Sequential make_model(const Options& o) {
    loom::manual_seed(o.seed);
    if (o.model == "mlp") return mlp();
    if (o.model == "cnn") return cnn();
    throw std::invalid_argument("unknown model '" + o.model + "' (expected mlp or cnn)");
  }
  static const loom::Tensor& at(const std::map<std::string, loom::Tensor>& all, const std::string& name,
                                const std::filesystem::path& path) {
    const auto it = all.find(name);
    if (it == all.end()) throw std::runtime_error("resume " + path.string() + ": no '" + name + "' in it");
    return it->second;
  }
};

}  // namespace fashion
