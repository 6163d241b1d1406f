#include "schedule/panel_packing.hpp"

#include "ir/buffer_access.hpp"
#include "ir/range_split.hpp"
#include "schedule/stage.hpp"

#include <algorithm>
#include <optional>
#include <unordered_set>

namespace loom {

namespace {

// Output rows that must share b before its copy pays: the copy reads b and
// writes it once (about two reads of b), a tile reads b once per 6 rows, so 32
// rows read it 5 times.
constexpr int64_t kMinRows = 32;
// b within the L1 data cache (32 KiB, /sys/devices/system/cpu/cpu0/cache) stays
// there whatever its row stride: nothing to gain.
constexpr int64_t kMinBytes = 32 * 1024;
// Float ALU ops an a value may cost: a is computed again for every panel. A
// costly a (a fused softmax) keeps the tile as wide as the columns instead
// (codegen/register_tile.cpp).
constexpr int64_t kCheapA = 2;

std::optional<int64_t> trip(const UOpPtr& range) {
  if (range->op != Op::RANGE || !range->src.at(0)->is_const()) return std::nullopt;
  return range->src[0]->const_int();
}

// The nodes `value` computes itself: not those of the buffers it reads.
std::vector<UOpPtr> own_nodes(const UOpPtr& value) {
  std::vector<UOpPtr> out, stack{value};
  std::unordered_set<const UOp*> seen;
  while (!stack.empty()) {
    const UOpPtr u = stack.back();
    stack.pop_back();
    if (!seen.insert(u.get()).second) continue;
    out.push_back(u);
    if (u->op != Op::BUFFERIZE) stack.insert(stack.end(), u->src.begin(), u->src.end());
  }
  return out;
}

std::vector<UOpPtr> own(const UOpPtr& value, Op op) {
  std::vector<UOpPtr> out;
  for (const auto& u : own_nodes(value))
    if (u->op == op) out.push_back(u);
  return out;
}

int64_t float_ops(const UOpPtr& value) {
  const auto nodes = own_nodes(value);
  return std::count_if(nodes.begin(), nodes.end(),
                       [](const UOpPtr& u) { return is_alu(u->op) && u->dtype.is_float(); });
}

bool uses(const UOpPtr& u, const UOpPtr& range) { return u->ranges().contains(range); }

// b's side of the product: uses the column j, which a does not, and every
// read of b is contiguous along j; a is cheap and uses a row b does not (the
// innermost such row: its trip count is returned).
std::optional<int64_t> b_side(const UOpPtr& a, const UOpPtr& b, const std::vector<UOpPtr>& outs) {
  const UOpPtr& j = outs.back();
  if (!uses(b, j) || uses(a, j) || float_ops(a) > kCheapA || !own(b, Op::REDUCE).empty()) return std::nullopt;
  for (const auto& index : own(b, Op::INDEX))
    if (address_stride(index, j) != 1) return std::nullopt;
  for (auto r = outs.rbegin(); r != outs.rend(); ++r)
    if (uses(a, *r) && !uses(b, *r)) return trip(*r);
  return std::nullopt;
}

// value with b read from its panels P[batch..., j / W, k..., j % W].
UOpPtr packed(const UOpPtr& value, const UOpPtr& red, size_t b_src, const std::vector<UOpPtr>& outs,
              int64_t width, int64_t next_id) {
  const UOpPtr &b = red->src[0]->src[b_src], &j = outs.back();
  std::vector<std::pair<UOpPtr, UOpPtr>> to_panel;
  std::vector<UOpPtr> panel_ranges, read_at;
  std::vector<int64_t> shape;
  auto axis = [&](const UOpPtr& fresh, const UOpPtr& read) {
    panel_ranges.push_back(fresh), read_at.push_back(read), shape.push_back(*trip(fresh));
  };
  for (size_t d = 0; d + 1 < outs.size(); ++d)
    if (uses(b, outs[d])) {
      to_panel.emplace_back(outs[d], make_range(*trip(outs[d]), next_id++));
      axis(to_panel.back().second, outs[d]);
    }
  const UOpPtr jb = make_range(*trip(j) / width, next_id++);
  axis(jb, j / width);
  for (size_t d = 1; d < red->src.size(); ++d) {
    to_panel.emplace_back(red->src[d], make_range(*trip(red->src[d]), next_id++));
    axis(to_panel.back().second, red->src[d]);
  }
  const UOpPtr jl = make_range(width, next_id++);
  axis(jl, j % width);
  to_panel.emplace_back(j, jb * width + jl);
  std::vector<UOpPtr> src{UOp::make(Op::CONTIGUOUS, b->dtype, {substitute_ranges(b, to_panel)})};
  src.insert(src.end(), panel_ranges.begin(), panel_ranges.end());
  const UOpPtr panel = UOp::make(Op::BUFFERIZE, b->dtype, std::move(src), shape);
  std::vector<UOpPtr> product = red->src[0]->src;
  product[b_src] = UOp::make(Op::LOAD, b->dtype, {make_index(panel, read_at, nullptr)});
  std::vector<UOpPtr> reduce = red->src;
  reduce[0] = red->src[0]->with_src(std::move(product));
  return substitute(value, {{red, red->with_src(std::move(reduce))}});
}

UOpPtr pack(const Match& m) {
  const UOpPtr& buf = m.root();
  const int64_t bytes = m.ctx<StageContext>().panel_bytes;
  const std::vector<UOpPtr> outs(buf->src.begin() + 1, buf->src.end());
  const auto reduces = own(buf->src[0], Op::REDUCE);
  if (bytes <= 0 || outs.empty() || reduces.size() != 1 || !trip(outs.back())) return nullptr;
  const UOpPtr& red = reduces[0];
  if (red->get<ReduceArg>().op != Op::ADD || !red->dtype.is_float() || red->dtype.lanes != 1 ||
      red->src.size() < 2 || red->src[0]->op != Op::MUL)
    return nullptr;
  int64_t k = 1;
  for (size_t d = 1; d < red->src.size(); ++d) {
    if (!trip(red->src[d])) return nullptr;
    k *= *trip(red->src[d]);
  }
  const int64_t n = *trip(outs.back()), width = bytes / red->dtype.itemsize();
  if (width < 2 || n % width != 0 || k * n * red->dtype.itemsize() < kMinBytes) return nullptr;
  for (size_t b_src : {size_t{1}, size_t{0}}) {
    const UOpPtr &a = red->src[0]->src[1 - b_src], &b = red->src[0]->src[b_src];
    const bool reduced =
        std::all_of(red->src.begin() + 1, red->src.end(), [&](const UOpPtr& r) { return uses(b, r); });
    const auto rows = reduced ? b_side(a, b, outs) : std::nullopt;
    if (rows && *rows >= kMinRows)
      return buf->with_src([&] {
        std::vector<UOpPtr> src = buf->src;
        src[0] = packed(buf->src[0], red, b_src, outs, width, next_axis_id(buf));
        return src;
      }());
  }
  return nullptr;
}

}  // namespace

const PatternMatcher& panel_packing() {
  static const PatternMatcher pm("panel_packing", {{UPat::ops({Op::BUFFERIZE}).allow_more_src(), pack}});
  return pm;
}

}  // namespace loom
