#include "src/graph_key.hpp"

#include <unordered_map>

namespace loom::detail {

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
