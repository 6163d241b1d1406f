// buffer_removal, rule by rule: each Before graph (loom's text form) goes in,
// the After graph is compared by pointer; each keep rule is shown refusing.
#include "schedule/buffer_removal.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>

using namespace loom;
using loom::testing::apply_stage;
using loom::testing::expect;

namespace {
// x [4, 8] read at row r0 and column k, the reduce range: the start of most graphs below.
const std::string kXAtRowK = R"(
%n = CONST i64 [4]
%m = CONST i64 [8]
%r0 = RANGE i64 %n [axis 0 loop]
%k = RANGE i64 %m [axis 1 reduce]
%x = BUFFER f32 [(1 32)]
%row = MUL i64 %r0, %m
%i = ADD i64 %row, %k
%ix = INDEX f32* %x, %i
%lx = LOAD f32 %ix
)";
// x [4] read at r0: the start of the graphs whose value of x is proposed as a buffer.
const std::string kXAtR0 = R"(
%n = CONST i64 [4]
%r0 = RANGE i64 %n [axis 0 loop]
%x = BUFFER f32 [(1 4)]
%ix = INDEX f32* %x, %r0
%lx = LOAD f32 %ix
)";
}  // namespace

TEST_CASE("a cheap proposed buffer read at another index is inlined: the index is substituted") {
  const UOpPtr after = apply_stage(buffer_removal(), R"(
%n = CONST i64 [4]
%r0 = RANGE i64 %n [axis 0 loop]
%x = BUFFER f32 [(1 8)]
%two = CONST i64 [2]
%i0 = MUL i64 %r0, %two
%ix = INDEX f32* %x, %i0
%lx = LOAD f32 %ix
%three = CONST f32 [3.0]
%v = MUL f32 %lx, %three
%b = BUFFERIZE f32 %v, %r0 [(4)]
%r7 = RANGE i64 %n [axis 7 loop]
%five = CONST i64 [3]
%flip = SUB i64 %five, %r7
%ib = INDEX f32* %b, %flip
%lb = LOAD f32 %ib
%out = CONTIGUOUS f32 %lb
%root = BUFFERIZE f32 %out, %r7 [(4)]
)");
  CHECK(after == expect(R"(
%n = CONST i64 [4]
%r7 = RANGE i64 %n [axis 7 loop]
%x = BUFFER f32 [(1 8)]
%three = CONST i64 [3]
%flip = SUB i64 %three, %r7
%two = CONST i64 [2]
%i0 = MUL i64 %flip, %two
%ix = INDEX f32* %x, %i0
%lx = LOAD f32 %ix
%c3 = CONST f32 [3.0]
%v = MUL f32 %lx, %c3
%out = CONTIGUOUS f32 %v
%root = BUFFERIZE f32 %out, %r7 [(4)]
)"));
}

namespace {
// s = x.sum(1) over x [4, 8], proposed as a buffer and read flipped: s[3 - r7].
const std::string kFlippedSum = kXAtRowK + R"(%s = REDUCE f32 %lx, %k [reduce ADD ()]
%b = BUFFERIZE f32 %s, %r0 [(4)]
%r7 = RANGE i64 %n [axis 7 loop]
%three = CONST i64 [3]
%flip = SUB i64 %three, %r7
%ib = INDEX f32* %b, %flip
%lb = LOAD f32 %ib
%out = CONTIGUOUS f32 %lb
%root = BUFFERIZE f32 %out, %r7 [(4)]
)";
}  // namespace

TEST_CASE(
    "a reduce that reads a buffer keeps its buffer: at LOOM_PCONTIG <= 2, and when its buffer is small") {
  CHECK(apply_stage(buffer_removal(), kFlippedSum) == expect(kFlippedSum));
  Flags pcontig;
  pcontig.pcontig = 3;  // allowed, but the buffer (4) is not 10x its input (32): still kept
  CHECK(apply_stage(buffer_removal(), kFlippedSum, pcontig) == expect(kFlippedSum));
}

