// Rangeify and kernel split, checked on what they generate: kernel count,
// loads, stores, reduces, and the buffers each kernel binds.
#include "ir/symbolic.hpp"
#include "schedule/kernel_split.hpp"
#include "schedule/rangeify.hpp"
#include "schedule/schedule.hpp"
#include "support/graph_builders.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace loom;

using namespace loom::gb;

TEST_CASE("(a*b+c).relu().exp() on [1024,1024] is one kernel: 3 loads, 1 store, no intermediate buffer") {
  Shape s{1024, 1024};
  UOpPtr a = input(1, s), b = input(2, s), c = input(3, s);
  UOpPtr zero =
      UOp::make(Op::EXPAND, DType::Float32,
                {UOp::make(Op::RESHAPE, DType::Float32, {const_float(DType::Float32, 0)}, Shape{1, 1})}, s);
  UOpPtr y = alu(Op::EXP2, {umax(a * b + c, zero)});
  FakeBuffers fb;
  Schedule sched = create_schedule({y}, fb.factory());
  REQUIRE(sched.kernels.size() == 1);
  const auto& k = sched.kernels[0];
  CHECK(count_op(k.ast, Op::LOAD) == 3);
  CHECK(count_op(k.ast, Op::STORE) == 1);
  CHECK(k.buffers.size() == 4);  // the output and the three inputs, nothing in between
  CHECK(k.buffers[1] == a->src[0]);
  CHECK(k.buffers[2] == b->src[0]);
  CHECK(k.buffers[3] == c->src[0]);
}

TEST_CASE("x / x.sum() computes the sum once: exactly one REDUCE over N across all kernels") {
  const int64_t n = 4096;
  UOpPtr x = input(1, {n});
  UOpPtr sum = UOp::make(Op::RESHAPE, DType::Float32, {reduce_axis(x, Op::ADD, {0})}, Shape{1});
  UOpPtr y = UOp::make(Op::FDIV, DType::Float32, {x, UOp::make(Op::EXPAND, DType::Float32, {sum}, Shape{n})});
  CHECK(realization_points({y}).size() == 1);          // the output; the reduce is only proposed:
  CHECK(count_op(rangeify({y}), Op::BUFFERIZE) == 2);  // it is broadcast, and buffer_removal keeps it
  FakeBuffers fb;
  Schedule sched = create_schedule({y}, fb.factory());
  REQUIRE(sched.kernels.size() == 2);
  size_t reduces = 0;
  for (const auto& k : sched.kernels) {
    reduces += count_op(k.ast, Op::REDUCE);
    for (const auto& node : toposort(k.ast))
      if (node->op == Op::REDUCE) CHECK(node->src[1]->src[0]->const_int() == n);
  }
  CHECK(reduces == 1);
  // The division kernel reads the sum's buffer, made by the first kernel.
  CHECK(sched.kernels[1].buffers.at(2) == sched.kernels[0].buffers.at(0));
}

TEST_CASE("a reduce followed by elementwise ops over the same range fuses into one kernel") {
  UOpPtr x = input(1, {8, 16});
  UOpPtr y = alu(Op::SQRT, {reduce_axis(x, Op::ADD, {1})});
  FakeBuffers fb;
  Schedule sched = create_schedule({y}, fb.factory());
  REQUIRE(sched.kernels.size() == 1);
  CHECK(count_op(sched.kernels[0].ast, Op::REDUCE) == 1);
}

TEST_CASE("the same computation on other buffers is the same kernel") {
  FakeBuffers fb;
  auto build = [&](int64_t id) {
    UOpPtr x = input(id, {6, 4});
    return create_schedule({UOp::make(Op::PERMUTE, DType::Float32, {x}, std::vector<int64_t>{1, 0})},
                           fb.factory());
  };
  Schedule s1 = build(1), s2 = build(2);
  REQUIRE(s1.kernels.size() == 1);
  CHECK(s1.kernels[0].ast == s2.kernels[0].ast);
  CHECK(s1.kernels[0].buffers[1] != s2.kernels[0].buffers[1]);
}

