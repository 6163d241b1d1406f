// The expander: upcast and unroll ranges become SIMD lanes.
//
//   Before:  END(STORE(INDEX(out, r0*8 + r1), LOAD(INDEX(in, r0*8 + r1)) * 2.0), r0, r1[upcast 8])
//   After:   END(STORE(INDEX(out, r0*8) f32x8*, LOAD(INDEX(in, r0*8) f32x8*) * VECTORIZE(2.0 x8)), r0)
//
// A node that depends on lane ranges (kinds upcast and unroll) is rebuilt with
// one lane per combination of them, the range of the lowest axis id slowest; a
// node that does not stays scalar and is broadcast where a vector needs it.
// Memory accesses are laid out by their lanes' addresses: consecutive lanes at
// consecutive elements are one vector access (or a few, concatenated), others
// a gather; a REDUCE over lane ranges folds those lanes by halves at the end.
#include "codegen/codegen.hpp"
#include "codegen/vector_ops.hpp"
#include "ir/contraction.hpp"
#include "ir/linear_form.hpp"
#include "ir/pattern.hpp"
#include "ir/symbolic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <unordered_map>

namespace loom {

namespace {

bool is_lane_range(const UOp& u) {
  if (u.op != Op::RANGE) return false;
  const AxisKind k = u.get<AxisArg>().kind;
  return k == AxisKind::Upcast || k == AxisKind::Unroll || k == AxisKind::Pair;
}

bool is_pair(const UOpPtr& r) { return r->op == Op::RANGE && r->get<AxisArg>().kind == AxisKind::Pair; }

struct LaneAxis {
  UOpPtr range;
  int size;
  int64_t rank;  // the range's place among the kernel's loops, outermost first
  friend bool operator==(const LaneAxis& a, const LaneAxis& b) { return a.range == b.range; }
};
using LaneAxes = std::vector<LaneAxis>;  // in loop order: the first is the slowest

int lane_count(const LaneAxes& axes) {
  int n = 1;
  for (const auto& a : axes) n *= a.size;
  return n;
}

LaneAxes union_of(const LaneAxes& a, const LaneAxes& b) {
  LaneAxes out = a;
  for (const auto& x : b)
    if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  std::sort(out.begin(), out.end(), [](const LaneAxis& x, const LaneAxis& y) { return x.rank < y.rank; });
  return out;
}

// The value of each axis at `lane` of `axes`.
std::vector<int64_t> coordinates(const LaneAxes& axes, int64_t lane) {
  std::vector<int64_t> at(axes.size());
  for (size_t i = axes.size(); i-- > 0;) {
    at[i] = lane % axes[i].size;
    lane /= axes[i].size;
  }
  return at;
}

// `node` at lane `lane` of `axes`: a scalar expression with each lane range a constant.
UOpPtr scalar_at(const UOpPtr& node, const LaneAxes& axes, int64_t lane) {
  const std::vector<int64_t> at = coordinates(axes, lane);
  std::vector<std::pair<UOpPtr, UOpPtr>> values;
  for (size_t a = 0; a < axes.size(); ++a) values.emplace_back(axes[a].range, const_int(DType::Int64, at[a]));
  return simplify(substitute(node, values));
}

// The lane of `axes` where the axes take the values `at_axes` has (axes missing there are 0).
int64_t lane_at(const LaneAxes& axes, const LaneAxes& of, const std::vector<int64_t>& at) {
  int64_t lane = 0;
  for (const auto& a : axes) {
    const auto it = std::find(of.begin(), of.end(), a);
    lane = lane * a.size + (it == of.end() ? 0 : at[static_cast<size_t>(it - of.begin())]);
  }
  return lane;
}

struct Expanded {
  UOpPtr node;
  LaneAxes axes;  // empty: a scalar (or an effect)
};

class Expander {
 public:
  UOpPtr run(const UOpPtr& kernel) {
    const std::vector<UOpPtr> nodes = toposort(kernel);
    // Lanes follow the loop order the ENDs and REDUCEs give their ranges (a split
    // lists its outer part first), so consecutive lanes are consecutive in memory.
    // A REDUCE's upcast ranges rank after every other: a register's lanes hold one output's
    // partial sums (the dot tile's rows and columns are unrolled outputs beside them). Its
    // pair range ranks last of all: each pair of lanes is one output's two terms of a step.
    for (const auto& n : nodes)
      if (n->op == Op::END || n->op == Op::REDUCE)
        for (size_t i = 1; i < n->src.size(); ++i) {
          const bool summed_lanes = n->op == Op::REDUCE && n->src[i]->op == Op::RANGE &&
                                    n->src[i]->get<AxisArg>().kind == AxisKind::Upcast;
          const int64_t last = is_pair(n->src[i]) ? 2 * kLastRanks : summed_lanes ? kLastRanks : 0;
          rank_.emplace(n->src[i].get(), static_cast<int64_t>(rank_.size()) + last);
        }
    for (const auto& n : nodes) done_.emplace(n.get(), expand(n));
    return done_.at(kernel.get()).node;
  }

