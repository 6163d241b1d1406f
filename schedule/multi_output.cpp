#include "schedule/multi_output.hpp"

#include "ir/buffer_access.hpp"
#include "ir/contraction.hpp"
#include "schedule/stage.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace loom {

namespace {

using Subs = std::vector<std::pair<UOpPtr, UOpPtr>>;

// The value's one REDUCE, if it is a float ADD over one range of constant extent.
UOpPtr one_float_sum(const UOpPtr& buf) {
  UOpPtr red;
  for (const auto& u : own_nodes(buf->src[0])) {
    if (u->op != Op::REDUCE) continue;
    if (red) return nullptr;
    red = u;
  }
  if (!red || red->src.size() != 2 || red->get<ReduceArg>().op != Op::ADD || !red->dtype.is_float() ||
      red->dtype.lanes != 1 || trip(red->src[1]).value_or(0) <= 0)
    return nullptr;
  return red;
}

// The loads' addresses: INDEX nodes of a BUFFER or BUFFERIZE.
std::vector<UOpPtr> reads(const UOpPtr& buf) {
  std::vector<UOpPtr> out;
  for (const auto& u : own_nodes(buf->src[0]))
    if (u->op == Op::INDEX && (u->src[0]->op == Op::BUFFER || u->src[0]->op == Op::BUFFERIZE))
      out.push_back(u);
  return out;
}

// The output ranges of `buf` not used by its valid (padded columns), or none if one is
// not a RANGE of positive constant extent.
std::vector<UOpPtr> output_ranges(const UOpPtr& buf) {
  const size_t n = buf->get<Shape>().size();
  const UOpPtr valid = buf->src.size() > n + 1 ? buf->src.back() : nullptr;
  std::vector<UOpPtr> out;
  for (size_t i = 1; i <= n; ++i) {
    if (trip(buf->src[i]).value_or(0) <= 0) return {};
    if (!valid || !reaches(valid, buf->src[i])) out.push_back(buf->src[i]);
  }
  return out;
}

// The pair of a product and a column sum the rule needs.
struct Candidate {
  UOpPtr buf, red;
  std::vector<UOpPtr> outs;
  std::vector<UOpPtr> reads;        // reads(buf), found once per candidate, not once per pair
  bool own_ranges = false;          // no other BUFFERIZE's body or ranges use buf's ranges or its sum's
  std::vector<const UOp*> buffers;  // what `reads` index, sorted
};

// P is a contraction (ir/contraction.hpp) none of whose reads is over all of its output
// ranges (dY[m, n] misses k, x[m, k] misses n), the form the optimiser's register tile
// walks in panels. A read over all of them (a buffer of the product's whole iteration
// space) makes P a pass over that buffer with a sum, which no tile keeps: S would only
// slow it down. (A product of one output range, a matrix-vector product, reads its
// matrix so.) With P's ranges its own, a read uses one only where the range is open (no
// other buffer's body uses it): a lookup, not a walk into the buffer the read reads.
bool contracts(const Candidate& p) {
  std::vector<UOpPtr> outs;
  for (size_t i = 1; i < p.buf->src.size(); ++i)
    if (p.buf->src[i]->op == Op::RANGE) outs.push_back(p.buf->src[i]);
  const auto c = contraction(p.buf->src[0], std::move(outs), nullptr, !p.own_ranges);
  return c && c->product() && !c->reads_all_outputs();
}

// S's reads, with `subs` put for its ranges, are all among P's.
bool reads_shared(const Candidate& s, const Candidate& p, const Subs& subs) {
  const std::vector<UOpPtr>&s_reads = s.reads, &p_reads = p.reads;
  Subs all = subs;
  all.emplace_back(s.red->src[1], p.red->src[1]);
  const auto found = [&](const UOpPtr& i) {
    return std::find(p_reads.begin(), p_reads.end(), i) != p_reads.end();
  };
  // With S's ranges its own, none is under a buffer S reads: the substitution stops
  // there. Otherwise it may change a buffer S reads into one that uses P's ranges,
  // which P reads only if some other buffer uses P's ranges: with P's ranges its own,
  // a read that misses P's within the kernel misses them whole, found with no walk
  // of the buffers below it (the test per pair of an unrolled LSTM's sums).
  const auto shared = [&](const UOpPtr& i) {
    const UOpPtr within = substitute_within(i, all, Op::BUFFERIZE);
    if (s.own_ranges) return found(within);
    if (!found(within) && p.own_ranges) return false;
    return found(substitute(i, all));
  };
  return !s_reads.empty() && std::all_of(s_reads.begin(), s_reads.end(), shared);
}

// A one-to-one map of S's output ranges (from the i-th) onto P's of equal extents under
// which S reads only what P reads; appended to `subs`.
bool map_ranges(const Candidate& s, const Candidate& p, size_t i, Subs& subs) {
  if (i == s.outs.size()) return reads_shared(s, p, subs);
  for (const auto& r : p.outs) {
    const bool taken = std::any_of(subs.begin(), subs.end(), [&](const auto& m) { return m.second == r; });
    if (taken || trip(r) != trip(s.outs[i])) continue;
    subs.emplace_back(s.outs[i], r);
    if (map_ranges(s, p, i + 1, subs)) return true;
    subs.pop_back();
  }
  return false;
}

// BUFFERIZEs that may take part: not written in place, sharing no range with another
// (fused already), their value one float sum over one range.
std::vector<Candidate> candidates(const UOpPtr& sink, const StageContext& ctx) {
  std::vector<UOpPtr> bufs;
  std::unordered_map<const UOp*, int> listed;  // RANGE -> BUFFERIZEs listing it
  for (const auto& u : toposort(sink))
    if (u->op == Op::BUFFERIZE) {
      bufs.push_back(u);
      for (size_t i = 1; i < u->src.size(); ++i) ++listed[u->src[i].get()];
    }
  std::unordered_map<const UOp*, int>
      bodies;  // RANGE -> BUFFERIZEs whose sources reach it, not through another
  for (const auto& b : bufs) {
    std::unordered_set<const UOp*> seen;
    for (const auto& src : b->src)
      for (const auto& u : own_nodes(src))
        if (u->op == Op::RANGE && seen.insert(u.get()).second) ++bodies[u.get()];
  }
  std::vector<Candidate> out;
  for (const auto& b : bufs) {
    bool in_place = false, shared = false;
    for (size_t i = 0; i < sink->src.size() && i < ctx.in_place_roots.size(); ++i)
      in_place |= ctx.in_place_roots[i] && sink->src[i] == b;
    for (size_t i = 1; i < b->src.size(); ++i) shared |= listed[b->src[i].get()] > 1;
    const UOpPtr red = one_float_sum(b);
    if (in_place || shared || !red) continue;
    bool own = bodies[red->src[1].get()] == 1;
    for (size_t i = 1; i < b->src.size(); ++i)
      own &= b->src[i]->op != Op::RANGE || bodies[b->src[i].get()] == 1;
    Candidate c{b, red, output_ranges(b), reads(b), own, {}};
    for (const auto& i : c.reads) c.buffers.push_back(i->src[0].get());
    std::sort(c.buffers.begin(), c.buffers.end());
    c.buffers.erase(std::unique(c.buffers.begin(), c.buffers.end()), c.buffers.end());
    out.push_back(std::move(c));
  }
  return out;
}

// The sum S that joins product P, if any, among the candidates not fused yet.
const Candidate* partner(const Candidate& p, const std::vector<Candidate>& all,
                         const std::unordered_set<const UOp*>& fused, Subs& subs) {
  for (const Candidate& s : all) {
    const size_t s_ranges = s.buf->get<Shape>().size();
    if (s.buf == p.buf || fused.count(s.buf.get()) || s.outs.size() != s_ranges ||
        s.buf->src.size() != s_ranges + 1)
      continue;
    if (trip(s.red->src[1]) != trip(p.red->src[1])) continue;
    // A substitution within S keeps the buffers it reads: P must read each of them.
    if (s.own_ranges &&
        !std::includes(p.buffers.begin(), p.buffers.end(), s.buffers.begin(), s.buffers.end()))
      continue;
    // The walks of the whole graph last, for the few pairs that share their reads.
    subs.clear();
    if (!map_ranges(s, p, 0, subs) || reaches(p.buf, s.buf) || reaches(s.buf, p.buf)) continue;
    return &s;
  }
  return nullptr;
}

// S over P's ranges. With S's ranges its own, no buffer S reads uses them: its
// sources' substitution stops at those buffers, as reads_shared's does.
UOpPtr moved(const UOpPtr& s, const Subs& subs, bool own_ranges) {
  if (!own_ranges) return substitute(s, subs);
  std::vector<UOpPtr> src;
  for (const auto& x : s->src) src.push_back(substitute_within(x, subs, Op::BUFFERIZE));
  return s->with_src(std::move(src));
}

// Every pair at once. A fused pair shares its ranges, which takes both out of the
// candidates, and changes no other pair's test (the reads it compares are rebuilt alike,
// no buffer comes to read another), so the pairs are those one fusion per pass would
// find, in the same order, without a walk of the whole graph per fusion (an unrolled
// LSTM fuses a bias gradient per step).
UOpPtr fuse_column_sum(const Match& m) {
  const UOpPtr& sink = m.root();
  const std::vector<Candidate> all = candidates(sink, m.ctx<StageContext>());
  std::unordered_set<const UOp*> fused;
  std::unordered_map<const UOp*, std::pair<Subs, bool>> moves;  // S -> its ranges' new ones, own_ranges
  for (const Candidate& p : all) {
    if (fused.count(p.buf.get()) || p.outs.empty() || !contracts(p)) continue;
    Subs subs;
    const Candidate* s = partner(p, all, fused, subs);
    if (!s) continue;
    fused.insert(p.buf.get());
    fused.insert(s->buf.get());
    moves.emplace(s->buf.get(), std::make_pair(std::move(subs), s->own_ranges));
  }
  if (moves.empty()) return nullptr;
  // Bottom up, so a sum under another fused one is moved first; each sum's ranges are
  // then put for its product's (substitutions of distinct ranges commute).
  std::unordered_map<const UOp*, UOpPtr> done;
  for (const auto& n : toposort(sink)) {
    std::vector<UOpPtr> src;
    bool changed = false;
    for (const auto& x : n->src) {
      src.push_back(done.at(x.get()));
      changed |= src.back() != x;
    }
    UOpPtr u = changed ? n->with_src(std::move(src)) : n;
    if (auto it = moves.find(n.get()); it != moves.end()) u = moved(u, it->second.first, it->second.second);
    done[n.get()] = std::move(u);
  }
  return done.at(sink.get());
}

}  // namespace

const PatternMatcher& multi_output() {
  static const PatternMatcher pm("multi_output", {{UPat::ops({Op::SINK}), fuse_column_sum}});
  return pm;
}

}  // namespace loom
