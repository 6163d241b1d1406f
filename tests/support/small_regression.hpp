#pragma once
// The small training problem the mixed-precision tests (test_autocast, test_grad_scaler) run
// in Float32 and in a lower precision: a 4-16-1 ReLU MLP regressing sin(sum(x) / 2) on 64
// random points, its weights and data drawn after manual_seed(seed), trained by SGD at 0.1.
#include <loom/loom.hpp>

#include <cstdint>
#include <vector>

namespace loom::testing {

// Seeds the generator before SmallRegression's members draw from it.
struct Seeded {
  explicit Seeded(uint64_t seed) { manual_seed(seed); }
};

struct SmallRegression : private Seeded {
  explicit SmallRegression(uint64_t seed)
      : Seeded(seed),
        fc1(4, 16),
        fc2(16, 1),
        x(Tensor::randn({64, 4}).realize()),
        y((x.sum(1, true) * 0.5).sin().realize()) {}

  std::vector<Tensor> parameters() {
    std::vector<Tensor> out = fc1.parameters();
    for (const Tensor& p : fc2.parameters()) out.push_back(p);
    return out;
  }
  Tensor loss() const { return nn::mse(fc2.forward(fc1.forward(x).relu()), y); }

  nn::Linear fc1, fc2;
  Tensor x, y;
};

}  // namespace loom::testing
