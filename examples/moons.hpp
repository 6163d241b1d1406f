#pragma once
// The two-moons data set and the MLP the moons example trains; its tests
// train the same model on the same data.
#include "host_random.hpp"

#include <loom/loom.hpp>

#include <cmath>
#include <numbers>
#include <vector>

namespace moons {

struct Data {
  std::vector<float> points;    // n x 2, row-major
  std::vector<int32_t> labels;  // 0: the upper moon, 1: the lower one
  loom::Tensor x() const {
    return loom::Tensor::from_vector(points, {static_cast<int64_t>(labels.size()), 2});
  }
  loom::Tensor y() const { return loom::Tensor::from_vector(labels, {static_cast<int64_t>(labels.size())}); }
};

// scikit-learn's make_moons with random angles: n/2 points at angles uniform on
// [0, pi] of the unit circle (label 0) and the rest on the circle mirrored and
// shifted by (1, 0.5) (label 1), each coordinate plus N(0, noise^2).
inline Data make_moons(int n, double noise, uint64_t seed) {
  examples::HostRandom rng(seed);
  Data d;
  const int outer = n / 2;
  for (int i = 0; i < n; ++i) {
    const double t = rng.uniform() * std::numbers::pi;
    const bool upper = i < outer;
    const double px = upper ? std::cos(t) : 1 - std::cos(t), py = upper ? std::sin(t) : 0.5 - std::sin(t);
    d.points.push_back(static_cast<float>(px + noise * rng.normal()));
    d.points.push_back(static_cast<float>(py + noise * rng.normal()));
    d.labels.push_back(upper ? 0 : 1);
  }
  return d;
}

// 2 -> 16 -> 16 -> 2, ReLU between the layers, logits out.
struct MLP {
  loom::nn::Linear fc1{2, 16}, fc2{16, 16}, fc3{16, 2};
  loom::Tensor operator()(const loom::Tensor& x) const { return fc3(fc2(fc1(x).relu()).relu()); }
  loom::NamedTensors named_parameters() const {
    loom::NamedTensors all;
    for (const auto& part :
         {fc1.named_parameters("fc1"), fc2.named_parameters("fc2"), fc3.named_parameters("fc3")})
      all.insert(all.end(), part.begin(), part.end());
    return all;
  }
  std::vector<loom::Tensor> parameters() const {
    std::vector<loom::Tensor> all;
    for (auto& [name, p] : named_parameters()) all.push_back(p);
    return all;
  }
};

// One full-batch training step (forward, cross-entropy, backward, update),
// captured: from the third call on it replays the recorded kernels and builds
// no graph (docs/api.md, "Capture"). Its one result is the step's loss.
inline loom::Capture training_step(const MLP& model, loom::optim::Optimizer& opt) {
  return loom::Capture([&model, &opt](const std::vector<loom::Tensor>& batch) {
    opt.zero_grad();
    loom::Tensor loss = loom::nn::cross_entropy(model(batch[0]), batch[1]);
    loss.backward();
    opt.step();  // realizes the loss with the parameters
    return std::vector<loom::Tensor>{loss};
  });
}

// The fraction of points whose largest logit is their label.
inline double accuracy(const MLP& model, const Data& data) {
  loom::NoGrad no_grad;
  const auto predicted = model(data.x()).argmax(1).to_vector<int32_t>();
  int right = 0;
  for (size_t i = 0; i < predicted.size(); ++i) right += predicted[i] == data.labels[i];
  return static_cast<double>(right) / static_cast<double>(predicted.size());
}

}  // namespace moons
