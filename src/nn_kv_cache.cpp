// nn::KVCache: decoding's key/value cache, appended by a write through a slice.
#include "src/nn_common.hpp"

#include <loom/nn.hpp>

namespace loom::nn {

KVCache::KVCache(int64_t batch, int64_t heads, int64_t max_len, int64_t head_dim, DType dtype)
    : max_len_(max_len), length_("T", 1, std::max<int64_t>(max_len, 1)) {
  if (batch < 1 || heads < 1 || max_len < 1 || head_dim < 1)
    throw Error(fmt::format("KVCache: batch {}, heads {}, max_len {} and head_dim {} must all be positive",
                            batch, heads, max_len, head_dim));
  keys_ = Tensor::zeros({batch, heads, max_len, head_dim}, dtype).realize();
  values_ = Tensor::zeros({batch, heads, max_len, head_dim}, dtype).realize();
}

std::pair<Tensor, Tensor> KVCache::update(const Tensor& k, const Tensor& v) {
  const Shape& cached = keys_.shape();
  const auto check = [&](const Tensor& t, const char* which) {
    if (!t.defined()) throw Error(fmt::format("KVCache::update: {} is undefined", which));
    const Shape& s = t.shape();
    const bool fits = s.size() == 4 && s[0] == cached[0] && s[1] == cached[1] && s[3] == cached[3] &&
                      !s[2].is_symbolic() && s[2] >= 1;
    if (!fits || t.dtype() != keys_.dtype())
      throw Error(
          fmt::format("KVCache::update: {} has shape {} and dtype {}; expected [{}, {}, n, {}] with n >= 1 "
                      "and dtype {}",
                      which, str(s), scalar_name(t.dtype().scalar), cached[0], cached[1], cached[3],
                      scalar_name(keys_.dtype().scalar)));
  };
  check(k, "k");
  check(v, "v");
  const int64_t n = k.shape()[2].value();
  if (v.shape()[2] != n)
    throw Error(fmt::format("KVCache::update: k has {} tokens but v has {}", n, v.shape()[2]));
  if (size_ + n > max_len_)
    throw Error(
        fmt::format("KVCache::update: the cache holds {} of its max_len {} tokens; {} more do not fit", size_,
                    max_len_, n));
  // One token: its position is T - 1 for T the variable bound to the new count, so every
  // position shares a schedule. Several: numbers (T - n could be negative for small T).
  const Dim end = n == 1 ? length_.bind(size_ + 1) : Dim(size_ + n);
  keys_.slice(2, end - n, end).assign(k);
  values_.slice(2, end - n, end).assign(v);
  size_ += n;
  return {keys_.slice(2, 0, end), values_.slice(2, 0, end)};
}

void KVCache::crop(int64_t length) {
  if (length < 0 || length > size_)
    throw Error(
        fmt::format("KVCache::crop: length {} is outside [0, {}] (the tokens cached)", length, size_));
  size_ = length;
}

}  // namespace loom::nn