TEST_CASE("CONTIGUOUS and a realized input make buffers; a contiguous view needs no kernel") {
  UOpPtr x = input(1, {4, 4});
  CHECK(is_buffer_view(x));
  UOpPtr c = UOp::make(Op::CONTIGUOUS, DType::Float32,
                       {UOp::make(Op::PERMUTE, DType::Float32, {x}, std::vector<int64_t>{1, 0})});
  UOpPtr y = c * c;
  FakeBuffers fb;
  Schedule sched = create_schedule({y}, fb.factory());
  CHECK(sched.kernels.size() == 2);
  CHECK(count_op(sched.kernels[1].ast, Op::LOAD) == 1);  // c*c loads c once: equal loads are one node
}

TEST_CASE("pad then shrink back to the original: the validity guard simplifies away") {
  UOpPtr x = input(1, {4});
  UOpPtr p = UOp::make(Op::PAD, DType::Float32, {x}, std::vector<int64_t>{1, 1});
  UOpPtr s = UOp::make(Op::SHRINK, DType::Float32, {p}, std::vector<int64_t>{1, 5});
  FakeBuffers fb;
  Schedule sched = create_schedule({s}, fb.factory());
  REQUIRE(sched.kernels.size() == 1);
  CHECK(count_op(sched.kernels[0].ast, Op::WHERE) == 0);
  CHECK(count_op(sched.kernels[0].ast, Op::CMPLT) == 0);
}

// ---- the index math of each movement op, by pointer equality -------------------
namespace {

struct OneKernel {
  UOpPtr ast, end, store, load_index;
  UOpPtr range(size_t i) const { return end->src.at(i + 1); }  // output ranges, outermost first
};

// The single kernel of `y`, its END, STORE and the (single) LOAD's INDEX.
OneKernel one_kernel(const UOpPtr& y) {
  FakeBuffers fb;
  Schedule sched = create_schedule({y}, fb.factory());
  REQUIRE(sched.kernels.size() == 1);
  OneKernel k{sched.kernels[0].ast, nullptr, nullptr, nullptr};
  for (const auto& n : toposort(k.ast)) {
    if (n->op == Op::END) k.end = n;
    if (n->op == Op::STORE) k.store = n;
    if (n->op == Op::LOAD) k.load_index = n->src[0];
  }
  REQUIRE(k.store);
  REQUIRE(k.load_index);
  return k;
}

UOpPtr movement(Op op, const UOpPtr& x, std::vector<int64_t> arg) {
  return UOp::make(op, x->dtype, {x}, std::move(arg));
}

}  // namespace

TEST_CASE("permute reads the source at the swapped index") {
  OneKernel k = one_kernel(movement(Op::PERMUTE, input(1, {4, 6}), {1, 0}));  // out [6, 4]
  CHECK(k.range(0)->src[0]->const_int() == 6);
  CHECK(k.load_index->src[1] == simplify(k.range(1) * 6 + k.range(0)));
  CHECK(k.store->src[0]->src[1] == simplify(k.range(0) * 4 + k.range(1)));
}

TEST_CASE("flip reads n-1-i; shrink reads i+start; expand drops the broadcast index") {
  OneKernel f = one_kernel(movement(Op::FLIP, input(1, {2, 3}), {1}));
  CHECK(f.load_index->src[1] == simplify(f.range(0) * 3 + (const_int(DType::Int64, 2) - f.range(1))));
  OneKernel s = one_kernel(movement(Op::SHRINK, input(1, {4, 5}), {1, 3, 2, 5}));  // out [2, 3]
  CHECK(s.load_index->src[1] == simplify((s.range(0) + 1) * 5 + (s.range(1) + 2)));
  OneKernel e = one_kernel(movement(Op::EXPAND, input(1, {1, 3}), {4, 3}));
  CHECK(e.load_index->src[1] == e.range(1));
}