 private:
  static constexpr int64_t kLastRanks = int64_t{1} << 30;  // below the unlisted ranges' 1 << 40
  std::unordered_map<const UOp*, int64_t> rank_;
  std::unordered_map<const UOp*, Expanded> done_;

  const Expanded& of(const UOpPtr& u) const { return done_.at(u.get()); }

  // `e` with one lane per lane of `to` (a superset of its axes).
  static UOpPtr align(const Expanded& e, const LaneAxes& to) {
    if (e.axes == to) return e.node;
    const int n = lane_count(to);
    if (e.axes.empty()) return broadcast(e.node, n);
    std::vector<int64_t> lanes;
    for (int64_t l = 0; l < n; ++l) lanes.push_back(lane_at(e.axes, to, coordinates(to, l)));
    return gep(e.node, std::move(lanes));
  }

  LaneAxes axes_of_sources(const UOp& n) const {
    LaneAxes axes;
    for (const auto& s : n.src) axes = union_of(axes, of(s).axes);
    return axes;
  }

  Expanded expand(const UOpPtr& n) {
    if (is_lane_range(*n)) return lanes_of_range(n);
    if (auto picked = pick_by_unrolled(n)) return *picked;
    switch (n->op) {
      case Op::INDEX:  // with lanes, laid out by its LOAD or STORE
        if (!axes_of_sources(*n).empty()) return {n, {}};
        break;
      case Op::LOAD: return load(n);
      case Op::STORE: return store(n);
      case Op::REDUCE: return reduce(n);
      case Op::END: return end(n);
      case Op::VECTORIZE:
      case Op::GEP:
      case Op::DEFINE_REG:
      case Op::AFTER:
        if (!axes_of_sources(*n).empty())
          throw Error(fmt::format("expander: {} {} over lane ranges: the expander runs before any vector",
                                  op_name(n->op), to_string(n->dtype)));
        break;
      default: break;
    }
    return elementwise(n);
  }

  // A float WHERE whose condition moves with unrolled iterations only (a register tile's
  // rows picking a stack's pieces: codegen/register_tile.hpp's whole_rows) is built lane by
  // lane with each range a constant, so the picks fold to the one value each row reads
  // instead of every piece loaded under a mask in every lane.
  static constexpr int kMaxPickedLanes = 32;
  std::optional<Expanded> pick_by_unrolled(const UOpPtr& n) const {
    if (!is_pick(n) || n->dtype.lanes != 1 || of(n->src.at(0)).axes.empty()) return std::nullopt;
    const LaneAxes axes = axes_of_sources(*n);
    const int count = lane_count(axes);
    if (count > kMaxPickedLanes || !std::all_of(axes.begin(), axes.end(), [](const LaneAxis& a) {
          return a.range->get<AxisArg>().kind == AxisKind::Unroll;
        }))
      return std::nullopt;
    std::vector<UOpPtr> lanes;
    for (int l = 0; l < count; ++l) lanes.push_back(scalar_at(n, axes, l));
    return Expanded{UOp::make(Op::VECTORIZE, n->dtype.vec(count), std::move(lanes)), axes};
  }

