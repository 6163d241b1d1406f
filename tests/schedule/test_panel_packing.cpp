// panel_packing: the b operand of a matmul that many rows read is copied into
// panels as wide as a register tile, by a kernel of its own, before the matmul.
#include "schedule/panel_packing.hpp"
#include "schedule/schedule.hpp"
#include "support/graph_builders.hpp"
#include "support/l1_targets.hpp"

#include "ir/buffer_access.hpp"
#include "ir/dim_expr.hpp"

#include "ir/flags.hpp"
#include "ir/target.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace loom;
using namespace loom::gb;

namespace {

// AVX2's tile: 2 vectors of 8 float32 lanes, 64 bytes (16 floats) a panel row.
constexpr int64_t kPanelBytes = 64;
constexpr int64_t kWidth = kPanelBytes / 4;
// The rows of k a tile sums per block (codegen's kc).
constexpr int64_t kPanelDepth = 256;

// The machine these expectations were derived for: AVX2's tile (above), and an L1 of 32 KiB,
// 8 ways of 64-byte lines (64 sets), so b's 256 x 64-byte slice takes 4 ways of every set
// and a's rows 4 more.
Target l1_32k_8way() { return test::avx2_l1_32k_8way(); }

UOpPtr movement(Op op, const UOpPtr& x, Shape shape) {
  return UOp::make(op, x->dtype, {x}, std::move(shape));
}

// [batch.., m, k] @ [batch.., k, n] as the front end builds it: a broadcast
// product over [batch.., m, k, n] summed over k.
UOpPtr matmul(const UOpPtr& a, const UOpPtr& b, Shape batch, int64_t m, int64_t k, int64_t n) {
  auto shape = [&](std::initializer_list<Dim> tail) {
    Shape s = batch;
    s.insert(s.end(), tail);
    return s;
  };
  const UOpPtr x = movement(Op::EXPAND, movement(Op::RESHAPE, a, shape({m, k, 1})), shape({m, k, n}));
  const UOpPtr y = movement(Op::EXPAND, movement(Op::RESHAPE, b, shape({1, k, n})), shape({m, k, n}));
  const auto axis = static_cast<int64_t>(batch.size()) + 1;
  return movement(Op::RESHAPE, reduce_axis(x * y, Op::ADD, {axis}), shape({m, n}));
}

Schedule schedule(Shape batch, int64_t m, int64_t k, int64_t n, int64_t panel_bytes = kPanelBytes,
                  int64_t panel_rows = 0) {
  Shape sa = batch, sb = batch;
  sa.insert(sa.end(), {m, k});
  sb.insert(sb.end(), {k, n});
  FakeBuffers fb;
  return create_schedule({matmul(input(1, sa), input(2, sb), batch, m, k, n)}, fb.factory(), {},
                         ScheduleOptions{panel_bytes, panel_rows, kPanelDepth, l1_32k_8way()});
}

UOpPtr only_reduce_range(const UOpPtr& ast) {
  UOpPtr r;
  for (const auto& u : ranges_of(ast))
    if (u->get<AxisArg>().kind == AxisKind::Reduce) {
      REQUIRE_FALSE(r);
      r = u;
    }
  REQUIRE(r);
  return r;
}

// The loads of the slot bound to `buffer` in kernel `k`.
std::vector<UOpPtr> loads_of(const ScheduledKernel& k, const UOpPtr& buffer) {
  std::vector<UOpPtr> out;
  for (const auto& u : toposort(k.ast))
    if (u->op == Op::LOAD && u->src[0]->src[0]->op == Op::DEFINE_GLOBAL &&
        k.buffers.at(static_cast<size_t>(u->src[0]->src[0]->get<int64_t>())) == buffer)
      out.push_back(u);
  return out;
}

int64_t buffer_elements(const UOpPtr& buffer) { return buffer->get<std::vector<int64_t>>().at(1); }

// Two kernels: the copy of b into panels, then the matmul reading them one
// panel row (W floats, contiguous) per step of k, unguarded: the last panel is
// whole in the copy (zeros past n), so the tile's loads need no mask.
void check_packed(const Schedule& s, int64_t batch, int64_t k, int64_t n) {
  REQUIRE(s.kernels.size() == 2);  // the panel copy is a kernel of its own
  const ScheduledKernel &copy = s.kernels[0], &mm = s.kernels[1];
  const int64_t panels = (n + kWidth - 1) / kWidth;
  CHECK(count_op(copy.ast, Op::REDUCE) == 0);
  CHECK(buffer_elements(copy.buffers[0]) == batch * k * panels * kWidth);
  const auto panel_reads = loads_of(mm, copy.buffers[0]);
  REQUIRE(panel_reads.size() == 1);
  CHECK(address_stride(panel_reads[0]->src[0], only_reduce_range(mm.ast)) == kWidth);
  CHECK_FALSE(valid_of(panel_reads[0]->src[0]));
  CHECK(loads_of(mm, input(2, {batch * k * n})).empty());  // b itself only through its panels
}

}  // namespace

