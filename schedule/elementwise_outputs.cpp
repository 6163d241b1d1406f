#include "schedule/elementwise_outputs.hpp"

#include "ir/buffer_access.hpp"
#include "schedule/stage.hpp"

#include <algorithm>
#include <iterator>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace loom {

namespace {

using Subs = std::vector<std::pair<UOpPtr, UOpPtr>>;

// One BUFFERIZE of the graph: what it reads, and whether it may join a kernel here.
struct Node {
  UOpPtr buf;
  std::vector<int64_t> extents;            // its ranges' (candidates only)
  bool candidate = false;                  // elementwise, own ranges of constant extent, no valid
  bool root = false;                       // a root of the graph: stored whatever its readers do
  std::unordered_map<size_t, bool> reads;  // BUFFERIZE read -> every read at this node's own element
  std::vector<size_t> readers;             // the BUFFERIZEs reading it
};

// Whether `index` reads element (r0, r1, ...) of its BUFFERIZE at `reader`'s ranges in order.
bool same_element(const UOpPtr& index, const UOpPtr& reader) {
  const UOpPtr& source = index->src[0];
  const size_t n = source->get<Shape>().size();
  if (n + 1 != reader->src.size() || index->src.size() != n + 1) return false;  // a valid, or other ranks
  for (size_t i = 1; i <= n; ++i)
    if (index->src[i] != reader->src[i]) return false;
  return true;
}

struct Graph {
  std::vector<Node> nodes;  // BUFFERIZEs in toposort order
  std::unordered_map<const UOp*, size_t> index;
  std::vector<size_t> parent;                // union-find over nodes: the kernel each joins
  std::vector<std::vector<size_t>> members;  // per root of the union-find, its nodes in order
  std::vector<std::vector<size_t>> mates;    // per node, the others listing one of its ranges: one kernel
  // Per node: it, or a node reading it through any chain, shares its kernel with another
  // node (mates, or a group joined here): the only way a chain can turn back to earlier nodes.
  std::vector<char> toward_company;

  explicit Graph(const UOpPtr& sink) {
    std::unordered_map<const UOp*, int> listed, bodies;  // RANGE -> BUFFERIZEs listing it, reaching it
    for (const auto& u : toposort(sink))
      if (u->op == Op::BUFFERIZE) {
        index.emplace(u.get(), nodes.size());
        nodes.push_back({u, {}, false, false, {}, {}});
        for (size_t i = 1; i < u->src.size(); ++i) ++listed[u->src[i].get()];
      }
    std::vector<std::vector<UOpPtr>> own(nodes.size());
    for (size_t k = 0; k < nodes.size(); ++k) {
      std::unordered_set<const UOp*> seen;
      for (const auto& src : nodes[k].buf->src)
        for (const auto& u : own_nodes(src)) {
          if (u->op == Op::RANGE && seen.insert(u.get()).second) ++bodies[u.get()];
          if (src == nodes[k].buf->src[0]) own[k].push_back(u);
        }
    }
    for (size_t k = 0; k < nodes.size(); ++k) {
      Node& x = nodes[k];
      const size_t n = x.buf->get<Shape>().size();
      bool ok = n > 0 && x.buf->src.size() == n + 1;
      for (size_t i = 1; ok && i <= n; ++i) {
        const UOpPtr& r = x.buf->src[i];
        ok = trip(r).value_or(0) > 0 && listed[r.get()] == 1 && bodies[r.get()] == 1;
        if (ok) x.extents.push_back(*trip(r));
      }
      for (const auto& u : own[k]) {
        if (u->op == Op::REDUCE) ok = false;
        if (u->op == Op::INDEX && u->src[0]->op == Op::BUFFERIZE) {
          const auto [it, fresh] = x.reads.try_emplace(index.at(u->src[0].get()), true);
          it->second = it->second && same_element(u, x.buf);
        }
      }
      // A BUFFERIZE met other than through an INDEX: read, at no element this stage knows.
      for (const auto& u : own[k])
        if (u->op == Op::BUFFERIZE && u != x.buf) x.reads.try_emplace(index.at(u.get()), false);
      x.candidate = ok;
      for (const auto& [y, same] : x.reads) nodes[y].readers.push_back(k);
    }
    std::unordered_map<const UOp*, std::vector<size_t>> listing;  // RANGE -> the BUFFERIZEs listing it
    for (size_t k = 0; k < nodes.size(); ++k)
      for (size_t i = 1; i < nodes[k].buf->src.size(); ++i)
        if (nodes[k].buf->src[i]->op == Op::RANGE) listing[nodes[k].buf->src[i].get()].push_back(k);
    mates.resize(nodes.size());
    for (const auto& [range, listers] : listing)
      for (size_t a : listers)
        for (size_t b : listers)
          if (a != b) mates[a].push_back(b);
    for (const auto& r : sink->src)
      if (const auto it = index.find(r.get()); it != index.end()) nodes[it->second].root = true;
    parent.resize(nodes.size());
    std::iota(parent.begin(), parent.end(), size_t{0});
    for (size_t k = 0; k < nodes.size(); ++k) members.push_back({k});
    toward_company.assign(nodes.size(), 0);
    for (size_t k = nodes.size(); k-- > 0;) {  // readers come later in toposort order
      toward_company[k] = !mates[k].empty();
      for (size_t r : nodes[k].readers) toward_company[k] |= toward_company[r];
    }
  }

