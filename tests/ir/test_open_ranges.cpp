// UOp::ranges(): the ranges open at a node, cached at construction. REDUCE, END
// and BUFFERIZE close the ranges they list; index math carries its ranges up.
#include "ir/text.hpp"
#include "support/kernel_builders.hpp"

#include <doctest/doctest.h>

#include <vector>

using namespace loom;

namespace {
std::vector<const UOp*> items(const OpenRanges& r) { return {r.begin(), r.end()}; }
}  // namespace

TEST_CASE("a RANGE is open in itself; arithmetic over ranges has their union, sorted by axis id") {
  UOpPtr r0 = make_range(4, 0), r1 = make_range(8, 1, AxisKind::Reduce);
  CHECK(items(r0->ranges()) == std::vector<const UOp*>{r0.get()});
  CHECK(items((r1 * 4 + r0)->ranges()) == std::vector<const UOp*>{r0.get(), r1.get()});
  CHECK(kb::i64(3)->ranges().empty());
  CHECK((r0 + 1)->ranges().contains(r0));
  CHECK_FALSE((r0 + 1)->ranges().contains(r1));
  CHECK((r1 * 2)->ranges().has_kind(AxisKind::Reduce));
  CHECK_FALSE((r0 * 2)->ranges().has_kind(AxisKind::Reduce));
  CHECK((r0 + r1)->ranges().intersects(r1->ranges()));
  CHECK_FALSE(r0->ranges().intersects(r1->ranges()));
}

TEST_CASE("REDUCE, END and BUFFERIZE close the ranges they list; INDEX(BUFFERIZE) has its index's ranges") {
  const UOpPtr g = kb::global(1, DType::Float32);
  UOpPtr r0 = make_range(4, 0), r1 = make_range(8, 1, AxisKind::Reduce), r2 = make_range(4, 2);
  UOpPtr value = kb::load(kb::index(g, r0 * 8 + r1));
  UOpPtr red = kb::reduce(Op::ADD, value, {r1});
  CHECK(items(red->ranges()) == std::vector<const UOp*>{r0.get()});
  CHECK(kb::end(kb::store(kb::index(kb::global(0, DType::Float32), r0), red), {r0})->ranges().empty());
  UOpPtr buf = UOp::make(Op::BUFFERIZE, DType::Float32, {red, r0}, Shape{4});
  CHECK(buf->ranges().empty());
  UOpPtr read = UOp::make(Op::INDEX, DType::Float32.ptr_to(), {buf, kb::i64(3) - r2});
  CHECK(items(read->ranges()) == std::vector<const UOp*>{r2.get()});
}

TEST_CASE("an END listing an expression (before range_flatten) closes every range in it") {
  UOpPtr r0 = make_range(3, 0), r1 = make_range(4, 1);
  UOpPtr st =
      kb::store(kb::index(kb::global(0, DType::Float32), r0 * 4 + r1), const_float(DType::Float32, 1));
  CHECK(UOp::make(Op::END, DType::Float32, {st, r0 * 4 + r1})->ranges().empty());
}

TEST_CASE("the cached set is the same after a round trip through the text form") {
  UOpPtr r0 = make_range(4, 0), r1 = make_range(8, 1);
  UOpPtr e = (r0 * 8 + r1) % 3;
  UOpPtr back = parse_text(to_text(e));
  REQUIRE(back == e);
  CHECK(back->ranges() == e->ranges());
}