TEST_CASE("pad reads inside the source only, guarded by a validity condition") {
  OneKernel k = one_kernel(movement(Op::PAD, input(1, {4}), {1, 1}));  // out [6]
  const UOpPtr r = k.range(0);
  REQUIRE(k.load_index->src.size() == 3);
  CHECK(k.load_index->src[1] == simplify(r - 1));
  CHECK(k.load_index->src[2] == simplify(land(const_int(DType::Int64, 0) < r, r < 5)));
}

TEST_CASE("a reshape of a permute unravels the linear index by divmod; range_split then makes it two loops") {
  UOpPtr p = movement(Op::PERMUTE, input(1, {2, 3}), {1, 0});  // [3, 2]
  const UOpPtr y = movement(Op::RESHAPE, p, {6});
  const UOpPtr buffer = rangeify({y})->src[0];  // BUFFERIZE(CONTIGUOUS(LOAD(INDEX(x, i))), r)
  const UOpPtr r = buffer->src[1];
  CHECK(simplify(buffer->src[0]->src[0]->src[0]->src[1]) == simplify((r % 2) * 3 + r / 2));
  OneKernel k = one_kernel(y);  // r = r0*2 + r1: the load reads r1*3 + r0, no divmod left
  REQUIRE(k.end->src.size() == 3);
  CHECK(k.load_index->src[1] == simplify(k.range(1) * 3 + k.range(0)));
  CHECK(k.store->src[0]->src[1] == simplify(k.range(0) * 2 + k.range(1)));
}

TEST_CASE("a reduce loops over a fresh reduce range inside the output loop") {
  UOpPtr x = input(1, {4, 5});
  OneKernel k = one_kernel(reduce_axis(x, Op::ADD, {1}));
  UOpPtr reduce;
  for (const auto& n : toposort(k.ast))
    if (n->op == Op::REDUCE) reduce = n;
  REQUIRE(reduce);
  const UOpPtr rr = reduce->src[1];
  CHECK(rr->get<AxisArg>().kind == AxisKind::Reduce);
  CHECK(rr->src[0]->const_int() == 5);
  CHECK(k.load_index->src[1] == simplify(k.range(0) * 5 + rr));
}

TEST_CASE("s = x.sum(1); s + s.flip(0): the reduce is read at two indices, computed once in its own buffer") {
  UOpPtr x = input(1, {8, 16});
  UOpPtr s = UOp::make(Op::RESHAPE, DType::Float32, {reduce_axis(x, Op::ADD, {1})}, Shape{8});
  UOpPtr y = s + UOp::make(Op::FLIP, DType::Float32, {s}, std::vector<int64_t>{0});
  CHECK(count_op(rangeify({y}), Op::BUFFERIZE) == 2);  // proposed: its readers disagree
  FakeBuffers fb;
  Schedule sched = create_schedule({y}, fb.factory());
  REQUIRE(sched.kernels.size() == 2);
  size_t reduces = 0;
  for (const auto& k : sched.kernels) reduces += count_op(k.ast, Op::REDUCE);
  CHECK(reduces == 1);
  CHECK(count_op(sched.kernels[1].ast, Op::LOAD) == 2);  // s[i] and s[7 - i]
}

TEST_CASE("a cheap value read at two indices is computed twice in one kernel, not buffered") {
  UOpPtr x = input(1, {8});
  UOpPtr t = x * x;
  UOpPtr y = t + UOp::make(Op::FLIP, DType::Float32, {t}, std::vector<int64_t>{0});
  CHECK(count_op(rangeify({y}), Op::BUFFERIZE) == 2);  // proposed...
  FakeBuffers fb;
  Schedule sched = create_schedule({y}, fb.factory());
  CHECK(sched.kernels.size() == 1);  // ...and inlined by buffer_removal
}