TEST_CASE("a matmul whose b many rows read is two kernels: b copied into panels, then the product") {
  SUBCASE("[64, 128] @ [128, 64]: 64 rows, b 32 KiB") { check_packed(schedule({}, 64, 128, 64), 1, 128, 64); }
  SUBCASE("odd rows and k: [37, 301] @ [301, 48]") { check_packed(schedule({}, 37, 301, 48), 1, 301, 48); }
  SUBCASE("batched: [3, 40, 300] @ [3, 300, 32], one set of panels per batch") {
    check_packed(schedule({3}, 40, 300, 32), 3, 300, 32);
  }
  SUBCASE("the copy writes panel by panel: P[jb, k, jl] = b[k, jb*W + jl]") {
    const Schedule s = schedule({}, 64, 128, 64);
    REQUIRE(s.kernels.size() == 2);
    const UOpPtr store = s.kernels[0].ast->src.at(0)->src.at(0);
    const UOpPtr end = s.kernels[0].ast->src[0];
    REQUIRE(end->src.size() == 4);  // jb, k, jl
    const UOpPtr &jb = end->src[1], &k = end->src[2], &jl = end->src[3];
    CHECK(jb->src[0]->const_int() == 64 / kWidth);
    CHECK(jl->src[0]->const_int() == kWidth);
    const UOpPtr read = loads_of(s.kernels[0], input(2, {128 * 64}))[0]->src[0];
    CHECK(address_stride(store->src[0], jl) == 1);  // the panel row, contiguous
    CHECK(address_stride(store->src[0], k) == kWidth);
    CHECK(address_stride(store->src[0], jb) == 128 * kWidth);
    CHECK(address_stride(read, jl) == 1);  // from b's row k, columns jb*W + jl
    CHECK(address_stride(read, k) == 64);
    CHECK(address_stride(read, jb) == kWidth);
  }
}