  // `k` now shares its kernel: it and every node it is read from, through any chain, lead there.
  void lead_to_company(size_t k) {
    std::vector<size_t> stack{k};
    while (!stack.empty()) {
      const size_t n = stack.back();
      stack.pop_back();
      if (toward_company[n]) continue;
      toward_company[n] = 1;
      for (const auto& [producer, same] : nodes[n].reads) stack.push_back(producer);
    }
  }

  void join(size_t y, size_t x) {
    const size_t gy = find(y), gx = find(x);
    parent[gy] = gx;
    std::vector<size_t> all;
    std::merge(members[gy].begin(), members[gy].end(), members[gx].begin(), members[gx].end(),
               std::back_inserter(all));
    members[gx] = std::move(all);
    members[gy].clear();
    for (size_t m : members[gx]) lead_to_company(m);
  }

  size_t find(size_t k) {
    while (parent[k] != k) k = parent[k] = parent[parent[k]];
    return k;
  }

  // Whether the kernels of producer `y` and reader `x` may become one: every read
  // between their members is of the same element, and no chain of kernels leads
  // from one to the other through a kernel outside both.
  bool may_join(size_t y, size_t x) {
    const size_t gy = find(y), gx = find(x);
    if (gy == gx || nodes[y].extents != nodes[x].extents) return false;
    std::vector<size_t> both;
    std::merge(members[gy].begin(), members[gy].end(), members[gx].begin(), members[gx].end(),
               std::back_inserter(both));
    const auto inside = [&](size_t k) {
      const size_t g = find(k);
      return g == gy || g == gx;
    };
    for (size_t a : both)
      for (const auto& [b, same] : nodes[a].reads)
        if (inside(b) && !same) return false;
    // Kernels are in toposort order: a chain back into the pair ends before its last
    // member. A kernel of several BUFFERIZEs (joined here, or sharing ranges from
    // multi_output) is one step of a chain, its members' readers all its readers, and
    // any of them may come after the pair's last while another comes before: a chain
    // past the last member turns back only through such a kernel, so it is followed
    // only where it leads to one (toward_company).
    const size_t last = both.back();
    std::vector<char> seen(nodes.size(), 0);
    std::vector<size_t> stack;
    const auto enter = [&](size_t k) {
      if ((k < last || toward_company[k]) && !seen[k]++) stack.push_back(k);
    };
    for (size_t a : both)
      for (size_t r : nodes[a].readers)
        if (!inside(r)) enter(r);
    while (!stack.empty()) {
      const size_t k = stack.back();
      stack.pop_back();
      for (size_t m : mates[k]) enter(m);
      for (size_t m : members[find(k)]) enter(m);
      for (size_t r : nodes[k].readers) {
        if (inside(r)) return false;
        enter(r);
      }
    }
    return true;
  }
};

// The value a BUFFERIZE stores: its source without the realization marker.
UOpPtr stored_value(const UOpPtr& buf) {
  const UOpPtr& v = buf->src[0];
  return v->op == Op::CONTIGUOUS ? v->src[0] : v;
}

UOpPtr join_elementwise(const Match& m) {
  const UOpPtr& sink = m.root();
  Graph g(sink);
  bool joined = false;
  for (size_t x = 0; x < g.nodes.size(); ++x) {
    if (!g.nodes[x].candidate) continue;
    for (const auto& [y, same] : g.nodes[x].reads)
      if (same && g.nodes[y].candidate && g.nodes[y].root && g.may_join(y, x)) {
        g.join(y, x);
        joined = true;
      }
  }
  // Siblings: elementwise buffers reading one buffer at their own element share a kernel
  // (the buffer loaded once, one launch), whatever computed it.
  for (size_t y = 0; y < g.nodes.size(); ++y) {
    std::optional<size_t> first;
    for (size_t x : g.nodes[y].readers) {
      if (!g.nodes[x].candidate || !g.nodes[x].reads.at(y)) continue;
      if (!first)
        first = x;
      else if (g.may_join(*first, x)) {
        g.join(*first, x);
        joined = true;
      }
    }
  }
  if (!joined) return nullptr;
  // Each group takes the ranges of its first member (in toposort order).
  std::unordered_map<const UOp*, UOpPtr> done;
  std::unordered_map<const UOp*, size_t> group_of_new;  // a rebuilt member -> its group
  for (const auto& n : toposort(sink)) {
    std::vector<UOpPtr> src;
    bool changed = false;
    for (const auto& s : n->src) {
      src.push_back(done.at(s.get()));
      changed |= src.back() != s;
    }
    UOpPtr u = changed ? n->with_src(std::move(src)) : n;
    if (n->op == Op::BUFFERIZE) {
      const size_t k = g.index.at(n.get()), grp = g.find(k);
      if (g.members[grp].size() > 1) {
        const UOpPtr& rep = g.nodes[g.members[grp].front()].buf;
        Subs subs;
        for (size_t i = 1; i < n->src.size(); ++i)
          if (n->src[i] != rep->src[i]) subs.emplace_back(n->src[i], rep->src[i]);
        std::vector<UOpPtr> moved;
        for (const auto& s : u->src)
          moved.push_back(subs.empty() ? s : substitute_within(s, subs, Op::BUFFERIZE));
        // Its reads of the group's earlier members are their values.
        Subs values;
        for (const auto& l : own_nodes(moved[0]))
          if (l->op == Op::LOAD && l->src.size() == 1 && l->src[0]->op == Op::INDEX) {
            const UOpPtr& at = l->src[0];
            const auto it = group_of_new.find(at->src[0].get());
            if (it != group_of_new.end() && it->second == grp && same_element(at, rep))
              values.emplace_back(l, stored_value(at->src[0]));
          }
        if (!values.empty()) moved[0] = substitute_within(moved[0], values, Op::BUFFERIZE);
        u = u->with_src(std::move(moved));
        group_of_new.emplace(u.get(), grp);
      }
    }
    done[n.get()] = std::move(u);
  }
  return done.at(sink.get());
}

}  // namespace

const PatternMatcher& elementwise_outputs() {
  static const PatternMatcher pm("elementwise_outputs", {{UPat::ops({Op::SINK}), join_elementwise}});
  return pm;
}

}  // namespace loom