TEST_CASE("the kernel-size cap: a 10,000-op chain is cut into kernels of at most 4,000 ops") {
  UOpPtr x = input(1, {64});
  const UOpPtr one = UOp::make(
      Op::EXPAND, DType::Float32,
      {UOp::make(Op::RESHAPE, DType::Float32, {const_float(DType::Float32, 1)}, Shape{1})}, Shape{64});
  std::vector<UOpPtr> chain;
  for (int i = 0; i < 10000; ++i) chain.push_back(x = x + one);
  const std::vector<UOpPtr> points = realization_points({x});
  // The target and two intermediates, 4,000 chain links apart (constants and movement cost nothing).
  REQUIRE(points.size() == 3);
  CHECK(points[0] == chain[3999]);
  CHECK(points[1] == chain[7999]);
  CHECK(points[2] == x);
  FakeBuffers fb;
  Schedule sched = create_schedule({x}, fb.factory());
  CHECK(sched.kernels.size() == 3);
  for (const auto& k : sched.kernels) CHECK(count_op(k.ast, Op::LOAD) == 1);
  // A graph under the cap keeps fusing into one kernel.
  CHECK(realization_points({chain[3999]}).size() == 1);
}

TEST_CASE("a scalar padded differently by two outputs: each kernel's load is gated by its own ranges only") {
  // Both outputs read the scalar at the same (empty) index, each valid over its own
  // kernel's range; OR-ing the two valids put one kernel's range into the other's load.
  const UOpPtr x = movement(Op::RESHAPE, input(1, {1}), {});
  const UOpPtr y1 = movement(Op::PAD, movement(Op::RESHAPE, cast(x, DType::Int64), {1}), {0, 2});  // [3]
  const UOpPtr y2 =
      movement(Op::PAD, movement(Op::PAD, movement(Op::RESHAPE, x, {1}), {0, 1}), {2, 2});  // [6]
  FakeBuffers fb;
  const Schedule sched = create_schedule({y1, y2}, fb.factory());
  REQUIRE(sched.kernels.size() >= 1);
  for (const auto& k : sched.kernels) {
    std::vector<UOpPtr> ended;
    for (const auto& n : toposort(k.ast))
      if (n->op == Op::END) ended.insert(ended.end(), n->src.begin() + 1, n->src.end());
    for (const auto& r : ranges_of(k.ast))
      CHECK_MESSAGE(
          std::find(ended.begin(), ended.end(), r) != ended.end(),
          "kernel " << k.name << " reads range " << r->get<AxisArg>().id << " that none of its loops ends");
  }
}

namespace {
// Elements of a tensor-level node, or of a BUFFERIZE (its arg is its shape).
int64_t elements(const UOpPtr& u) {
  int64_t n = 1;
  for (int64_t d : u->op == Op::BUFFERIZE ? u->get<Shape>() : *u->shape()) n *= d;
  return n;
}
// `x` [rows, cols] seen as [rows, 1, cols] broadcast to [rows, n, cols] (or, with
// `middle` false, as [rows, cols, 1] broadcast to [rows, cols, n]): a matmul's operand.
UOpPtr broadcast(const UOpPtr& x, int64_t n, bool middle) {
  const Shape& s = *x->shape();
  const Shape one = middle ? Shape{s[0], 1, s[1]} : Shape{s[0], s[1], 1};
  const Shape all = middle ? Shape{s[0], n, s[1]} : Shape{s[0], s[1], n};
  return movement(Op::EXPAND, movement(Op::RESHAPE, x, one), all);
}
}  // namespace