TEST_CASE("columns that do not fill whole panels are padded to whole ones, the product's store guarded") {
  SUBCASE("[64, 128] @ [128, 72]: five panels, the last holding 8 columns and 8 zeros") {
    check_packed(schedule({}, 64, 128, 72), 1, 128, 72);
  }
  SUBCASE("batched, odd k and n: [3, 40, 301] @ [3, 301, 33]") {
    check_packed(schedule({3}, 40, 301, 33), 3, 301, 33);
  }
  SUBCASE("the copy reads b where jb*W + jl < n and writes every panel row whole") {
    const Schedule s = schedule({}, 64, 128, 72);
    REQUIRE(s.kernels.size() == 2);
    const ScheduledKernel& copy = s.kernels[0];
    const UOpPtr end = copy.ast->src.at(0);
    REQUIRE(end->src.size() == 4);  // jb, k, jl
    CHECK(end->src[1]->src[0]->const_int() == 5);
    CHECK_FALSE(valid_of(end->src[0]->src.at(0)));  // the padding is written: zeros
    const auto reads = loads_of(copy, input(2, {128 * 72}));
    REQUIRE(reads.size() == 1);
    CHECK(valid_of(reads[0]->src[0]));  // past n: no read of b
  }
  SUBCASE("the product runs over whole panels, j = jo*W + ji, and stores where j < n") {
    const Schedule s = schedule({}, 64, 128, 72);
    REQUIRE(s.kernels.size() == 2);
    const UOpPtr end = s.kernels[1].ast->src.at(0);
    REQUIRE(end->src.size() == 4);  // i, jo, ji: range_split split the padded columns
    CHECK(end->src[2]->src[0]->const_int() == 5);
    CHECK(end->src[3]->src[0]->const_int() == kWidth);
    const UOpPtr store_at = end->src[0]->src.at(0);
    CHECK(address_stride(store_at, end->src[3]) == 1);
    CHECK(address_stride(store_at, end->src[1]) == 72);  // into the [64, 72] output itself
    CHECK(valid_of(store_at));
  }
}

TEST_CASE("no copy where it cannot pay, or with no tile to feed: one kernel") {
  SUBCASE("fewer than 32 rows read b") { CHECK(schedule({}, 31, 128, 64).kernels.size() == 1); }
  SUBCASE("b within L1 (16 KiB)") { CHECK(schedule({}, 64, 64, 64).kernels.size() == 1); }
  SUBCASE("columns narrower than one panel: padding would more than double them") {
    CHECK(schedule({}, 64, 1024, 12).kernels.size() == 1);
  }
  SUBCASE("one row: a GEMV reads b once") { CHECK(schedule({}, 1, 4096, 256).kernels.size() == 1); }
  SUBCASE("no register tiles (panel width 0: LOOM_NOOPT)") {
    CHECK(schedule({}, 64, 128, 64, 0).kernels.size() == 1);
  }
  SUBCASE("LOOM_DISABLE=panel_packing") {
    const uint64_t off = detail::push_flag_overrides({{"LOOM_DISABLE", "panel_packing"}});
    CHECK(schedule({}, 64, 128, 64).kernels.size() == 1);
    detail::pop_flag_overrides(off);
  }
}

TEST_CASE("a whose tile rows crowd one set of L1 goes in row panels too: three kernels") {
  const int64_t kRows = 6;  // AVX2's tile: 6 rows
  auto check = [&](int64_t batch, int64_t m, int64_t k, int64_t n) {
    const Schedule s = schedule(batch > 1 ? Shape{batch} : Shape{}, m, k, n, kPanelBytes, kRows);
    REQUIRE(s.kernels.size() == 3);  // a's copy, b's copy, the product
    const ScheduledKernel& mm = s.kernels.back();
    const int64_t panels = (m + kRows - 1) / kRows;
    const auto a_copy = std::find_if(s.kernels.begin(), s.kernels.end() - 1, [&](const ScheduledKernel& c) {
      return buffer_elements(c.buffers[0]) == batch * panels * kRows * k;
    });
    REQUIRE(a_copy != s.kernels.end() - 1);
    const auto reads = loads_of(mm, a_copy->buffers[0]);
    REQUIRE(reads.size() == 1);
    CHECK(address_stride(reads[0]->src[0], only_reduce_range(mm.ast)) == kRows);  // 6 floats a step of k
    CHECK(loads_of(mm, input(1, {batch * m * k})).empty());  // a itself only through its panels
    // the copy: P[io, k, ii] = a[min(io*6 + ii, m - 1), k], contiguous along ii
    const UOpPtr end = a_copy->ast->src.at(0), store = end->src.at(0);
    const UOpPtr &io = end->src.at(end->src.size() - 3), &kk = end->src.at(end->src.size() - 2),
                 &ii = end->src.back();
    CHECK(io->src[0]->const_int() == panels);
    CHECK(ii->src[0]->const_int() == kRows);
    CHECK(address_stride(store->src[0], ii) == 1);
    CHECK(address_stride(store->src[0], kk) == kRows);
    CHECK(address_stride(store->src[0], io) == kRows * k);
  };
  SUBCASE("[64, 1024] @ [1024, 64]: rows 4 KiB apart, all six in one set") { check(1, 64, 1024, 64); }
  SUBCASE("37 rows: the last panel repeats the last row") { check(1, 37, 1024, 64); }
  SUBCASE("batched, k = 2048") { check(2, 40, 2048, 64); }
  SUBCASE("rows 2 KiB apart (k = 512): three to a set, within the ways b's panel leaves: no copy of a") {
    CHECK(schedule({}, 64, 512, 64, kPanelBytes, kRows).kernels.size() == 2);
  }
  SUBCASE("fewer than 4 panels of b: a is read too few times") {
    CHECK(schedule({}, 64, 1024, 48, kPanelBytes, kRows).kernels.size() == 2);
  }
  SUBCASE("no row panels asked for (panel rows 0)") { CHECK(schedule({}, 64, 1024, 64).kernels.size() == 2); }
}

