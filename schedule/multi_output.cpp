#include "schedule/multi_output.hpp"

#include "ir/buffer_access.hpp"
#include "schedule/stage.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace loom {

namespace {

using Subs = std::vector<std::pair<UOpPtr, UOpPtr>>;

std::optional<int64_t> trip(const UOpPtr& range) {
  if (range->op != Op::RANGE || !range->src.at(0)->is_const()) return std::nullopt;
  return range->src[0]->const_int();
}

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
  const size_t n = buf->get<std::vector<int64_t>>().size();
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

// P is a contraction: none of its loads is over all of its output ranges (dY[m, n]
// misses k, x[m, k] misses n), the form the optimiser's register tile walks in panels.
// A load over all of them (a buffer of the product's whole iteration space) makes P a
// pass over that buffer with a sum, which no tile keeps: S would only slow it down. (A
// product of one output range, a matrix-vector product, reads its matrix so.)
bool contracts(const Candidate& p) {
  std::vector<UOpPtr> outs;
  for (size_t i = 1; i < p.buf->src.size(); ++i)
    if (p.buf->src[i]->op == Op::RANGE) outs.push_back(p.buf->src[i]);
  const std::vector<UOpPtr> loads = reads(p.buf);
  return outs.size() < 2 || std::none_of(loads.begin(), loads.end(), [&](const UOpPtr& index) {
           return std::all_of(outs.begin(), outs.end(), [&](const UOpPtr& r) { return reaches(index, r); });
         });
}

// S's reads, with `subs` put for its ranges, are all among P's.
bool reads_shared(const Candidate& s, const Candidate& p, const Subs& subs) {
  const std::vector<UOpPtr>&s_reads = s.reads, &p_reads = p.reads;
  Subs all = subs;
  all.emplace_back(s.red->src[1], p.red->src[1]);
  // With S's ranges its own, none is under a buffer S reads: the substitution stops there.
  const auto moved = [&](const UOpPtr& i) {
    return s.own_ranges ? substitute_within(i, all, Op::BUFFERIZE) : substitute(i, all);
  };
  return !s_reads.empty() && std::all_of(s_reads.begin(), s_reads.end(), [&](const UOpPtr& i) {
    return std::find(p_reads.begin(), p_reads.end(), moved(i)) != p_reads.end();
  });
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

UOpPtr fuse_column_sum(const Match& m) {
  const UOpPtr& sink = m.root();
  const std::vector<Candidate> all = candidates(sink, m.ctx<StageContext>());
  for (const Candidate& p : all) {
    if (p.red->src[0]->op != Op::MUL || p.outs.empty() || !contracts(p)) continue;
    for (const Candidate& s : all) {
      const size_t s_ranges = s.buf->get<std::vector<int64_t>>().size();
      if (s.buf == p.buf || s.outs.size() != s_ranges || s.buf->src.size() != s_ranges + 1) continue;
      if (trip(s.red->src[1]) != trip(p.red->src[1])) continue;
      // A substitution within S keeps the buffers it reads: P must read each of them.
      if (s.own_ranges &&
          !std::includes(p.buffers.begin(), p.buffers.end(), s.buffers.begin(), s.buffers.end()))
        continue;
      // The walks of the whole graph last, for the few pairs that share their reads.
      Subs subs;
      if (!map_ranges(s, p, 0, subs) || reaches(p.buf, s.buf) || reaches(s.buf, p.buf)) continue;
      return substitute(sink, {{s.buf, substitute(s.buf, subs)}});
    }
  }
  return nullptr;
}

}  // namespace

const PatternMatcher& multi_output() {
  static const PatternMatcher pm("multi_output", {{UPat::ops({Op::SINK}), fuse_column_sum}});
  return pm;
}

}  // namespace loom