TEST_CASE("LOOM_PCONTIG=3 inlines a reduce whose buffer is at least 10x its input") {
  // t[r0, r1] = sum_k x[k] * r1 over a [4, 64] buffer that reads 8 elements.
  const char* before = R"(
%n = CONST i64 [4]
%w = CONST i64 [64]
%m = CONST i64 [8]
%r0 = RANGE i64 %n [axis 0 loop]
%r1 = RANGE i64 %w [axis 1 loop]
%k = RANGE i64 %m [axis 2 reduce]
%x = BUFFER f32 [(1 8)]
%ix = INDEX f32* %x, %k
%lx = LOAD f32 %ix
%s = REDUCE f32 %lx, %k [reduce ADD ()]
%f = CAST f32 %r1
%v = MUL f32 %s, %f
%b = BUFFERIZE f32 %v, %r0, %r1 [(4 64)]
%r7 = RANGE i64 %n [axis 7 loop]
%r8 = RANGE i64 %w [axis 8 loop]
%three = CONST i64 [3]
%flip = SUB i64 %three, %r7
%ib = INDEX f32* %b, %flip, %r8
%lb = LOAD f32 %ib
%out = CONTIGUOUS f32 %lb
%root = BUFFERIZE f32 %out, %r7, %r8 [(4 64)]
)";
  CHECK(apply_stage(buffer_removal(), before) == expect(before));
  Flags pcontig;
  pcontig.pcontig = 3;
  CHECK(apply_stage(buffer_removal(), before, pcontig) == expect(R"(
%n = CONST i64 [4]
%w = CONST i64 [64]
%m = CONST i64 [8]
%k = RANGE i64 %m [axis 2 reduce]
%x = BUFFER f32 [(1 8)]
%ix = INDEX f32* %x, %k
%lx = LOAD f32 %ix
%s = REDUCE f32 %lx, %k [reduce ADD ()]
%r7 = RANGE i64 %n [axis 7 loop]
%r8 = RANGE i64 %w [axis 8 loop]
%f = CAST f32 %r8
%v = MUL f32 %s, %f
%out = CONTIGUOUS f32 %v
%root = BUFFERIZE f32 %out, %r7, %r8 [(4 64)]
)"));
}

TEST_CASE("a value reading more than 3 buffers keeps its buffer; 3 are inlined") {
  auto graph = [](int buffers) {
    std::string t = "%n = CONST i64 [4]\n%r0 = RANGE i64 %n [axis 0 loop]\n%acc0 = CONST f32 [0.0]\n";
    for (int i = 1; i <= buffers; ++i)
      t += fmt::format(
          "%x{0} = BUFFER f32 [({0} 4)]\n%i{0} = INDEX f32* %x{0}, %r0\n%l{0} = LOAD f32 %i{0}\n"
          "%acc{0} = ADD f32 %acc{1}, %l{0}\n",
          i, i - 1);
    t += fmt::format(
        "%b = BUFFERIZE f32 %acc{}, %r0 [(4)]\n%r7 = RANGE i64 %n [axis 7 loop]\n%three = CONST i64 [3]\n"
        "%flip = SUB i64 %three, %r7\n%ib = INDEX f32* %b, %flip\n%lb = LOAD f32 %ib\n"
        "%out = CONTIGUOUS f32 %lb\n%root = BUFFERIZE f32 %out, %r7 [(4)]\n",
        buffers);
    return t;
  };
  const std::string four = graph(4), three = graph(3);
  CHECK(apply_stage(buffer_removal(), four) == expect(four));
  CHECK(apply_stage(buffer_removal(), three) != expect(three));
}

TEST_CASE("an exp read inside a reduce's loop keeps its buffer; a negation is inlined there") {
  auto graph = [](const char* op) {
    return kXAtR0 + fmt::format(R"(
%v = {} f32 %lx
%b = BUFFERIZE f32 %v, %r0 [(4)]
%k = RANGE i64 %n [axis 5 reduce]
%ib = INDEX f32* %b, %k
%lb = LOAD f32 %ib
%s = REDUCE f32 %lb, %k [reduce ADD ()]
%out = CONTIGUOUS f32 %s
%root = BUFFERIZE f32 %out [()]
)",
                                op);
  };
  CHECK(apply_stage(buffer_removal(), graph("EXP2")) == expect(graph("EXP2")));
  CHECK(apply_stage(buffer_removal(), graph("NEG")) == expect(R"(
%n = CONST i64 [4]
%k = RANGE i64 %n [axis 5 reduce]
%x = BUFFER f32 [(1 4)]
%ix = INDEX f32* %x, %k
%lx = LOAD f32 %ix
%v = NEG f32 %lx
%s = REDUCE f32 %v, %k [reduce ADD ()]
%out = CONTIGUOUS f32 %s
%root = BUFFERIZE f32 %out [()]
)"));
}