namespace {

Schedule schedule_of(const UOpPtr& a, const UOpPtr& b, int64_t m, int64_t k, int64_t n, int64_t panel_rows) {
  FakeBuffers fb;
  return create_schedule({matmul(a, b, {}, m, k, n)}, fb.factory(), {},
                         ScheduleOptions{kPanelBytes, panel_rows, kPanelDepth, l1_32k_8way()});
}

}  // namespace

TEST_CASE("a transposed b (q k^T) is packed too: its panels read one row of b per panel column") {
  const UOpPtr bt = movement(Op::PERMUTE, input(2, {64, 128}), {1, 0});  // b = (b^T stored [n, k])^T
  const Schedule s = schedule_of(input(1, {64, 128}), bt, 64, 128, 64, 0);
  REQUIRE(s.kernels.size() == 2);
  const ScheduledKernel &copy = s.kernels[0], &mm = s.kernels[1];
  const auto reads = loads_of(mm, copy.buffers[0]);
  REQUIRE(reads.size() == 1);
  CHECK(address_stride(reads[0]->src[0], only_reduce_range(mm.ast)) == kWidth);
  CHECK(loads_of(mm, input(2, {64 * 128})).empty());
  const UOpPtr end = copy.ast->src.at(0);
  const UOpPtr read = loads_of(copy, input(2, {64 * 128}))[0]->src[0];
  CHECK(address_stride(read, end->src.at(2)) == 1);    // k: along a stored row of b^T
  CHECK(address_stride(read, end->src.at(3)) == 128);  // the panel's columns: rows of b^T
}

TEST_CASE("a costly a (a softmax's exp per element) is computed once, row-major, by a copy of its own") {
  const UOpPtr x = input(1, {64, 128});
  const UOpPtr a = alu(Op::EXP2, {x * x + x});  // 3 float ops per element
  SUBCASE("with row panels asked for: a's copy, b's copy, the product") {
    const Schedule s = schedule_of(a, input(2, {128, 64}), 64, 128, 64, 6);
    REQUIRE(s.kernels.size() == 3);
    const ScheduledKernel& mm = s.kernels.back();
    CHECK(count_op(mm.ast, Op::EXP2) == 0);  // the product reads a's values
    const auto a_copy = std::find_if(s.kernels.begin(), s.kernels.end() - 1,
                                     [](const ScheduledKernel& c) { return count_op(c.ast, Op::EXP2) == 1; });
    REQUIRE(a_copy != s.kernels.end() - 1);
    CHECK(buffer_elements(a_copy->buffers[0]) == 64 * 128);  // row-major, unpadded: rows 512 B apart
    const auto reads = loads_of(mm, a_copy->buffers[0]);
    REQUIRE(reads.size() == 1);
    CHECK(address_stride(reads[0]->src[0], only_reduce_range(mm.ast)) == 1);
  }
  SUBCASE("without row panels: a still has a buffer of its own, the product no exp") {
    // Fused, the exp would run inside the product's reduce loop, once per column of b
    // (rangeify's costly_under_broadcast; docs/pipeline.md, "What fusion may recompute").
    const Schedule s = schedule_of(a, input(2, {128, 64}), 64, 128, 64, 0);
    REQUIRE(s.kernels.size() >= 2);
    CHECK(count_op(s.kernels.back().ast, Op::EXP2) == 0);
    int exps = 0;
    for (const ScheduledKernel& k : s.kernels) exps += count_op(k.ast, Op::EXP2);
    CHECK(exps == 1);
  }
}

