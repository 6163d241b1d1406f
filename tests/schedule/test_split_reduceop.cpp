// split_reduceop: a reduce with inputs/outputs >= 32768 and few outputs, or a
// large reduce over rows of a page or more, runs as two reduces through a
// contiguous buffer; guards refuse the rest.
#include "ir/dim_expr.hpp"
#include "schedule/split_reduceop.hpp"
#include "stage_testing.hpp"
#include "tests/support/l1_targets.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>

using namespace loom;
using loom::testing::apply_stage;

namespace {
// The blocks and guards below are sized by this machine's caches and cores.
const Target kMachine = loom::test::avx512_l2_1m_two_cores();
}  // namespace

TEST_CASE("[65536] -> [1]: reshape to (256 256), reduce the contiguous 256, buffer, reduce the 256 parts") {
  const UOpPtr after = apply_stage(split_reduceop(), R"(
%x = BUFFER f32 [(1 65536)]
%s = REDUCE_AXIS f32 %x [reduce ADD (0)]
)",
                                   kMachine, false);
  CHECK(after == parse_text(R"(
%x = BUFFER f32 [(1 65536)]
%parts = RESHAPE f32 %x [(256 256)]
%first = REDUCE_AXIS f32 %parts [reduce ADD (1)]
%kept = CONTIGUOUS f32 %first
%second = REDUCE_AXIS f32 %kept [reduce ADD (0)]
%s = RESHAPE f32 %second [(1)]
)"));
}

TEST_CASE("guards: a small ratio, many outputs, or an axis made by EXPAND is not split") {
  const char* small = "%x = BUFFER f32 [(1 16384)]\n%s = REDUCE_AXIS f32 %x [reduce ADD (0)]\n";
  CHECK(apply_stage(split_reduceop(), small, kMachine, false) == parse_text(small));
  const char* many = R"(
%x = BUFFER f32 [(1 33554432)]
%v = RESHAPE f32 %x [(512 65536)]
%s = REDUCE_AXIS f32 %v [reduce ADD (1)]
)";
  CHECK(apply_stage(split_reduceop(), many, kMachine, false) == parse_text(many));
  const char* expanded = R"(
%x = BUFFER f32 [(1 1)]
%e = EXPAND f32 %x [(65536)]
%s = REDUCE_AXIS f32 %e [reduce ADD (0)]
)";
  CHECK(apply_stage(split_reduceop(), expanded, kMachine, false) == parse_text(expanded));
}

TEST_CASE("[4096 1024] over axis 0 (rows of a page): blocks of 8 rows, then the 512 partial rows") {
  const UOpPtr after = apply_stage(split_reduceop(), R"(
%x = BUFFER f32 [(1 4194304)]
%v = RESHAPE f32 %x [(4096 1024)]
%s = REDUCE_AXIS f32 %v [reduce MAX (0)]
)",
                                   kMachine, false);
  // The second reduce reads 2 MB of partial rows: split again into blocks of 8 rows.
  CHECK(after == parse_text(R"(
%x = BUFFER f32 [(1 4194304)]
%v = RESHAPE f32 %x [(4096 1024)]
%rows = RESHAPE f32 %v [(512 8 1024)]
%first = REDUCE_AXIS f32 %rows [reduce MAX (1)]
%kept = CONTIGUOUS f32 %first
%partials = RESHAPE f32 %kept [(64 8 1 1024)]
%p1 = REDUCE_AXIS f32 %partials [reduce MAX (1)]
%pk = CONTIGUOUS f32 %p1
%p2 = REDUCE_AXIS f32 %pk [reduce MAX (0)]
%second = RESHAPE f32 %p2 [(1 1 1024)]
%r = RESHAPE f32 %second [(1 1024)]
)"));
}

TEST_CASE("a float sum over axis 0 of [4096 1024]: blocks of 64 rows, which the column-sum tiles stream") {
  const UOpPtr after = apply_stage(split_reduceop(), R"(
%x = BUFFER f32 [(1 4194304)]
%v = RESHAPE f32 %x [(4096 1024)]
%s = REDUCE_AXIS f32 %v [reduce ADD (0)]
)",
                                   kMachine, false);
  // The 64 partial rows (256 KB) are summed in one reduce; the blocks of 64 are not split again.
  CHECK(after == parse_text(R"(
%x = BUFFER f32 [(1 4194304)]
%v = RESHAPE f32 %x [(4096 1024)]
%rows = RESHAPE f32 %v [(64 64 1024)]
%first = REDUCE_AXIS f32 %rows [reduce ADD (1)]
%kept = CONTIGUOUS f32 %first
%second = REDUCE_AXIS f32 %kept [reduce ADD (0)]
%r = RESHAPE f32 %second [(1 1024)]
)"));
  // Rows that 64 does not divide: blocks of 8, as for other reduces.
  const UOpPtr odd = apply_stage(split_reduceop(), R"(
%x = BUFFER f32 [(1 4202496)]
%v = RESHAPE f32 %x [(4104 1024)]
%s = REDUCE_AXIS f32 %v [reduce ADD (0)]
)",
                                 kMachine, false);
  CHECK(odd == parse_text(R"(
%x = BUFFER f32 [(1 4202496)]
%v = RESHAPE f32 %x [(4104 1024)]
%rows = RESHAPE f32 %v [(513 8 1024)]
%first = REDUCE_AXIS f32 %rows [reduce ADD (1)]
%kept = CONTIGUOUS f32 %first
%second = REDUCE_AXIS f32 %kept [reduce ADD (0)]
%r = RESHAPE f32 %second [(1 1024)]
)"));
  // 64 rows or fewer: the column-sum tiles' own.
  const char* few = R"(
%x = BUFFER f32 [(1 1048576)]
%v = RESHAPE f32 %x [(64 16384)]
%s = REDUCE_AXIS f32 %v [reduce ADD (0)]
)";
  CHECK(apply_stage(split_reduceop(), few, kMachine, false) == parse_text(few));
}

