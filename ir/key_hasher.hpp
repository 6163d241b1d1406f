#pragma once
// A 128-bit key hasher: words, text and UOp args in, two independently mixed
// 64-bit lanes out. The schedule cache keys graphs with it and the disk cache
// names and checks its files with it, where a collision must be out of reach.
// Not cryptographic: nothing here defends against a chosen collision.
#include "ir/uop.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace loom {

struct Key128 {
  uint64_t a = 0, b = 0;
  friend bool operator==(const Key128&, const Key128&) = default;
  std::string hex() const;  // 32 hex digits
};
struct Key128Hash {
  size_t operator()(const Key128& k) const {
    return static_cast<size_t>(k.a ^ (k.b * 0x9e3779b97f4a7c15ULL));
  }
};

class KeyHasher {
 public:
  explicit KeyHasher(Key128 seed = {0x6c6f6f6d, 0x6b6579}) : k_(seed) {}
  KeyHasher& word(uint64_t v);
  KeyHasher& text(std::string_view s);
  KeyHasher& arg(const Arg& a);
  // A symbolic size's expression, each bound variable keyed as its variable.
  KeyHasher& size_expr(const UOp& e);
  Key128 key() const { return k_; }

 private:
  Key128 k_;
};

}  // namespace loom