TEST_CASE("rows of a symbolic count (a batch of B rows) still get b's panels, planned for B's bound") {
  const auto f32 = DType::Float32;
  const Dim rows(bind_var(make_var("B", 1, 64), 40));
  const UOpPtr whole = movement(Op::RESHAPE, input(1, {64 * 128}), Shape{64, 128});
  const UOpPtr a = UOp::make(Op::SHRINK, f32, {whole}, Shape{0, rows, 0, 128});
  const UOpPtr b = movement(Op::RESHAPE, input(2, {128 * 64}), Shape{128, 64});
  const UOpPtr x = movement(Op::EXPAND, movement(Op::RESHAPE, a, Shape{rows, 128, 1}), Shape{rows, 128, 64});
  const UOpPtr y = movement(Op::EXPAND, movement(Op::RESHAPE, b, Shape{1, 128, 64}), Shape{rows, 128, 64});
  const UOpPtr product = movement(Op::RESHAPE, reduce_axis(x * y, Op::ADD, {1}), Shape{rows, 64});
  FakeBuffers fb;
  const Schedule s = create_schedule({product}, fb.factory(), {},
                                     ScheduleOptions{kPanelBytes, 0, kPanelDepth, l1_32k_8way()});
  check_packed(s, 1, 128, 64);
  SUBCASE("at most 16 rows read b too few times for its copy to pay") {
    const Dim few(bind_var(make_var("B", 1, 16), 8));
    const UOpPtr a16 = UOp::make(Op::SHRINK, f32, {whole}, Shape{0, few, 0, 128});
    const UOpPtr x16 =
        movement(Op::EXPAND, movement(Op::RESHAPE, a16, Shape{few, 128, 1}), Shape{few, 128, 64});
    const UOpPtr y16 = movement(Op::EXPAND, movement(Op::RESHAPE, b, Shape{1, 128, 64}), Shape{few, 128, 64});
    const UOpPtr p16 = movement(Op::RESHAPE, reduce_axis(x16 * y16, Op::ADD, {1}), Shape{few, 64});
    FakeBuffers fb16;
    CHECK(create_schedule({p16}, fb16.factory(), {},
                          ScheduleOptions{kPanelBytes, 0, kPanelDepth, l1_32k_8way()})
              .kernels.size() == 1);
  }
}