TEST_CASE("a transcendental value read through a pad much larger than itself keeps its buffer") {
  // v = erf(x) + x over 4 elements, read at r7 - 1 under 0 < r7 < 5 by a kernel over r7:
  // inlined, v runs at each of r7's iterations, the padding's too.
  auto graph = [](const char* op, int extent) {
    return kXAtR0 + fmt::format(R"(
%e = {} f32 %lx
%v = ADD f32 %e, %lx
%b = BUFFERIZE f32 %v, %r0 [(4)]
%m = CONST i64 [{}]
%r7 = RANGE i64 %m [axis 7 loop]
%one = CONST i64 [1]
%at = SUB i64 %r7, %one
%zero = CONST i64 [0]
%lo = CMPLT bool %zero, %r7
%five = CONST i64 [5]
%hi = CMPLT bool %r7, %five
%ok = AND bool %lo, %hi
%ib = INDEX f32* %b, %at, %ok
%lb = LOAD f32 %ib
%out = CONTIGUOUS f32 %lb
%root = BUFFERIZE f32 %out, %r7 [({})]
)",
                                op, extent, extent);
  };
  const auto buffers = [](const UOpPtr& g) {
    size_t n = 0;
    for (const auto& u : toposort(g)) n += u->op == Op::BUFFERIZE;
    return n;
  };
  CHECK(apply_stage(buffer_removal(), graph("ERF", 16)) == expect(graph("ERF", 16)));  // 16 visits of 4
  CHECK(buffers(apply_stage(buffer_removal(), graph("ERF", 5))) == 1);   // 5 of 4: within 1.25, inlined
  CHECK(buffers(apply_stage(buffer_removal(), graph("NEG", 16))) == 1);  // no transcendental: inlined
}

