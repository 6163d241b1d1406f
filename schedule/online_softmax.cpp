#include "schedule/online_softmax.hpp"

#include "ir/buffer_access.hpp"
#include "ir/range_split.hpp"
#include "schedule/stage.hpp"

#include <optional>
#include <unordered_map>

namespace loom {

namespace {

// The value `u` loads from a proposed or realized buffer, computed at its index; null
// when `u` is no such read.
UOpPtr read_value(const UOpPtr& u) {
  if (u->op != Op::LOAD || u->src[0]->op != Op::INDEX) return nullptr;
  const UOpPtr& index = u->src[0];
  if (index->src[0]->op != Op::BUFFERIZE || valid_of(index)) return nullptr;
  return inline_at(index->src[0], index);
}

// `u`, or what it reads when it reads a buffer.
UOpPtr seen(const UOpPtr& u) {
  const UOpPtr v = read_value(u);
  return v ? v : u;
}

bool reduce_over_one(const UOpPtr& u, Op op) {
  return u->op == Op::REDUCE && u->src.size() == 2 && u->src[1]->op == Op::RANGE &&
         u->get<ReduceArg>().op == op;
}

// A softmax row read at the sum's range `j`: p(j) = x(j) * RECIP(Σ_j2 x(j2)) with
// x(j) = EXP(s(j) - MAX_j3 s(j3)), the max and the sum over j's row.
struct SoftmaxRow {
  UOpPtr x;         // x(j)
  UOpPtr sum;       // Σ_j2 x(j2)
  UOpPtr max_read;  // the max as x reads it (a buffer's load, or the max itself)
  UOpPtr max;       // MAX_j3 s(j3)
};

// The max m of x(j) = EXP(s(j) - m), when it is the max of s over a range of its own, not j.
UOpPtr max_of_shifted_row(const UOpPtr& x, const UOpPtr& j) {
  const UOpPtr e = seen(x);
  if (e->op != Op::EXP || e->src[0]->op != Op::SUB) return nullptr;
  const UOpPtr& s = e->src[0]->src[0];
  const UOpPtr m = seen(e->src[0]->src[1]);
  const bool row_max =
      reduce_over_one(m, Op::MAX) && !depends_on(m, j) && substitute_ranges(m->src[0], {{m->src[1], j}}) == s;
  return row_max ? e->src[0]->src[1] : nullptr;
}

std::optional<SoftmaxRow> softmax_row(const UOpPtr& p, const UOpPtr& j) {
  if (p->op != Op::MUL) return std::nullopt;
  for (const int side : {0, 1}) {
    const UOpPtr &x = p->src[side], &r = p->src[1 - side];
    if (r->op != Op::RECIP) continue;
    const UOpPtr sum = seen(r->src[0]);
    if (!reduce_over_one(sum, Op::ADD) || depends_on(sum, j)) continue;
    if (substitute_ranges(sum->src[0], {{sum->src[1], j}}) != x) continue;
    if (const UOpPtr max_read = max_of_shifted_row(x, j)) return SoftmaxRow{x, sum, max_read, seen(max_read)};
  }
  return std::nullopt;
}

// Inlines, through `u`, every read of a buffer indexed by `rows` and `axes` only and by
// one of `axes` at least: the [.., L, S] scores and masks of the softmax, never q, k or v.
class RowInliner {
 public:
  RowInliner(const OpenRanges& rows, std::vector<UOpPtr> axes) : rows_(rows), axes_(std::move(axes)) {}

  UOpPtr operator()(const UOpPtr& u) {
    if (auto it = done_.find(u.get()); it != done_.end()) return it->second;
    UOpPtr out = u;
    if (u->op == Op::BUFFERIZE || u->ranges().empty()) {
      // another kernel's value, or nothing that varies along a row
    } else if (const UOpPtr v = along_row(u) ? read_value(u) : nullptr) {
      out = (*this)(v);
    } else {
      std::vector<UOpPtr> src;
      for (const auto& s : u->src) src.push_back((*this)(s));
      out = src == u->src ? u : u->with_src(std::move(src));
    }
    done_.emplace(u.get(), out);
    held_.push_back(u);
    return out;
  }