TEST_CASE("products that each copy their a into row panels keep their copies' ranges apart") {
  // The MLA example's shape with k = 1024: q = x wq, c = x wd, k = c wu, then q k^T. Each a
  // with rows 4 KiB apart crowds one set of L1 and gets row panels. The copies' new ranges
  // take ids from the whole graph: ids counted from each product alone made one RANGE node
  // of two kernels' ranges, and kernel_split found a cycle (on a host with an 8-way L1d).
  FakeBuffers fb;
  const UOpPtr x = input(1, {64, 1024}), wq = input(2, {1024, 64}), wd = input(3, {1024, 1024}),
               wu = input(4, {1024, 64});
  const UOpPtr q = matmul(x, wq, {}, 64, 1024, 64), c = matmul(x, wd, {}, 64, 1024, 1024);
  const UOpPtr k = matmul(c, wu, {}, 64, 1024, 64);
  const UOpPtr out = matmul(q, movement(Op::PERMUTE, k, {1, 0}), {}, 64, 64, 64);
  const Schedule s =
      create_schedule({out}, fb.factory(), {}, ScheduleOptions{kPanelBytes, 6, kPanelDepth, l1_32k_8way()});
  int a_copies = 0;
  for (const ScheduledKernel& kernel : s.kernels)
    a_copies += buffer_elements(kernel.buffers[0]) == 11 * 6 * 1024;  // [11 panels, k, 6 rows]
  CHECK(a_copies == 3);                                               // x for each of its two products, and c
  CHECK(s.kernels.size() == 4 + 3 + 4);  // the products, the copies of a, the copies of b
}

namespace {

// AVX-512's tile: 2 vectors of 16 float32 lanes a step of k, 6 rows; 4 vectors at most in a
// tile of 6 rows (Target::tile_wide_col_vectors), so a product 64 columns wide is one panel.
Schedule schedule_v4(const UOpPtr& a, const UOpPtr& b, int64_t m, int64_t k, int64_t n) {
  Target t = target_named("x86-64-v4");
  t.l1d_bytes = 48 << 10;
  t.l1d_ways = 12;
  FakeBuffers fb;
  return create_schedule({matmul(a, b, {}, m, k, n)}, fb.factory(), {},
                         ScheduleOptions{2 * t.vector_bytes, 0, kPanelDepth, t});
}

}  // namespace

TEST_CASE("a product as narrow as the widest tile is one panel wide, so its tile reads a once") {
  REQUIRE(target_named("x86-64-v4").tile_wide_col_vectors() == 4);
  SUBCASE("b stored [k, 64] is that panel already: no copy, the product reads b where it lies") {
    const Schedule s = schedule_v4(input(1, {64, 1024}), input(2, {1024, 64}), 64, 1024, 64);
    REQUIRE(s.kernels.size() == 1);
    const auto reads = loads_of(s.kernels[0], input(2, {1024 * 64}));
    REQUIRE(reads.size() == 1);
    CHECK(address_stride(reads[0]->src[0], only_reduce_range(s.kernels[0].ast)) == 64);
  }
  SUBCASE("a transposed b (attention's k^T at d = 64) is copied into one panel of 64 columns") {
    const UOpPtr bt = movement(Op::PERMUTE, input(2, {64, 1024}), {1, 0});
    const Schedule s = schedule_v4(input(1, {64, 1024}), bt, 64, 1024, 64);
    REQUIRE(s.kernels.size() == 2);
    const ScheduledKernel &copy = s.kernels[0], &mm = s.kernels[1];
    CHECK(buffer_elements(copy.buffers[0]) == 1024 * 64);
    const auto reads = loads_of(mm, copy.buffers[0]);
    REQUIRE(reads.size() == 1);
    CHECK(address_stride(reads[0]->src[0], only_reduce_range(mm.ast)) == 64);
  }
  SUBCASE("80 columns are 5 vectors, more than a tile of 6 rows holds: panels of 32") {
    const Schedule s = schedule_v4(input(1, {64, 1024}), input(2, {1024, 80}), 64, 1024, 80);
    REQUIRE(s.kernels.size() == 2);
    const ScheduledKernel &copy = s.kernels[0], &mm = s.kernels[1];
    CHECK(buffer_elements(copy.buffers[0]) == 1024 * 3 * 32);  // padded to 3 panels
    const auto reads = loads_of(mm, copy.buffers[0]);
    REQUIRE(reads.size() == 1);
    CHECK(address_stride(reads[0]->src[0], only_reduce_range(mm.ast)) == 32);
  }
}
