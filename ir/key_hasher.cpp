#include "ir/key_hasher.hpp"

#include <fmt/format.h>

#include <bit>

namespace loom {

namespace {
// Two different 64-bit finalisers (MurmurHash3's and splitmix64's), so the lanes
// do not collide together.
uint64_t mix_a(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}
uint64_t mix_b(uint64_t h) {
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}
}  // namespace

KeyHasher& KeyHasher::word(uint64_t v) {
  k_.a = mix_a(k_.a ^ v) + 0x9e3779b97f4a7c15ULL;
  k_.b = mix_b(std::rotl(k_.b, 23) + v * 0xd6e8feb86659fd93ULL);
  return *this;
}

KeyHasher& KeyHasher::text(std::string_view s) {
  word(s.size());
  uint64_t chunk = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    chunk = (chunk << 8) | static_cast<unsigned char>(s[i]);
    if (i % 8 == 7) {
      word(chunk);
      chunk = 0;
    }
  }
  return word(chunk);
}

KeyHasher& KeyHasher::arg(const Arg& a) {
  word(a.index());
  std::visit(
      [this](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          word(static_cast<uint64_t>(v));
        } else if constexpr (std::is_same_v<T, double>) {
          word(std::bit_cast<uint64_t>(v));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          word(v.size());
          for (int64_t x : v) word(static_cast<uint64_t>(x));
        } else if constexpr (std::is_same_v<T, std::string>) {
          text(v);
        } else if constexpr (std::is_same_v<T, AxisArg>) {
          word(static_cast<uint64_t>(v.id)).word(static_cast<uint64_t>(v.kind));
        } else if constexpr (std::is_same_v<T, VarArg>) {
          text(v.name).word(static_cast<uint64_t>(v.min)).word(static_cast<uint64_t>(v.max));
        } else if constexpr (std::is_same_v<T, ReduceArg>) {
          word(static_cast<uint64_t>(v.op)).word(v.axes.size());
          for (int64_t x : v.axes) word(static_cast<uint64_t>(x));
        } else if constexpr (std::is_same_v<T, Shape>) {
          word(v.size());
          for (const Dim& d : v)
            d.is_symbolic() ? size_expr(*d.expr()) : word(static_cast<uint64_t>(d.value()));
        } else {
          static_assert(std::is_same_v<T, std::monostate>, "every kind of Arg is keyed");
        }
      },
      a);
  return *this;
}

// A symbolic size by its structure, a bound variable as the variable: the key is the
// same for every binding, so one plan serves them all.
KeyHasher& KeyHasher::size_expr(const UOp& e) {
  if (e.op == Op::BIND) return size_expr(*e.src[0]);
  word(0x51ce + static_cast<uint64_t>(e.op));
  if (e.op == Op::DEFINE_VAR) return arg(e.arg);
  if (e.op == Op::CONST) return word(static_cast<uint64_t>(e.const_int()));
  word(e.src.size());
  for (const auto& s : e.src) size_expr(*s);
  return *this;
}

std::string Key128::hex() const { return fmt::format("{:016x}{:016x}", a, b); }

}  // namespace loom