 private:
  bool along_row(const UOpPtr& read) const {
    bool on_axis = false;
    for (const UOp* r : read->ranges()) {
      const bool axis =
          std::any_of(axes_.begin(), axes_.end(), [&](const UOpPtr& a) { return a.get() == r; });
      if (!axis && !rows_.contains(r)) return false;
      on_axis |= axis;
    }
    return on_axis;
  }

  const OpenRanges& rows_;
  std::vector<UOpPtr> axes_;
  std::unordered_map<const UOp*, UOpPtr> done_;
  std::vector<UOpPtr> held_;  // keeps the keys of done_ alive
};

// Σ_j p(j) w(j) over the softmax's axis j, where p is a buffer no one else reads:
// Σ_j x(j) w(j) * RECIP(Σ_j2 x(j2)), with the row's scores computed inside. Weights
// WHERE(c, p(j), 0) keep their select on x(j) in the weighted sum.
UOpPtr sum_weighted_by_softmax(const Match& m) {
  const UOpPtr& red = m.root();
  if (!reduce_over_one(red, Op::ADD) || !red->dtype.is_float() || red->src[0]->op != Op::MUL) return nullptr;
  const UOpPtr &j = red->src[1], &value = red->src[0];
  const auto& readers = m.ctx<StageContext>().buffer_readers;
  for (const int side : {0, 1}) {
    const UOpPtr& read = value->src[side];
    if (read->op != Op::LOAD || read->src[0]->op != Op::INDEX) continue;
    const auto n = readers.find(read->src[0]->src[0].get());
    if (n == readers.end() || n->second != 1) continue;  // the weights are needed elsewhere too
    UOpPtr p = read_value(read), mask;
    // Weights masked again where they are 0 already (causal attention's, for reduce_bounds).
    if (p && p->op == Op::WHERE && p->src[2]->is_const() && p->src[2]->const_value() == 0)
      mask = p->src[0], p = p->src[1];
    const std::optional<SoftmaxRow> row = p ? softmax_row(p, j) : std::nullopt;
    if (!row) continue;
    // Each sum's max runs over the sum's own range: codegen folds it into the sum's loop.
    const UOpPtr &max_read = row->max_read, &max = row->max;
    RowInliner inline_rows(max->ranges(), {j, row->sum->src[1], max->src[1]});
    const auto computed = [&](const UOpPtr& u, const UOpPtr& axis) {
      const UOpPtr running = max->with_src({substitute_ranges(max->src[0], {{max->src[1], axis}}), axis});
      return inline_rows(substitute(inline_rows(u), {{max_read, running}}));
    };
    // The row's sum runs over the weighted sum's own range: one loop of k and v computes each
    // score once for both (lower_reduce folds every sum of one running max together).
    const UOpPtr x = computed(row->x, j);
    const UOpPtr term = mask ? where(mask, x, const_like(x->dtype, 0)) : x;
    const UOpPtr weighted = red->with_src({term * value->src[1 - side], j});
    const UOpPtr sum = row->sum->with_src({x, j});
    return weighted * alu(Op::RECIP, {sum});
  }
  return nullptr;
}

}  // namespace

void count_buffer_readers(const UOpPtr& root, StageContext& ctx) {
  const std::vector<UOpPtr> nodes = toposort(root);
  ctx.buffer_readers = buffer_reads(nodes);
  for (const UOpPtr& u : nodes)
    if (ctx.buffer_readers.contains(u.get())) ctx.held.push_back(u);
}

const PatternMatcher& online_softmax() {
  static const PatternMatcher pm("online_softmax", {{UPat::ops({Op::REDUCE}), sum_weighted_by_softmax}});
  return pm;
}

}  // namespace loom