  Expanded lanes_of_range(const UOpPtr& r) const {
    const UOpPtr& end = r->src.at(0);
    if (!end->is_const() || end->const_int() < 1)
      throw Error(
          fmt::format("expander: lane range r{} needs a constant positive end", r->get<AxisArg>().id));
    const int n = static_cast<int>(end->const_int());
    std::vector<UOpPtr> lanes;
    for (int i = 0; i < n; ++i) lanes.push_back(const_int(DType::Int64, i));
    const auto it = rank_.find(r.get());  // a range no loop lists: after the listed ones, by id
    const int64_t rank = it != rank_.end() ? it->second : (int64_t{1} << 40) + r->get<AxisArg>().id;
    return {UOp::make(Op::VECTORIZE, DType::Int64.vec(n), std::move(lanes)), {{r, n, rank}}};
  }

  // Sources rebuilt; with lanes, the op applies lane by lane.
  Expanded elementwise(const UOpPtr& n) const {
    const LaneAxes axes = axes_of_sources(*n);
    std::vector<UOpPtr> src;
    for (const auto& s : n->src) src.push_back(align(of(s), axes));
    if (axes.empty()) return {src == n->src ? n : n->with_src(std::move(src)), {}};
    return {UOp::make(n->op, n->dtype.vec(lane_count(axes)), std::move(src), n->arg), axes};
  }

  // ---- memory ----------------------------------------------------------------------
  // One access of `lanes` consecutive lanes from `first`: an INDEX of that many elements.
  struct Piece {
    UOpPtr index;
    int first, lanes;
    // For a run in another order: each of the piece's lanes' element in the run
    // (empty: lane i is element i).
    std::vector<int64_t> element;
  };

  // How the lanes of an INDEX reach memory: as few contiguous vector accesses
  // as its addresses allow, else one gather.
  std::vector<Piece> layout(const UOpPtr& index, LaneAxes& axes) const {
    const UOpPtr& buf = index->src.at(0);
    const UOpPtr& idx = index->src.at(1);
    const bool has_valid = index->src.size() > 2;
    axes = of(idx).axes;
    if (has_valid) axes = union_of(axes, of(index->src[2]).axes);
    const int n = lane_count(axes);
    const DType elem = buf->dtype.deref();
    auto make_index = [&](const UOpPtr& at, const UOpPtr& valid, int lanes) {
      std::vector<UOpPtr> src{of(buf).node, at};
      if (valid) src.push_back(valid);
      return UOp::make(Op::INDEX, elem.vec(lanes).ptr_to(), std::move(src));
    };
    auto valid_lanes = [&](int first, int lanes) -> UOpPtr {
      if (!has_valid) return nullptr;
      const Expanded& v = of(index->src[2]);
      if (v.axes.empty()) return v.node;  // one validity for the whole access
      std::vector<int64_t> picks;
      for (int l = first; l < first + lanes; ++l)
        picks.push_back(lane_at(v.axes, axes, coordinates(axes, l)));
      return gep(v.node, std::move(picks));
    };
    // Each lane's address as a scalar expression of the loop ranges.
    std::vector<UOpPtr> address;
    if (!of(idx).axes.empty())
      for (int l = 0; l < n; ++l) address.push_back(scalar_at(idx, axes, l));
    int group = address.empty() ? 1 : contiguous_group(address);
    // Lanes of several axes with no run in loop order (a transposing copy's load, its
    // lanes along the load's rows and its unrolled columns) take the order of their axes
    // with the longest runs, consecutive or else consecutive in another order: vector
    // accesses, the value's lanes reordered by a shuffle where it meets lanes in loop order.
    if (group == 1 && axes.size() > 1 && axes.size() <= kMaxReorderedAxes && !has_valid) {
      std::vector<size_t> pick(axes.size());
      std::iota(pick.begin(), pick.end(), size_t{0});
      const auto in_loop_order = permuted_runs(address);
      int best = in_loop_order.empty() ? 1 : 2 * static_cast<int>(in_loop_order[0].element.size()) - 1;
      while (std::next_permutation(pick.begin(), pick.end())) {
        LaneAxes order;
        for (size_t a : pick) order.push_back(axes[a]);
        std::vector<UOpPtr> moved;
        for (int l = 0; l < n; ++l) moved.push_back(scalar_at(idx, order, l));
        const int consecutive = contiguous_group(moved);
        const auto runs = consecutive > 1 ? std::vector<Run>{} : permuted_runs(moved);
        // A run in order beats a shuffled one of the same length.
        const int run = consecutive > 1 ? 2 * consecutive
                        : runs.empty()  ? 1
                                        : 2 * static_cast<int>(runs[0].element.size()) - 1;
        if (run > best) best = run, axes = std::move(order), address = std::move(moved), group = consecutive;
      }
    }
    std::vector<Piece> pieces;
    // Lanes whose addresses are consecutive in another order (a pair copy's swapped
    // halves, read along the pairs): one vector access of each run, shuffled.
    if (group == 1 && !has_valid && !address.empty())
      if (auto runs = permuted_runs(address); !runs.empty()) {
        const int g = static_cast<int>(runs[0].element.size());
        for (int first = 0; first < n; first += g) {
          Run& run = runs[static_cast<size_t>(first / g)];
          pieces.push_back({make_index(address[static_cast<size_t>(first + run.lowest)], nullptr, g), first,
                            g, std::move(run.element)});
        }
        return pieces;
      }
    // Lanes that are unrolled iterations, not SIMD lanes, at scattered addresses (a
    // register tile's rows of a): one scalar access each, never a gather.
    const bool unrolled = std::all_of(axes.begin(), axes.end(), [](const LaneAxis& a) {
      return a.range->get<AxisArg>().kind == AxisKind::Unroll;
    });
    if (group == 1 &&
        !(unrolled && !address.empty())) {  // a gather (or one address for all lanes, with per-lane validity)
      const UOpPtr at = address.empty() ? broadcast(of(idx).node, n) : align(of(idx), axes);
      pieces.push_back({make_index(at, valid_lanes(0, n), n), 0, n, {}});
      return pieces;
    }
    for (int first = 0; first < n; first += group)
      pieces.push_back({make_index(address[static_cast<size_t>(first)], valid_lanes(first, group), group),
                        first,
                        group,
                        {}});
    return pieces;
  }