TEST_CASE(
    "a broadcast read at two indices (a matmul's operand and its weight's gradient) is buffered at its "
    "source's size, not the product's") {
  // h = (x @ w)^2 [B, H]; the next layer's product h @ w2 [B, H] and the gradient of w2,
  // h^T g [H, H], both read h broadcast over [B, H, H], at different indices.
  const int64_t b = 4, h = 8;
  const UOpPtr x = input(1, {b, h}), w = input(2, {h, h}), w2 = input(3, {h, h}), g = input(4, {b, h});
  const UOpPtr mm = reduce_axis(
      broadcast(x, h, false) * movement(Op::EXPAND, movement(Op::RESHAPE, w, {1, h, h}), {b, h, h}), Op::ADD,
      {1});
  const UOpPtr act = movement(Op::RESHAPE, mm, {b, h});
  const UOpPtr sq = act * act;
  const UOpPtr a = broadcast(sq, h, false);  // [B, H, H]: a[b, i, j] = h[b, i]
  const UOpPtr next =
      reduce_axis(a * movement(Op::EXPAND, movement(Op::RESHAPE, w2, {1, h, h}), {b, h, h}), Op::ADD, {1});
  const UOpPtr dw2 = reduce_axis(a * broadcast(g, h, true), Op::ADD, {0});
  for (const auto& u : toposort(rangeify({next, dw2})))
    if (u->op == Op::BUFFERIZE) CHECK(elements(u) < b * h * h);
  FakeBuffers fb;
  const Schedule sched = create_schedule({next, dw2}, fb.factory());
  for (const auto& k : sched.kernels)
    for (const auto& buf : k.buffers) CHECK(buf->get<std::vector<int64_t>>().at(1) <= h * h);
}

namespace {
constexpr int64_t kB = 4, kN = 6, kK = 5;
// y = sum_k (f(c1)[b, k] w[n, k] + f(c2)[b, k] w[n, k]), c1 and c2 each 3,000 ops of x1 and x2
// and f what a product does to its operand first: the second product takes the region past
// the kernel-size cap's 4,000 ops.
UOpPtr two_long_products(UOpPtr (*f)(const UOpPtr&)) {
  const UOpPtr one = movement(
      Op::EXPAND, UOp::make(Op::RESHAPE, DType::Float32, {const_float(DType::Float32, 1)}, Shape{1, 1}),
      {kB, kK});
  UOpPtr c1 = input(1, {kB, kK}), c2 = input(2, {kB, kK});
  for (int i = 0; i < 3000; ++i) {
    c1 = c1 + one;
    c2 = c2 + one;
  }
  const UOpPtr w = movement(Op::EXPAND, movement(Op::RESHAPE, input(3, {kN, kK}), {1, kN, kK}), {kB, kN, kK});
  return reduce_axis(broadcast(f(c1), kN, true) * w + broadcast(f(c2), kN, true) * w, Op::ADD, {2});
}
}  // namespace

TEST_CASE("the kernel-size cap ends a region below a broadcast product, where its operands are") {
  // The second product's buffer would be [B, N, K]; c2's is [B, K].
  const UOpPtr y = two_long_products([](const UOpPtr& c) { return c; });
  const std::vector<UOpPtr> points = realization_points({y});
  REQUIRE(points.size() == 2);
  CHECK(elements(points[0]) == kB * kK);  // c2, as the product reads it
  CHECK(toposort(points[0]).size() >= 3000);
  CHECK(points[1] == y);
}

TEST_CASE("the kernel-size cap ends a bfloat16 value widened for a product at the bfloat16 value") {
  // Each chain rounded to bfloat16 and widened back, as Autocast's operands are: c2's region
  // ends below the widening, so its buffer is bfloat16 (half the bytes, the factor the
  // pair-dot copies take) and the product widens it where it reads.
  const UOpPtr y = two_long_products([](const UOpPtr& c) {
    return UOp::make(Op::CAST, DType::Float32, {UOp::make(Op::CAST, DType::BFloat16, {c})});
  });
  const std::vector<UOpPtr> points = realization_points({y});
  REQUIRE(points.size() == 2);
  CHECK(points[0]->op == Op::CAST);
  CHECK(points[0]->dtype == DType::BFloat16);
  CHECK(points[0]->src[0]->op == Op::ADD);
  CHECK(elements(points[0]) == kB * kK);
  CHECK(points[1] == y);
}

