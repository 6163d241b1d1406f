#include "src/graph_key.hpp"

#include <bit>
#include <unordered_map>

namespace loom::detail {

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
        }
      },
      a);
  return *this;
}

int64_t GraphSignature::position_of(const UOp* buffer) const {
  for (size_t p = 0; p < input.size(); ++p)
    if (nodes[input[p]].get() == buffer) return static_cast<int64_t>(p);
  return -1;
}

GraphSignature sign_graph(const std::vector<UOpPtr>& targets) {
  GraphSignature sig;
  sig.nodes = toposort(targets);
  std::unordered_map<const UOp*, uint32_t> index;
  index.reserve(sig.nodes.size());
  std::vector<GraphKey> keys(sig.nodes.size());
  for (uint32_t i = 0; i < sig.nodes.size(); ++i) {
    const UOp& n = *sig.nodes[i];
    index.emplace(&n, i);
    KeyHasher h;
    h.word(static_cast<uint64_t>(n.op)).word(static_cast<uint64_t>(n.dtype.scalar));
    h.word(n.dtype.lanes * 2u + (n.dtype.ptr ? 1u : 0u));
    if (n.op == Op::BUFFER) {  // its position and size stand for its id
      h.word(sig.input.size()).word(static_cast<uint64_t>(n.get<std::vector<int64_t>>().at(1)));
      sig.input.push_back(i);
    } else {
      h.arg(n.arg);
    }
    for (const auto& s : n.src) {
      const GraphKey& sk = keys[index.at(s.get())];
      h.word(sk.a).word(sk.b);
    }
    keys[i] = h.word(n.src.size()).key();
  }
  KeyHasher root;
  for (const auto& t : targets) {
    const GraphKey& tk = keys[index.at(t.get())];
    root.word(tk.a).word(tk.b);
  }
  sig.key = root.word(targets.size()).key();
  return sig;
}

}  // namespace loom::detail