  // Lane orders tried for an access with no run in loop order: all of them, up to this
  // many axes (a pair copy's lanes: its pairs, their halves and its rows).
  static constexpr size_t kMaxReorderedAxes = 3;

  // A block of lanes whose addresses are the elements of one run in another order:
  // each lane's element in the run, and the lane that reads its first element.
  struct Run {
    std::vector<int64_t> element;
    int lowest = 0;
  };

  // The largest blocks of lanes (at least 2, the same size for all) each of which
  // addresses a run of consecutive elements, in any order; none if there are none.
  static std::vector<Run> permuted_runs(const std::vector<UOpPtr>& address) {
    const int n = static_cast<int>(address.size());
    std::vector<LinearForm> forms;
    for (const auto& a : address) forms.push_back(linear_form(a));
    const auto same_terms = [&](int i, int j) {
      const auto &a = forms[static_cast<size_t>(i)].terms, &b = forms[static_cast<size_t>(j)].terms;
      return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                        [](const Term& x, const Term& y) { return x.base == y.base && x.coef == y.coef; });
    };
    for (int g = n; g >= 2; --g) {
      if (n % g != 0) continue;
      std::vector<Run> runs;
      for (int first = 0; first < n; first += g) {
        Run run;
        int64_t low = forms[static_cast<size_t>(first)].constant;
        bool offsets_only = true;  // the block's addresses differ by constants alone
        for (int l = first; l < first + g && offsets_only; ++l) {
          offsets_only = same_terms(first, l);
          if (forms[static_cast<size_t>(l)].constant < low)
            low = forms[static_cast<size_t>(l)].constant, run.lowest = l - first;
        }
        if (!offsets_only) break;
        std::vector<bool> hit(static_cast<size_t>(g), false);
        for (int l = first; l < first + g; ++l) {
          const int64_t e = forms[static_cast<size_t>(l)].constant - low;
          if (e >= g || hit[static_cast<size_t>(e)]) break;
          hit[static_cast<size_t>(e)] = true;
          run.element.push_back(e);
        }
        if (static_cast<int>(run.element.size()) != g) break;
        runs.push_back(std::move(run));
      }
      if (static_cast<int>(runs.size()) * g == n) return runs;
    }
    return {};
  }

