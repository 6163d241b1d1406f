// The Fashion-MNIST example's checkpoints: a run interrupted after an epoch and
// resumed in a fresh trainer ends with
// the parameters, batch-norm statistics and Adam moments of the uninterrupted
// run, bit for bit. On a small subset whose last batch is dropped, with the CNN
// (dropout masks and batch-norm buffers are the state most easily lost).
// Skipped when dataset-fashion-mnist is not installed.
#include "fashion_mnist.hpp"

#include <doctest/doctest.h>

#include <unistd.h>
#include <cstring>

using namespace loom;

namespace {

// Every tensor of the model and the optimizer, by name, as raw bytes.
std::map<std::string, std::vector<float>> state_of(const fashion::Trainer& t) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, v] : t.model.state_dict("model"))
    out[name] = v.cast(DType::Float32).to_vector<float>();  // num_batches_tracked: small integers, exact
  for (const auto& [name, v] : t.opt.state_dict())
    out["optim." + name] = v.cast(DType::Float32).to_vector<float>();
  return out;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE(
    "fashion_mnist: a run resumed from the checkpoint after epoch 1 equals the uninterrupted run bit for "
    "bit") {
  if (!fashion::installed()) {
    MESSAGE("dataset-fashion-mnist is not installed: skipped");
    return;
  }
  fashion::Options o;
  o.model = "cnn";
  o.batch_size = 16;
  o.limit = 40;  // 2 batches an epoch, 8 images dropped
  o.seed = 5;
  o.epochs = 2;
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("loom_fashion_resume_" + std::to_string(getpid()) + ".safetensors");

  fashion::Trainer whole(o);
  whole.train_epoch();
  const auto after_1 = state_of(whole);
  whole.train_epoch();
  const auto expected = state_of(whole);

  {
    fashion::Trainer first(o);
    first.train_epoch();
    first.save(path);
    CHECK(bitwise_equal(state_of(first).at("model.0.weight"), after_1.at("model.0.weight")));  // seeded
  }
  // A fresh trainer: initial weights, zero moments, the generator where
  // initialisation left it, the loader at epoch 0; resume replaces them all.
  fashion::Trainer resumed(o);
  resumed.resume(path);
  CHECK(resumed.epoch == 1);
  resumed.train_epoch();
  const auto got = state_of(resumed);
  std::filesystem::remove(path);

  REQUIRE(got.size() == expected.size());
  for (const auto& [name, values] : expected) {
    INFO(name);
    CHECK(bitwise_equal(got.at(name), values));
  }
  // The second epoch changed the weights (the comparison compares something).
  CHECK_FALSE(bitwise_equal(expected.at("model.0.weight"), after_1.at("model.0.weight")));
  CHECK(expected.at("model.1.running_mean") != after_1.at("model.1.running_mean"));
}

TEST_CASE("fashion_mnist: resume rejects a checkpoint written with other data options") {
  if (!fashion::installed()) return;
  fashion::Options o;
  o.model = "mlp";
  o.limit = 128;
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("loom_fashion_options_" + std::to_string(getpid()) + ".safetensors");
  fashion::Trainer t(o);
  t.save(path);
  fashion::Options bigger = o;
  bigger.batch_size = 32;
  fashion::Trainer u(bigger);
  CHECK_THROWS_WITH(
      u.resume(path),
      doctest::Contains("written with seed, batch size, limit, epochs, ranks = 0, 64, 128, 1, 1"));
  fashion::Options cnn = o;
  cnn.model = "cnn";
  fashion::Trainer v(cnn);
  CHECK_THROWS_AS(v.resume(path), loom::Error);  // the MLP's weights do not fit the CNN (strict keys)
  std::filesystem::remove(path);
}