TEST_CASE("the kernel-size cap walks a broadcast shared by many paths once (x + x, 80 times over)") {
  // Each doubling reads the broadcast before it twice: ending the region below it walked
  // every path, 2^80 of them (a fuzzed program that never finished scheduling), and the
  // sizes, counting a shared source once per use, passed int64's range.
  const int64_t n = 64;
  UOpPtr y = movement(Op::EXPAND, movement(Op::RESHAPE, input(1, {n}), {1, n}), {8, n});
  for (int i = 0; i < 80; ++i) y = y + y;
  const std::vector<UOpPtr> points = realization_points({y});
  CHECK(points.back() == y);
  CHECK(points.size() <= 80);
}

namespace {
// sum_k f(x)[k] * w[m, k] for m < 32, k < 64: f(x) broadcast over the product's rows.
UOpPtr matvec_of(const UOpPtr& fx) {
  const UOpPtr row = UOp::make(Op::RESHAPE, DType::Float32, {fx}, Shape{1, 64});
  const UOpPtr rows = UOp::make(Op::EXPAND, DType::Float32, {row}, Shape{32, 64});
  return reduce_axis(rows * input(2, {32, 64}), Op::ADD, {1});
}
size_t ops_in(const Schedule& s, Op op) {
  size_t n = 0;
  for (const auto& k : s.kernels) n += count_op(k.ast, op);
  return n;
}
}  // namespace

TEST_CASE("a transcendental or a costly chain broadcast into a reduce's loop is computed once, in a buffer") {
  const UOpPtr x = input(1, {64});
  FakeBuffers fb;
  SUBCASE("exp2(x) read by a matrix-vector product: fused, it would run once per row") {
    const Schedule s = create_schedule({matvec_of(alu(Op::EXP2, {x}))}, fb.factory());
    REQUIRE(s.kernels.size() == 2);
    CHECK(count_op(s.kernels.back().ast, Op::EXP2) == 0);
    CHECK(ops_in(s, Op::EXP2) == 1);
  }
  SUBCASE("x * x * x + x, three ops, likewise") {
    const Schedule s = create_schedule({matvec_of(x * x * x + x)}, fb.factory());
    REQUIRE(s.kernels.size() == 2);
    size_t float_muls = 0;  // the product's own; index arithmetic multiplies integers
    for (const auto& u : toposort(s.kernels.back().ast))
      float_muls += u->op == Op::MUL && u->dtype.is_float();
    CHECK(float_muls == 1);
  }
  SUBCASE("x * x + x, two ops, is cheaper recomputed than stored and loaded: one kernel") {
    CHECK(create_schedule({matvec_of(x * x + x)}, fb.factory()).kernels.size() == 1);
  }
  SUBCASE("exp2(x) broadcast along inner loops stays fused: codegen hoists it out of them") {
    const UOpPtr column = UOp::make(Op::RESHAPE, DType::Float32, {alu(Op::EXP2, {x})}, Shape{64, 1});
    const UOpPtr y = UOp::make(Op::EXPAND, DType::Float32, {column}, Shape{64, 32}) + input(2, {64, 32});
    CHECK(create_schedule({y}, fb.factory()).kernels.size() == 1);
  }
  SUBCASE("exp2(x) broadcast along an outer loop runs once per row unless stored: a buffer") {
    const UOpPtr row = UOp::make(Op::RESHAPE, DType::Float32, {alu(Op::EXP2, {x})}, Shape{1, 64});
    const UOpPtr y = UOp::make(Op::EXPAND, DType::Float32, {row}, Shape{32, 64}) + input(2, {32, 64});
    const Schedule s = create_schedule({y}, fb.factory());
    REQUIRE(s.kernels.size() == 2);
    CHECK(count_op(s.kernels.back().ast, Op::EXP2) == 0);
    // Two rows of 8 cost less than the buffer's store, load and kernel: fused.
    const UOpPtr short_row =
        UOp::make(Op::RESHAPE, DType::Float32, {alu(Op::EXP2, {input(3, {8})})}, Shape{1, 8});
    const UOpPtr two = UOp::make(Op::EXPAND, DType::Float32, {short_row}, Shape{2, 8}) + input(4, {2, 8});
    CHECK(create_schedule({two}, fb.factory()).kernels.size() == 1);
  }
}
