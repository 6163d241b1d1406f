#include "src/graph_key.hpp"

namespace loom::detail {

int64_t GraphSignature::position_of(const UOp* buffer) const {
  for (size_t p = 0; p < input.size(); ++p)
    if (nodes[input[p]].get() == buffer) return static_cast<int64_t>(p);
  return -1;
}

GraphKey GraphSignature::key_of(const std::vector<UOpPtr>& targets) const {
  KeyHasher root;
  for (const auto& t : targets) {
    const GraphKey& tk = node_keys[index.find(t.get())];
    root.word(tk.a).word(tk.b);
  }
  return root.word(targets.size()).key();
}

GraphSignature sign_graph(const std::vector<UOpPtr>& targets) {
  GraphSignature sig;
  sig.nodes = toposort(targets, sig.index);
  sig.node_keys.resize(sig.nodes.size());
  for (uint32_t i = 0; i < sig.nodes.size(); ++i) {
    const UOp& n = *sig.nodes[i];
    if (n.op == Op::BIND) {  // a size read as a value (a mean's count): keyed as its variable
      sig.node_keys[i] = sig.node_keys[sig.index.find(n.src[0].get())];
      if (!sig.symbolic) sig.symbolic = &n;
      continue;
    }
    KeyHasher h;
    h.word(static_cast<uint64_t>(n.op)).word(static_cast<uint64_t>(n.dtype.scalar));
    h.word(n.dtype.lanes * 2u + (n.dtype.ptr ? 1u : 0u));
    if (n.op == Op::BUFFER) {  // its position and size stand for its id
      h.word(sig.input.size()).word(static_cast<uint64_t>(n.get<std::vector<int64_t>>().at(1)));
      sig.input.push_back(i);
    } else {
      h.arg(n.arg);
      if (const Shape* sizes = std::get_if<Shape>(&n.arg); sizes && !sig.symbolic && is_symbolic(*sizes))
        sig.symbolic = &n;
    }
    for (const auto& s : n.src) {
      const GraphKey& sk = sig.node_keys[sig.index.find(s.get())];
      h.word(sk.a).word(sk.b);
    }
    sig.node_keys[i] = h.word(n.src.size()).key();
  }
  sig.key = sig.key_of(targets);
  return sig;
}

}  // namespace loom::detail
