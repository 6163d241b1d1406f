// F.pad: constant padding is the PAD movement op (a negative amount a shrink); reflect and
// replicate are concatenations of flipped or broadcast edge slices, all views, so a pad fuses
// into whatever reads it.
#include "src/tensor_ops.hpp"

#include <loom/nn_functional.hpp>

namespace loom::nn::functional {

using detail::str;

Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, std::string_view mode, double value) {
  const Shape& xs = detail::uop(x, "pad")->shape().value();
  if (pad.size() % 2 != 0 || pad.size() / 2 > xs.size())
    throw Error(
        fmt::format("pad: {} amounts given for input {}; expected (before, after) pairs for at most {} axes",
                    pad.size(), str(xs), xs.size()));
  if (mode != "constant" && mode != "reflect" && mode != "replicate")
    throw Error(fmt::format("pad: mode \"{}\" is not one of \"constant\", \"reflect\", \"replicate\"", mode));
  if (mode != "constant" && value != 0)
    throw Error(fmt::format("pad: a fill value ({}) is only for mode \"constant\", not \"{}\"", value, mode));
  Tensor y = x;
  for (size_t j = 0; j < pad.size() / 2; ++j) {
    const int a = static_cast<int>(xs.size() - 1 - j);
    const int64_t lo = pad[2 * j], hi = pad[2 * j + 1], n = y.shape()[a];
    if (mode == "constant") {
      if (n + lo + hi < 0)
        throw Error(
            fmt::format("pad: amounts ({}, {}) cut axis {} of input {} below size 0", lo, hi, a, str(xs)));
      std::vector<std::pair<int64_t, int64_t>> grow(xs.size(), {0, 0}), cut;
      grow[a] = {std::max<int64_t>(lo, 0), std::max<int64_t>(hi, 0)};
      const Tensor g = y.pad(grow, value);
      for (int64_t d : g.shape()) cut.emplace_back(0, d);
      cut[a] = {std::max<int64_t>(-lo, 0), g.shape()[a] - std::max<int64_t>(-hi, 0)};
      y = g.shrink(cut);
      continue;
    }
    if (lo < 0 || hi < 0)
      throw Error(fmt::format("pad: mode \"{}\" takes non-negative amounts, got ({}, {}) on axis {}", mode,
                              lo, hi, a));
    if (mode == "reflect" && (lo >= n || hi >= n))
      throw Error(
          fmt::format("pad: reflect amounts ({}, {}) must be smaller than axis {}'s size {} (input {})", lo,
                      hi, a, n, str(xs)));
    if (mode == "replicate" && n == 0 && (lo > 0 || hi > 0))
      throw Error(fmt::format("pad: replicate cannot pad axis {} of size 0 (input {})", a, str(xs)));
    std::vector<Tensor> parts;
    auto edge = [&](int64_t start, int64_t count) {  // replicate: one slice broadcast `count` times
      Shape s = y.shape();
      s[a] = count;
      return y.slice(a, start, start + 1).expand(s);
    };
    if (lo > 0) parts.push_back(mode == "reflect" ? y.slice(a, 1, lo + 1).flip(a) : edge(0, lo));
    parts.push_back(y);
    if (hi > 0) parts.push_back(mode == "reflect" ? y.slice(a, n - 1 - hi, n - 1).flip(a) : edge(n - 1, hi));
    y = parts.size() == 1 ? y : cat(parts, a);
  }
  return y;
}

}  // namespace loom::nn::functional
