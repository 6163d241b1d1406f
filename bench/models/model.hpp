#pragma once
// What the models of bench/models share: the switch that makes a model's
// `.contiguous()`-everywhere variant, the hand-written tanh GELU, and
// deterministic parameters and inputs that bench/peers/models.py reproduces
// bit for bit, so loom's first loss can be checked against PyTorch's.
//
// A model is a struct with
//   explicit Model(Layout layout);                 // parameters initialised by init_parameters
//   loom::NamedTensors named_parameters() const;   // the order of its PyTorch twin's
//   std::vector<loom::Tensor> batch() const;       // realized inputs: data and labels or targets
//   loom::Tensor loss(const std::vector<loom::Tensor>& batch) const;
//   std::unique_ptr<loom::optim::Optimizer> optimizer() const;
// or, for a step that is more than loss, backward and one optimizer's step (char_gpt:
// clipping, then two AdamW), the optimizers as members and
//   loom::Tensor train_step(const std::vector<loom::Tensor>& batch);  // returns the loss
//   static constexpr const char* name;             // the workload name bench/compare shows
// and is written once: its variant only differs by what `layout` does.
#include <loom/loom.hpp>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

namespace models {

// Wraps every layer's and activation's result: as written, or made contiguous
// (materialised in a buffer of its own) in the variant that the issue's "loom
// as written is within 1.15x of .contiguous() everywhere" compares against.
struct Layout {
  bool contiguous = false;
  loom::Tensor operator()(const loom::Tensor& t) const { return contiguous ? t.contiguous() : t; }
};

// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))): loom has no GELU op, so a
// user writes it as PyTorch's gelu(approximate="tanh") defines it.
inline loom::Tensor gelu_tanh(const loom::Tensor& x) {
  const double k = std::sqrt(2 / std::numbers::pi);
  return 0.5 * x * (1 + (k * (x + 0.044715 * x * x * x)).tanh());
}

// Uniform numbers in [0, 1) from a counter: splitmix64's finaliser of i + 1
// plus `stream` times the golden ratio. bench/peers/models.py computes the same
// with numpy's uint64 arithmetic.
inline std::vector<double> uniform_stream(int64_t n, uint64_t stream) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint64_t h = static_cast<uint64_t>(i) + 1 + stream * 0x9E3779B97F4A7C15ull;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
    out[static_cast<size_t>(i)] = static_cast<double>(h >> 11) * 0x1.0p-53;
  }
  return out;
}

// Float32 values uniform on [-bound, bound).
inline loom::Tensor uniform_tensor(loom::Shape shape, uint64_t stream, double bound) {
  int64_t n = 1;
  for (const int64_t s : shape) n *= s;
  std::vector<float> v;
  v.reserve(static_cast<size_t>(n));
  for (const double u : uniform_stream(n, stream)) v.push_back(static_cast<float>(bound * (2 * u - 1)));
  return loom::Tensor::from_vector(v, std::move(shape)).realize();
}

// Int32 labels uniform on [0, classes).
inline loom::Tensor label_tensor(loom::Shape shape, uint64_t stream, int64_t classes) {
  int64_t n = 1;
  for (const int64_t s : shape) n *= s;
  std::vector<int32_t> v;
  v.reserve(static_cast<size_t>(n));
  for (const double u : uniform_stream(n, stream))
    v.push_back(static_cast<int32_t>(u * static_cast<double>(classes)));
  return loom::Tensor::from_vector(v, std::move(shape)).realize();
}

// Replaces the k-th parameter by uniform_stream(k) on [-b, b], b = 1/sqrt(its
// last size) for a matrix and 0.05 for a vector; LayerNorm parameters (a name
// whose last module starts with "ln") keep their ones and zeros. The PyTorch
// twins list their parameters in the same order and apply the same rule.
inline void init_parameters(const loom::NamedTensors& params) {
  loom::NoGrad no_grad;
  uint64_t k = 0;
  for (auto [name, p] : params) {
    const uint64_t stream = k++;
    const std::string module = name.substr(0, name.rfind('.'));  // "blocks.0.ln1" of "blocks.0.ln1.weight"
    const std::string last =
        module.substr(module.rfind('.') == std::string::npos ? 0 : module.rfind('.') + 1);
    if (last.rfind("ln", 0) == 0) continue;
    const double bound = p.ndim() >= 2 ? 1 / std::sqrt(static_cast<double>(p.shape().back())) : 0.05;
    p.assign(uniform_tensor(p.shape(), stream, bound));
    p.realize();
  }
}

// Adds a layer's named parameters (already under its prefix) to a model's.
inline void append(loom::NamedTensors& all, const loom::NamedTensors& part) {
  all.insert(all.end(), part.begin(), part.end());
}

// The tensors of named parameters, in order: what an optimizer takes.
inline std::vector<loom::Tensor> tensors(const loom::NamedTensors& named) {
  std::vector<loom::Tensor> out;
  for (const auto& [name, t] : named) out.push_back(t);
  return out;
}

}  // namespace models