  // The largest run of lanes whose addresses are consecutive, the same for every run.
  static int contiguous_group(const std::vector<UOpPtr>& address) {
    const int n = static_cast<int>(address.size());
    for (int g = n; g >= 2; --g) {
      if (n % g != 0) continue;
      bool ok = true;
      for (int first = 0; ok && first < n; first += g)
        for (int j = 1; ok && j < g; ++j)
          ok = address[static_cast<size_t>(first + j)] == simplify(address[static_cast<size_t>(first)] + j);
      if (ok) return g;
    }
    return 1;
  }

  Expanded load(const UOpPtr& n) const {
    const UOpPtr& index = n->src.at(0);
    if (axes_of_sources(*index).empty()) return elementwise(n);
    LaneAxes axes;
    const std::vector<Piece> pieces = layout(index, axes);
    std::vector<UOpPtr> loads;
    for (const Piece& p : pieces) {
      const UOpPtr run = UOp::make(Op::LOAD, p.index->dtype.deref(), {p.index});
      loads.push_back(p.element.empty() ? run : gep(run, p.element));
    }
    if (loads.size() == 1) return {loads[0], axes};
    return {UOp::make(Op::VECTORIZE, n->dtype.vec(lane_count(axes)), std::move(loads)),
            axes};  // concatenated
  }

  Expanded store(const UOpPtr& n) const {
    const UOpPtr& index = n->src.at(0);
    const Expanded& value = of(n->src.at(1));
    if (axes_of_sources(*index).empty()) {
      if (value.axes.empty()) return elementwise(n);
      // Every lane stores to the one address: the last lane's store is the one that stays.
      const UOpPtr last = gep(value.node, {lane_count(value.axes) - 1});
      return {UOp::make(Op::STORE, last->dtype, {of(index).node, last}), {}};
    }
    LaneAxes axes;
    std::vector<Piece> pieces = layout(index, axes);
    const LaneAxes laid_out = axes;  // the order the pieces' lanes follow
    axes = union_of(axes, value.axes);
    if (lane_count(axes) == lane_count(laid_out)) axes = laid_out;
    if (lane_count(axes) != pieces.back().first + pieces.back().lanes)
      throw Error(
          fmt::format("expander: STORE {}: its value has lanes its address does not", to_string(n->dtype)));
    const UOpPtr v = align(value, axes);
    std::vector<UOpPtr> stores;
    for (const Piece& p : pieces) {
      UOpPtr part = v;
      if (pieces.size() > 1 || !p.element.empty()) {
        std::vector<int64_t> picks(static_cast<size_t>(p.lanes));  // element e of the run <- its lane
        for (int l = 0; l < p.lanes; ++l)
          picks[static_cast<size_t>(p.element.empty() ? l : p.element[static_cast<size_t>(l)])] = p.first + l;
        part = gep(v, std::move(picks));
      }
      stores.push_back(UOp::make(Op::STORE, part->dtype, {p.index, part}));
    }
    if (stores.size() == 1) return {stores[0], {}};
    return {UOp::make(Op::SINK, DType::Bool, std::move(stores)), {}};  // a group of effects
  }