TEST_CASE("BUFFERIZE(CONST) reads as the constant, under the read's validity") {
  CHECK(apply_stage(buffer_removal(), R"(
%n = CONST i64 [4]
%r0 = RANGE i64 %n [axis 0 loop]
%c = CONST f32 [2.5]
%b = BUFFERIZE f32 %c, %r0 [(4)]
%r7 = RANGE i64 %n [axis 7 loop]
%one = CONST i64 [1]
%i = SUB i64 %r7, %one
%zero = CONST i64 [0]
%ok = CMPLT bool %zero, %r7
%ib = INDEX f32* %b, %i, %ok
%lb = LOAD f32 %ib
%out = CONTIGUOUS f32 %lb
%root = BUFFERIZE f32 %out, %r7 [(4)]
)") == expect(R"(
%n = CONST i64 [4]
%r7 = RANGE i64 %n [axis 7 loop]
%zero = CONST i64 [0]
%ok = CMPLT bool %zero, %r7
%c = CONST f32 [2.5]
%z = CONST f32 [0.0]
%w = WHERE f32 %ok, %c, %z
%out = CONTIGUOUS f32 %w
%root = BUFFERIZE f32 %out, %r7 [(4)]
)"));
}

TEST_CASE("a buffer of no elements reads as 0: its reader's valid never holds") {
  // loom-fuzz seed 6064232: x [2, 4] shrunk to rows [2, 2), then padded. The empty
  // range simplified away, the buffer's value was a load of x[9] no range guarded,
  // and inlined into the pad it ran outside x, under a WHERE that discarded it.
  CHECK(apply_stage(buffer_removal(), R"(
%x = BUFFER i32 [(1 8)]
%nine = CONST i64 [9]
%ix = INDEX i32* %x, %nine
%lx = LOAD i32 %ix
%zero = CONST i64 [0]
%r3 = RANGE i64 %zero [axis 3 loop]
%b = BUFFERIZE i32 %lx, %r3, %zero [(0 1)]
%two = CONST i64 [2]
%r1 = RANGE i64 %two [axis 1 loop]
%one = CONST i64 [1]
%i = SUB i64 %r1, %one
%lo = CMPLT bool %zero, %r1
%hi = CMPLT bool %r1, %one
%ok = AND bool %lo, %hi
%ib = INDEX i32* %b, %i, %zero, %ok
%lb = LOAD i32 %ib
%out = CONTIGUOUS i32 %lb
%root = BUFFERIZE i32 %out, %r1 [(2)]
)") == expect(R"(
%two = CONST i64 [2]
%r1 = RANGE i64 %two [axis 1 loop]
%z = CONST i32 [0]
%out = CONTIGUOUS i32 %z
%root = BUFFERIZE i32 %out, %r1 [(2)]
)"));
}

TEST_CASE("a buffer read at exactly its own ranges is its value, even with a reduce inside") {
  // What the identity fold sees: the reader runs inside the buffer's own loop r0.
  CHECK(apply_stage(buffer_removal(), kXAtRowK + R"(%s = REDUCE f32 %lx, %k [reduce ADD ()]
%b = BUFFERIZE f32 %s, %r0 [(4)]
%ib = INDEX f32* %b, %r0
%lb = LOAD f32 %ib
%out = CONTIGUOUS f32 %lb
%root = BUFFERIZE f32 %out, %r0 [(4)]
)") == expect(kXAtRowK + R"(%s = REDUCE f32 %lx, %k [reduce ADD ()]
%out = CONTIGUOUS f32 %s
%root = BUFFERIZE f32 %out, %r0 [(4)]
)"));
}

TEST_CASE("a copy of a buffer is that buffer: a nested BUFFERIZE flattens into its reader") {
  // b2 copies b1 at its own ranges; reading b2 flipped reads b1 flipped.
  const UOpPtr after = apply_stage(buffer_removal(), kXAtRowK + R"(%s = REDUCE f32 %lx, %k [reduce ADD ()]
%b1 = BUFFERIZE f32 %s, %r0 [(4)]
%r2 = RANGE i64 %n [axis 2 loop]
%i1 = INDEX f32* %b1, %r2
%l1 = LOAD f32 %i1
%b2 = BUFFERIZE f32 %l1, %r2 [(4)]
%r7 = RANGE i64 %n [axis 7 loop]
%three = CONST i64 [3]
%flip = SUB i64 %three, %r7
%i2 = INDEX f32* %b2, %flip
%l2 = LOAD f32 %i2
%out = CONTIGUOUS f32 %l2
%root = BUFFERIZE f32 %out, %r7 [(4)]
)");
  CHECK(after == expect(kXAtRowK + R"(%s = REDUCE f32 %lx, %k [reduce ADD ()]
%b1 = BUFFERIZE f32 %s, %r0 [(4)]
%r7 = RANGE i64 %n [axis 7 loop]
%three = CONST i64 [3]
%flip = SUB i64 %three, %r7
%i1 = INDEX f32* %b1, %flip
%l1 = LOAD f32 %i1
%out = CONTIGUOUS f32 %l1
%root = BUFFERIZE f32 %out, %r7 [(4)]
)"));
}

namespace {
// m = x.max(1) over x [4, 8], proposed as a buffer, read by x - m over `reader_ranges`
// (the reader's BUFFERIZE ranges, outermost first) at r7.
constexpr const char* kMinusMax = R"(%r8 = RANGE i64 %m [axis 8 loop]
%row7 = MUL i64 %r7, %m
%j = ADD i64 %row7, %r8
%jx = INDEX f32* %x, %j
%ly = LOAD f32 %jx
%d = SUB f32 %ly, %lb)";
std::string row_max_read(const std::string& reader_ranges, const std::string& reader_shape,
                         const std::string& value = kMinusMax) {
  return fmt::format(fmt::runtime(kXAtRowK + R"(%mx = REDUCE f32 %lx, %k [reduce MAX ()]
%b = BUFFERIZE f32 %mx, %r0 [(4)]
%r7 = RANGE i64 %n [axis 7 loop]
%ib = INDEX f32* %b, %r7
%lb = LOAD f32 %ib
{}
%out = CONTIGUOUS f32 %d
%root = BUFFERIZE f32 %out, {} [({})]
)"),
                     value, reader_ranges, reader_shape);
}

// buffer_removal with the ranges placed, as buffer_stages runs it.
UOpPtr remove_buffers(const std::string& text) {
  const Flags flags;
  StageContext ctx{flags, {}};
  const UOpPtr graph = parse_text(text);
  place_ranges(graph, ctx);
  return graph_rewrite(graph, symbolic() + buffer_removal(), ctx);
}

int count_op(const UOpPtr& root, Op op) {
  int n = 0;
  for (const auto& u : toposort(root)) n += u->op == op;
  return n;
}
}  // namespace

TEST_CASE("a row's reduce read by the kernel over those rows is inlined there: once per row, not per read") {
  // x - x.max(1): the reader loops over rows (r7) outermost, then the row (r8).
  const UOpPtr rows = remove_buffers(row_max_read("%r7, %r8", "4 8"));
  CHECK(count_op(rows, Op::BUFFERIZE) == 1);  // the output's only
  REQUIRE(count_op(rows, Op::REDUCE) == 1);
  for (const auto& u : toposort(rows))
    if (u->op == Op::REDUCE) CHECK(u->ranges().size() == 1);  // the reader's row, r7, only
  // A transposed reader (the row is its inner loop) would run the max once per
  // element of its outer loop, and a reader of the maxima alone (all its ranges)
  // reads each once anyway: both keep the buffer.
  CHECK(count_op(remove_buffers(row_max_read("%r8, %r7", "8 4")), Op::BUFFERIZE) == 2);
  CHECK(count_op(remove_buffers(row_max_read("%r7", "4", "%d = NEG f32 %lb")), Op::BUFFERIZE) == 2);
}
