// The open ranges of a node (UOp::ranges()): computed once, at construction.
// A node whose sources agree on one set shares that set's storage, so a long
// chain of index arithmetic over the same loops holds one vector, not one each.
#include "ir/infer.hpp"

#include <algorithm>
#include <iterator>

namespace loom {

OpenRanges::OpenRanges(std::vector<Item> sorted)
    : v_(sorted.empty() ? nullptr : std::make_shared<const std::vector<Item>>(std::move(sorted))) {}

bool OpenRanges::before(const UOp* a, const UOp* b) {
  const int64_t ia = a->get<AxisArg>().id, ib = b->get<AxisArg>().id;
  if (ia != ib) return ia < ib;
  if (a->hash() != b->hash()) return a->hash() < b->hash();
  return a < b;
}

bool OpenRanges::contains(const UOp* range) const {
  if (empty() || range->op != Op::RANGE) return false;
  return std::binary_search(begin(), end(), range, before);
}

bool OpenRanges::intersects(const OpenRanges& other) const {
  if (empty() || other.empty()) return false;
  if (v_ == other.v_) return true;
  const Item *a = begin(), *b = other.begin();
  while (a != end() && b != other.end()) {
    if (*a == *b) return true;
    if (before(*a, *b))
      ++a;
    else
      ++b;
  }
  return false;
}

bool OpenRanges::has_kind(AxisKind kind) const {
  return std::any_of(begin(), end(), [kind](const UOp* r) { return r->get<AxisArg>().kind == kind; });
}

bool operator==(const OpenRanges& a, const OpenRanges& b) {
  return a.v_ == b.v_ || std::equal(a.begin(), a.end(), b.begin(), b.end());
}

namespace {
bool closes_ranges(Op op) { return op == Op::REDUCE || op == Op::END || op == Op::BUFFERIZE; }
}  // namespace

OpenRanges infer_open_ranges(Op op, const std::vector<UOpPtr>& src, const UOp* self) {
  // The union of the sources' sets; shared when one source's set holds them all.
  const OpenRanges* widest = nullptr;
  bool one_set = true;
  for (const auto& s : src) {
    const OpenRanges& r = s->ranges();
    if (r.empty()) continue;
    if (!widest || r.size() > widest->size()) {
      if (widest && !std::includes(r.begin(), r.end(), widest->begin(), widest->end(), OpenRanges::before))
        one_set = false;
      widest = &r;
    } else if (!(r == *widest) &&
               !std::includes(widest->begin(), widest->end(), r.begin(), r.end(), OpenRanges::before)) {
      one_set = false;
    }
  }
  const bool closes = closes_ranges(op) && src.size() > 1;
  if (op != Op::RANGE && !closes && (!widest || one_set)) return widest ? *widest : OpenRanges{};
  std::vector<const UOp*> all;
  for (const auto& s : src) {
    std::vector<const UOp*> merged;
    std::set_union(all.begin(), all.end(), s->ranges().begin(), s->ranges().end(), std::back_inserter(merged),
                   OpenRanges::before);
    all = std::move(merged);
  }
  // A listed expression (before range_flatten makes it its ranges) closes all of its ranges.
  if (closes) {
    for (size_t i = 1; i < src.size(); ++i) {
      if (src[i]->op == Op::RANGE)
        std::erase(all, src[i].get());
      else
        for (const UOp* r : src[i]->ranges()) std::erase(all, r);
    }
  }
  if (op == Op::RANGE) all.insert(std::upper_bound(all.begin(), all.end(), self, OpenRanges::before), self);
  return OpenRanges(std::move(all));
}

}  // namespace loom