TEST_CASE(
    "guards of the row blocks: short rows, a small input, a transposed or broadcast input stay one reduce") {
  const char* short_rows = R"(
%x = BUFFER f32 [(1 4194304)]
%v = RESHAPE f32 %x [(8192 512)]
%s = REDUCE_AXIS f32 %v [reduce ADD (0)]
)";
  CHECK(apply_stage(split_reduceop(), short_rows, kMachine, false) == parse_text(short_rows));
  const char* small = R"(
%x = BUFFER f32 [(1 262144)]
%v = RESHAPE f32 %x [(256 1024)]
%s = REDUCE_AXIS f32 %v [reduce ADD (0)]
)";
  CHECK(apply_stage(split_reduceop(), small, kMachine, false) == parse_text(small));
  const char* transposed = R"(
%x = BUFFER f32 [(1 4194304)]
%v = RESHAPE f32 %x [(1024 4096)]
%t = PERMUTE f32 %v [(1 0)]
%s = REDUCE_AXIS f32 %t [reduce ADD (0)]
)";
  CHECK(apply_stage(split_reduceop(), transposed, kMachine, false) == parse_text(transposed));
  const char* outer_product = R"(
%x = BUFFER f32 [(1 4096)]
%c = RESHAPE f32 %x [(4096 1)]
%ce = EXPAND f32 %c [(4096 1024)]
%y = BUFFER f32 [(2 1024)]
%r = RESHAPE f32 %y [(1 1024)]
%re = EXPAND f32 %r [(4096 1024)]
%m = MUL f32 %ce, %re
%s = REDUCE_AXIS f32 %m [reduce ADD (0)]
)";  // 16 MB in its shape, 20 KB read
  CHECK(apply_stage(split_reduceop(), outer_product, kMachine, false) == parse_text(outer_product));
}

TEST_CASE(
    "the row blocks leave a matmul's sum over rows alone (the weight gradient x^T dy): the tile walks it") {
  // [1024, 784]^T @ [1024, 512]: rows of 784 x 512 floats in the product's shape, 5 MB read
  const char* weight_gradient = R"(
%x = BUFFER f32 [(1 802816)]
%xv = RESHAPE f32 %x [(1024 784 1)]
%xe = EXPAND f32 %xv [(1024 784 512)]
%y = BUFFER f32 [(2 524288)]
%yv = RESHAPE f32 %y [(1024 1 512)]
%ye = EXPAND f32 %yv [(1024 784 512)]
%m = MUL f32 %xe, %ye
%s = REDUCE_AXIS f32 %m [reduce ADD (0)]
)";
  CHECK(apply_stage(split_reduceop(), weight_gradient, kMachine, false) == parse_text(weight_gradient));
  // the same rows times a row vector (both real along the rows and columns): still blocks
  const char* scaled_rows = R"(
%x = BUFFER f32 [(1 4194304)]
%v = RESHAPE f32 %x [(4096 1024)]
%y = BUFFER f32 [(2 1024)]
%r = RESHAPE f32 %y [(1 1024)]
%re = EXPAND f32 %r [(4096 1024)]
%m = MUL f32 %v, %re
%s = REDUCE_AXIS f32 %m [reduce ADD (0)]
)";
  CHECK(apply_stage(split_reduceop(), scaled_rows, kMachine, false) != parse_text(scaled_rows));
}