  // ---- loops -----------------------------------------------------------------------
  // REDUCE over loop ranges keeps one accumulator lane per value lane; the lanes
  // of its lane ranges are folded by halves after the loop (whole vectors, one op a level).
  // A pair range is folded at every step instead: the REDUCE's value has two lanes (its
  // fastest) per accumulator lane, added odd lane first (docs/kernel-ir.md).
  Expanded reduce(const UOpPtr& n) const {
    const Op op = n->get<ReduceArg>().op;
    LaneAxes folded, pair;
    std::vector<UOpPtr> loops{nullptr};
    for (size_t i = 1; i < n->src.size(); ++i) {
      if (is_pair(n->src[i]))
        pair = lanes_of_range(n->src[i]).axes;
      else if (is_lane_range(*n->src[i]))
        folded = union_of(folded, lanes_of_range(n->src[i]).axes);
      else
        loops.push_back(of(n->src[i]).node);
    }
    const LaneAxes with_pair = union_of(union_of(of(n->src[0]).axes, folded), pair);
    loops[0] = align(of(n->src[0]), with_pair);
    LaneAxes all = with_pair;
    if (!pair.empty()) all.erase(std::find(all.begin(), all.end(), pair[0]));
    const DType dt = loops[0]->dtype.base().vec(lane_count(all));
    UOpPtr acc = loops[0];
    if (loops.size() > 1) {
      acc = UOp::make(Op::REDUCE, dt, std::move(loops), n->arg);
    } else if (!pair.empty()) {  // no loop: the one step, odd lanes first
      const PairLanes halves = pair_lanes(lane_count(all));
      acc = alu(op, {gep(acc, halves.odd), gep(acc, halves.even)});
    }
    if (folded.empty()) return {acc, all};
    LaneAxes kept;
    for (const auto& a : all)
      if (std::find(folded.begin(), folded.end(), a) == folded.end()) kept.push_back(a);
    // The accumulator's lanes reordered folded-major: F blocks of K kept lanes.
    const int64_t kept_lanes = lane_count(kept);
    int64_t blocks = lane_count(folded);
    std::vector<int64_t> order;
    for (int64_t f = 0; f < blocks; ++f) {
      const std::vector<int64_t> at_folded = coordinates(folded, f);
      for (int64_t k = 0; k < kept_lanes; ++k) {
        const std::vector<int64_t> at_kept = coordinates(kept, k);
        std::vector<int64_t> at(all.size());
        for (size_t a = 0; a < all.size(); ++a) {
          const auto fk = std::find(folded.begin(), folded.end(), all[a]);
          at[a] =
              fk != folded.end()
                  ? at_folded[static_cast<size_t>(fk - folded.begin())]
                  : at_kept[static_cast<size_t>(std::find(kept.begin(), kept.end(), all[a]) - kept.begin())];
        }
        order.push_back(lane_at(all, all, at));
      }
    }
    UOpPtr blocked = pick(acc, order);
    const auto lanes_from = [&](int64_t first, int64_t count) {
      std::vector<int64_t> lanes(static_cast<size_t>(count));
      std::iota(lanes.begin(), lanes.end(), first);
      return count == static_cast<int64_t>(blocked->dtype.lanes) ? blocked : gep(blocked, std::move(lanes));
    };
    // Halves while the count of blocks is even: the first half op the second, one vector op a
    // level (log2 levels of whole registers, then of their halves), not one op per lane.
    while (blocks > 1 && blocks % 2 == 0) {
      blocks /= 2;
      blocked =
          alu(op, {lanes_from(0, blocks * kept_lanes), lanes_from(blocks * kept_lanes, blocks * kept_lanes)});
    }
    std::vector<UOpPtr> parts;
    for (int64_t f = 0; f < blocks; ++f) parts.push_back(lanes_from(f * kept_lanes, kept_lanes));
    while (parts.size() > 1) {  // an odd count left: pairwise, (p0 op p1) op (p2 op p3) ...
      std::vector<UOpPtr> next;
      for (size_t i = 0; i + 1 < parts.size(); i += 2) next.push_back(alu(op, {parts[i], parts[i + 1]}));
      if (parts.size() % 2) next.push_back(parts.back());
      parts = std::move(next);
    }
    return {parts[0], kept};
  }

  Expanded end(const UOpPtr& n) const {
    std::vector<UOpPtr> src{of(n->src.at(0)).node};
    for (size_t i = 1; i < n->src.size(); ++i)
      if (!is_lane_range(*n->src[i])) src.push_back(n->src[i]);
    if (src.size() == 1) return {src[0], {}};
    return {src == n->src ? n : n->with_src(std::move(src)), {}};
  }
};

}  // namespace

UOpPtr expand_lanes(const UOpPtr& kernel) { return Expander().run(kernel); }

}  // namespace loom
