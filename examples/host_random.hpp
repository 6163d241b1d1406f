#pragma once
// Host-side random numbers for the examples' data sets: plain mt19937_64 bits
// and Box-Muller, so every platform draws the same data (the standard
// library's distributions differ between implementations).
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace examples {

class HostRandom {
 public:
  explicit HostRandom(uint64_t seed) : gen_(seed) {}
  double uniform() { return static_cast<double>(gen_() >> 11) * 0x1p-53; }  // [0, 1)
  double normal() {
    const double u = 1 - uniform(), v = uniform();  // u in (0, 1]
    return std::sqrt(-2 * std::log(u)) * std::cos(2 * std::numbers::pi * v);
  }

 private:
  std::mt19937_64 gen_;
};

}  // namespace examples