namespace {

// [m, k] @ [k, n] as the tensor front end writes it, up to the product %m (the reduce
// over its last axis k is the caller's): a's rows broadcast over b's columns times b^T.
std::string product_text(int64_t m, int64_t k, int64_t n) {
  const std::string b_side =
      m == 1 ? "%m = MUL f32 %ae, %bk\n"
             : fmt::format("%be = EXPAND f32 %bk [({} {} {})]\n%m = MUL f32 %ae, %be\n", m, n, k);
  return fmt::format(R"(
%a = BUFFER f32 [(1 {})]
%av = RESHAPE f32 %a [({} 1 {})]
%ae = EXPAND f32 %av [({} {} {})]
%b = BUFFER f32 [(2 {})]
%bv = RESHAPE f32 %b [({} {})]
%bt = PERMUTE f32 %bv [(1 0)]
%bk = RESHAPE f32 %bt [(1 {} {})]
)",
                     m * k, m, k, m, n, k, k * n, k, n, n, k) +
         b_side;
}

const char* kSumOverK = "%s = REDUCE_AXIS f32 %m [reduce ADD (2)]\n";

}  // namespace

TEST_CASE(
    "a GEMV [1,4096]@[4096,4096]: parts of 64 rows of b in front, then the sum of the 64 partial rows") {
  const std::string product = product_text(1, 4096, 4096);
  // Each part is 64 whole rows of b (1 MB, contiguous) and its partial row a contiguous
  // row of the buffer, so the threads share the parts; 64 x 4096 partial sums (1 MB) to add.
  const UOpPtr after = apply_stage(split_reduceop(), product + kSumOverK, kMachine, false);
  CHECK(after == parse_text(product + R"(
%parts = RESHAPE f32 %m [(1 4096 64 64)]
%moved = PERMUTE f32 %parts [(2 0 1 3)]
%first = REDUCE_AXIS f32 %moved [reduce ADD (3)]
%kept = CONTIGUOUS f32 %first
%second = REDUCE_AXIS f32 %kept [reduce ADD (0)]
%r = RESHAPE f32 %second [(1 4096 1)]
)"));
}

TEST_CASE("GEMV guards: a matmul, b contiguous along k, a small b, k not a multiple of 64 are not split") {
  const auto unchanged = [](const std::string& text) {
    return apply_stage(split_reduceop(), text, kMachine, false) == parse_text(text);
  };
  CHECK(unchanged(product_text(2, 4096, 4096) + kSumOverK));  // a row axis a reads, b not: the tile's
  CHECK(unchanged(product_text(1, 256, 1024) + kSumOverK));   // 1 MB of b: from the cores' caches
  CHECK(unchanged(product_text(1, 4100, 4096) + kSumOverK));  // no parts of 64 rows
  // [1, 4096] @ w^T with w [4096, 4096]: each row of w is read contiguously along k
  CHECK(unchanged(R"(
%a = BUFFER f32 [(1 4096)]
%av = RESHAPE f32 %a [(1 4096)]
%ae = EXPAND f32 %av [(4096 4096)]
%w = BUFFER f32 [(2 16777216)]
%wv = RESHAPE f32 %w [(4096 4096)]
%m = MUL f32 %ae, %wv
%s = REDUCE_AXIS f32 %m [reduce ADD (1)]
)"));
}

TEST_CASE("a symbolic batch: the per-channel sum over [B, 32, 28, 28] is split into one part per image") {
  const auto f32 = DType::Float32;
  auto channel_sums = [&](int64_t most) {
    const Dim batch(bind_var(make_var("B", 1, most), most));
    const UOpPtr x = UOp::make(Op::BUFFER, f32, {}, std::vector<int64_t>{1, most * 32 * 28 * 28});
    const UOpPtr images = UOp::make(Op::RESHAPE, f32, {x}, Shape{most, 32, 28, 28});
    const UOpPtr rows = UOp::make(Op::SHRINK, f32, {images}, Shape{0, batch, 0, 32, 0, 28, 0, 28});
    return std::pair{rows, UOp::make(Op::REDUCE_AXIS, f32, {rows}, ReduceArg{Op::ADD, {0, 2, 3}})};
  };
  const auto [rows, sum] = channel_sums(64);
  StageContext ctx{Flags{}, {}};
  ctx.target = kMachine;
  const UOpPtr after = graph_rewrite(sum, split_reduceop(), ctx);
  const Dim batch = (*rows->shape())[0];
  const UOpPtr parts = UOp::make(Op::RESHAPE, f32, {rows}, Shape{batch, 1, 32, 28, 28});
  const UOpPtr first = UOp::make(Op::REDUCE_AXIS, f32, {parts}, ReduceArg{Op::ADD, {1, 3, 4}});
  const UOpPtr second =
      UOp::make(Op::REDUCE_AXIS, f32, {UOp::make(Op::CONTIGUOUS, f32, {first})}, ReduceArg{Op::ADD, {0}});
  CHECK(after == UOp::make(Op::RESHAPE, f32, {second}, Shape{1, 32, 1, 1}));
  // A batch of at most 4 images has too few parts: the sum stays whole.
  const auto [few_rows, few] = channel_sums(4);
  CHECK(graph_rewrite(few, split_reduceop(), ctx) == few);
}
