#include "ir/contraction.hpp"

#include "ir/buffer_access.hpp"

#include <algorithm>
#include <cstdlib>

namespace loom {

namespace {

bool is_read(const UOpPtr& u) {
  if (u->op != Op::INDEX) return false;
  const Op buffer = u->src.at(0)->op;
  return buffer == Op::BUFFER || buffer == Op::BUFFERIZE || buffer == Op::DEFINE_GLOBAL;
}

ContractionRead read_of(const UOpPtr& index) { return {index, nullptr, index->dtype.itemsize()}; }

}  // namespace

bool Contraction::uses(const ContractionRead& read, const UOpPtr& range) const {
  return walk ? reaches(read.access, range) : read.access->ranges().contains(range.get());
}

bool Contraction::uses(int f, const UOpPtr& range) const {
  const auto& l = loads[static_cast<size_t>(f)];
  return std::any_of(l.begin(), l.end(), [&](const ContractionRead& r) { return uses(r, range); });
}

std::optional<int64_t> Contraction::stride(const ContractionRead& read, const UOpPtr& range) {
  return read.address ? linear_stride(read.address, range) : address_stride(read.access, range);
}

bool Contraction::strided(int f, const UOpPtr& range) const {
  const auto& l = loads[static_cast<size_t>(f)];
  return std::all_of(l.begin(), l.end(),
                     [&](const ContractionRead& r) { return stride(r, range).has_value(); });
}

bool Contraction::contiguous(int f, const UOpPtr& range) const {
  if (store && address_stride(store, range) != 1) return false;
  const auto& l = loads[static_cast<size_t>(f)];
  return std::all_of(l.begin(), l.end(), [&](const ContractionRead& r) { return stride(r, range) == 1; });
}

std::vector<UOpPtr> Contraction::only(int f) const {
  std::vector<UOpPtr> out;
  for (const auto& r : outs)
    if (uses(f, r) && !uses(1 - f, r)) out.push_back(r);
  return out;
}

std::vector<UOpPtr> Contraction::both() const {
  std::vector<UOpPtr> out;
  for (const auto& r : outs)
    if (uses(0, r) && uses(1, r)) out.push_back(r);
  return out;
}

bool Contraction::broadcast_both() const {
  bool a_only = false, b_only = false;
  for (const auto* ranges : {&outs, &k})
    for (const auto& r : *ranges) {
      const bool a = uses(0, r), b = uses(1, r);
      a_only |= a && !b, b_only |= b && !a;
    }
  return a_only && b_only;
}

std::optional<int64_t> Contraction::sum_length() const {
  int64_t n = 1;
  for (const auto& r : k) {
    const auto t = trip(r);
    if (!t) return std::nullopt;
    n *= *t;
  }
  return n;
}

bool is_pick(const UOpPtr& u) {
  return u->op == Op::WHERE && u->dtype.is_float() && !u->src.at(1)->is_const() && !u->src.at(2)->is_const();
}

bool picks_by(const UOpPtr& value, const UOpPtr& range) {
  const auto nodes = own_nodes(value);
  return std::any_of(nodes.begin(), nodes.end(),
                     [&](const UOpPtr& u) { return is_pick(u) && reaches(u->src.at(0), range); });
}

bool Contraction::selects(int f, const UOpPtr& range) const {
  const UOpPtr& value = factor[static_cast<size_t>(f)];
  return value && picks_by(value, range);
}

bool Contraction::reads_all_outputs() const {
  if (outs.size() < 2) return false;
  return std::any_of(reads.begin(), reads.end(), [&](const ContractionRead& read) {
    return std::all_of(outs.begin(), outs.end(), [&](const UOpPtr& r) { return uses(read, r); });
  });
}

std::vector<Contraction::Window> Contraction::windows() const {
  std::vector<Window> out;
  for (const auto& side : loads)
    for (const ContractionRead& read : side)
      for (const auto& o : outs)
        for (const auto& kk : k) {
          const auto so = stride(read, o), sk = stride(read, kk);
          const auto eo = trip(o), ek = trip(kk);
          if (!so || !sk || *so == 0 || *sk == 0 || !eo || !ek) continue;
          // The range of the smaller step spans more than the larger step: overlap.
          const bool o_small = std::abs(*so) <= std::abs(*sk);
          const int64_t small = std::abs(o_small ? *so : *sk), large = std::abs(o_small ? *sk : *so);
          const int64_t extent = o_small ? *eo : *ek;
          if (large % small != 0 || extent * small <= large) continue;
          const bool seen = std::any_of(out.begin(), out.end(),
                                        [&](const Window& w) { return w.out == o && w.reduce == kk; });
          if (!seen) out.push_back({o, kk});
        }
  return out;
}

std::optional<Contraction> contraction(const UOpPtr& value, std::vector<UOpPtr> outs, const UOpPtr& store,
                                       bool walk) {
  const std::vector<UOpPtr> nodes = own_nodes(value);
  UOpPtr red;
  for (const auto& u : nodes) {
    if (u->op != Op::REDUCE) continue;
    if (red) return std::nullopt;  // one sum only
    red = u;
  }
  if (!red || red->src.size() < 2 || red->get<ReduceArg>().op != Op::ADD || !red->dtype.is_float() ||
      red->dtype.lanes != 1)
    return std::nullopt;
  Contraction c;
  c.reduce = red;
  c.outs = std::move(outs);
  c.k.assign(red->src.begin() + 1, red->src.end());
  c.store = store;
  c.walk = walk;
  const UOpPtr& body = red->src[0];
  if (body->op == Op::MUL && body->src.size() == 2)
    c.factor = {body->src[0], body->src[1]};
  else
    c.factor = {nullptr, body};
  for (size_t f = 0; f < 2; ++f) {
    if (!c.factor[f]) continue;
    for (const auto& u : own_nodes(c.factor[f])) {
      if (is_read(u)) c.loads[f].push_back(read_of(u));
      c.ops[f] += is_alu(u->op) && u->dtype.is_float();
      c.nested[f] = c.nested[f] || u->op == Op::REDUCE;
    }
  }
  // A STORE's own INDEX is where it writes, not a read.
  const UOpPtr written = value->op == Op::STORE ? value->src.at(0) : nullptr;
  for (const auto& u : nodes)
    if (is_read(u) && u != written) c.reads.push_back(read_of(u));
  return c;
}

Contraction contraction_of_addresses(const std::array<UOpPtr, 2>& address,
                                     const std::array<int64_t, 2>& itemsize, std::vector<UOpPtr> outs,
                                     std::vector<UOpPtr> k) {
  Contraction c;
  c.outs = std::move(outs);
  c.k = std::move(k);
  c.factor = address;
  for (size_t f = 0; f < 2; ++f) {
    c.loads[f].push_back({address[f], address[f], itemsize[f]});
    c.reads.push_back(c.loads[f].back());
  }
  return c;
}

}  // namespace loom
