#include "codegen/codegen.hpp"
#include "codegen/linearizer.hpp"
#include "codegen/run_kernel.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::test;

namespace {

const auto f32 = DType::Float32;

// Position of the instruction (kind, uop); fails the test if it is not there exactly once.
size_t position(const LinearKernel& lk, LinearKind kind, const UOpPtr& u) {
  size_t found = lk.insts.size(), count = 0;
  for (size_t i = 0; i < lk.insts.size(); ++i)
    if (lk.insts[i].kind == kind && lk.insts[i].uop == u) found = i, ++count;
  INFO(lk.dump());
  REQUIRE_MESSAGE(count == 1, linear_kind_name(kind)
                                  << " " << op_name(u->op) << " appears " << count << " times");
  return found;
}
int depth(const LinearKernel& lk, LinearKind kind, const UOpPtr& u) {
  return lk.insts[position(lk, kind, u)].depth;
}

}  // namespace

TEST_CASE("linearize: an elementwise kernel is two nested loops around the store") {
  auto out = global(0, f32), in = global(1, f32);
  auto i = make_range(4, 0, AxisKind::Parallel), j = make_range(3, 1);
  auto at = i * 3 + j;
  auto st = store(index(out, at), load(in, at) * load(in, at));
  const auto lk = linearize(sink({end(st, {i, j})}));
  CHECK(lk.dump() ==
        "%0 = DEFINE_GLOBAL f32* [slot 0]\n"
        "%1 = DEFINE_GLOBAL f32* [slot 1]\n"
        "LOOP r0 parallel [begin, end)\n"
        "  %2 = MUL i64 r0, 3\n"
        "  LOOP r1 loop [0, 3)\n"
        "    %3 = ADD i64 %2, r1\n"
        "    %4 = INDEX f32* %0, %3\n"
        "    %5 = INDEX f32* %1, %3\n"
        "    %6 = LOAD f32 %5\n"
        "    %7 = MUL f32 %6, %6\n"
        "    STORE %4, %7\n"
        "  ENDLOOP r1\n"
        "ENDLOOP r0\n");
}

TEST_CASE("linearize: loop invariants are placed at the outermost loop where their ranges exist") {
  auto out = global(0, f32), row = global(1, f32), col = global(2, f32), scale = global(3, f32);
  auto i = make_range(8, 0), j = make_range(16, 1);
  auto row_term = load(row, i) * load(row, i);           // depends on i only
  auto constant_term = load(scale, i64(0));              // depends on no range
  auto value = row_term * constant_term + load(col, j);  // depends on j too
  auto st = store(index(out, i * 16 + j), value);
  const auto lk = linearize(sink({end(st, {i, j})}));
  const size_t inner_loop = position(lk, LinearKind::LoopBegin, j);
  const size_t outer_loop = position(lk, LinearKind::LoopBegin, i);
  CHECK(depth(lk, LinearKind::Value, row_term) == 1);
  CHECK(position(lk, LinearKind::Value, row_term) < inner_loop);
  CHECK(depth(lk, LinearKind::Value, constant_term) == 0);
  CHECK(position(lk, LinearKind::Value, constant_term) < outer_loop);
  CHECK(depth(lk, LinearKind::Value, value) == 2);
  CHECK(depth(lk, LinearKind::Store, st) == 2);
}

// The pieces lower_reduce makes of a REDUCE: the accumulator's initial store, its
// update (the STORE inside the END of the reduce loops), and the read after them.
struct Accumulator {
  UOpPtr init, update, loop, result;
};
Accumulator accumulator_of(const UOpPtr& lowered, const UOpPtr& range) {
  Accumulator a;
  for (const auto& n : toposort(lowered)) {
    if (n->op == Op::END && n->src.size() == 2 && n->src[1] == range) a.loop = n, a.update = n->src[0];
    if (n->op == Op::LOAD && n->src[0]->src[0]->op == Op::AFTER && a.loop &&
        n->src[0]->src[0]->src[1] == a.loop)
      a.result = n;
  }
  REQUIRE(a.loop);
  REQUIRE(a.result);
  for (const auto& n : toposort(a.update))
    if (n->op == Op::AFTER && n->src.size() == 3 && n->src[2] == range) a.init = n->src[1];
  REQUIRE(a.init);
  return a;
}

TEST_CASE(
    "linearize: a lowered REDUCE is an initial store, its loop with the update inside, and a read after") {
  auto out = global(0, f32), a = global(1, f32), x = global(2, f32);
  auto i = make_range(3, 0), k = make_range(4, 1, AxisKind::Reduce);
  auto product = load(a, i * 4 + k) * load(x, k);
  auto dot = reduce(Op::ADD, product, {k});  // matrix-vector: one dot product per row
  const auto lowered = lower_reduce(sink({end(store(index(out, i), dot), {i})}));
  const Accumulator acc = accumulator_of(lowered, k);
  const auto lk = linearize(lowered);
  const size_t init = position(lk, LinearKind::Store, acc.init),
               loop = position(lk, LinearKind::LoopBegin, k),
               fold = position(lk, LinearKind::Store, acc.update),
               done = position(lk, LinearKind::LoopEnd, k),
               read = position(lk, LinearKind::Value, acc.result);
  CHECK(position(lk, LinearKind::LoopBegin, i) < init);
  CHECK(init < loop);
  CHECK(loop < fold);
  CHECK(fold < done);
  CHECK(done < read);
  CHECK(lk.insts[init].depth == 1);
  CHECK(lk.insts[fold].depth == 2);
  CHECK(lk.insts[read].depth == 1);
  CHECK(depth(lk, LinearKind::Value, load(x, k)) == 2);
}

TEST_CASE("linearize: a REDUCE left in the kernel is an error naming the pass that lowers it") {
  auto out = global(0, f32), a = global(1, f32);
  auto k = make_range(4, 0, AxisKind::Reduce);
  const auto kernel = sink({store(index(out, i64(0)), reduce(Op::ADD, load(a, k), {k}))});
  CHECK_THROWS_WITH_AS(linearize(kernel), doctest::Contains("lower_reduce"), Error);
}

TEST_CASE("linearize: a REDUCE asked for in an inner loop is placed where its own ranges are") {
  auto out = global(0, f32), a = global(1, f32), b = global(2, f32);
  auto i = make_range(3, 0), j = make_range(5, 1), k = make_range(4, 2, AxisKind::Reduce);
  auto rowsum = reduce(Op::ADD, load(a, i * 4 + k), {k});  // depends on i, not on j
  auto total = reduce(Op::MAX, load(b, k), {k});           // depends on no output range
  auto st = store(index(out, i * 5 + j), rowsum + total + load(b, j));
  const auto lowered = lower_reduce(sink({end(st, {i, j})}));
  const auto lk = linearize(lowered);
  INFO(lk.dump());
  // Two accumulators; tell them apart by the buffer their loop reads.
  std::vector<Accumulator> accs;
  for (const auto& n : toposort(lowered))
    if (n->op == Op::END && n->src.size() == 2 && n->src[1] == k) {
      Accumulator acc;
      acc.loop = n, acc.update = n->src[0];
      for (const auto& m : toposort(lowered))
        if (m->op == Op::LOAD && m->src[0]->src[0]->op == Op::AFTER && m->src[0]->src[0]->src[1] == n)
          acc.result = m;
      accs.push_back(acc);
    }
  REQUIRE(accs.size() == 2);
  const bool first_is_total = reaches(accs[0].update, load(b, k));
  const Accumulator& tot = accs[first_is_total ? 0 : 1];
  const Accumulator& row = accs[first_is_total ? 1 : 0];
  // `total`: computed once, before the output loops.
  CHECK(depth(lk, LinearKind::Value, tot.result) == 0);
  CHECK(position(lk, LinearKind::Value, tot.result) < position(lk, LinearKind::LoopBegin, i));
  // `rowsum`: once per row, before the j loop.
  CHECK(depth(lk, LinearKind::Value, row.result) == 1);
  CHECK(position(lk, LinearKind::Value, row.result) < position(lk, LinearKind::LoopBegin, j));
  // k is looped over twice, once per REDUCE, each time opened and closed.
  int k_loops = 0, open = 0;
  for (const auto& inst : lk.insts) {
    if (inst.uop != k) continue;
    if (inst.kind == LinearKind::LoopBegin) ++k_loops, ++open;
    if (inst.kind == LinearKind::LoopEnd) --open;
    CHECK(open >= 0);
  }
  CHECK(k_loops == 2);
  CHECK(open == 0);
}

TEST_CASE("linearize: a value shared by a REDUCE body and its user is computed once") {
  auto out = global(0, f32), a = global(1, f32), s = global(2, f32);
  auto i = make_range(3, 0), k = make_range(4, 1, AxisKind::Reduce);
  auto shared = load(s, i);  // used inside the reduce loop and after it
  auto r = reduce(Op::ADD, load(a, i * 4 + k) * shared, {k});
  const auto lk = linearize(lower_reduce(sink({end(store(index(out, i), r + shared), {i})})));
  CHECK(depth(lk, LinearKind::Value, shared) == 1);
  CHECK(position(lk, LinearKind::Value, shared) < position(lk, LinearKind::LoopBegin, k));
}

TEST_CASE("linearize: an epilogue's own values come after the reduce loop, not held across it") {
  // where(0 < mask, sum, 0): the mask is the where's first source, but the sum waits for the k
  // loop, so the mask's load and test are placed after that loop (a relu mask of a register
  // tile, 96 lanes, held across the loop spilled every lane).
  auto out = global(0, f32), a = global(1, f32), m = global(2, f32);
  auto i = make_range(3, 0), k = make_range(4, 1, AxisKind::Reduce);
  auto mask = load(m, i);
  auto test = UOp::make(Op::CMPLT, DType::Bool, {const_float(f32, 0), mask});
  auto r = reduce(Op::ADD, load(a, i * 4 + k), {k});
  auto masked = UOp::make(Op::WHERE, f32, {test, r, const_float(f32, 0)});
  const auto lk = linearize(lower_reduce(sink({end(store(index(out, i), masked), {i})})));
  CHECK(depth(lk, LinearKind::Value, mask) == 1);
  CHECK(position(lk, LinearKind::Value, mask) > position(lk, LinearKind::LoopEnd, k));
  CHECK(position(lk, LinearKind::Value, test) > position(lk, LinearKind::LoopEnd, k));
}

TEST_CASE("linearize: two ENDs that list the same range first share its loop (a kernel of two outputs)") {
  auto a = global(0, DType::Int32), b = global(1, DType::Int32);
  auto i = make_range(8, 0);
  auto twice = cast(i, DType::Int32) * 2;
  const auto lk =
      linearize(sink({end(store(index(a, i), twice), {i}), end(store(index(b, i), twice + 1), {i})}));
  int loops = 0, computed = 0, stores_in_loop = 0;
  for (const auto& inst : lk.insts) {
    loops += inst.kind == LinearKind::LoopBegin;
    computed += inst.kind == LinearKind::Value && inst.uop == twice;
    stores_in_loop += inst.kind == LinearKind::Store && inst.depth == 1;
  }
  CHECK(loops == 1);
  CHECK(computed == 1);  // once, for both stores
  CHECK(stores_in_loop == 2);
}

TEST_CASE("linearize: ENDs sharing a leading range run their other loops one after the other inside it") {
  auto a = global(0, DType::Int32), b = global(1, DType::Int32);
  auto i = make_range(8, 0), j = make_range(4, 1), k = make_range(4, 2), l = make_range(8, 3);
  auto row = cast(i, DType::Int32) * 3;
  const auto lk = linearize(
      sink({end(store(index(a, i * 4 + j), row + cast(j, DType::Int32)), {i, j}),
            end(store(index(b, i * 4 + k), row), {i, k}), end(store(index(b, l * 4), row + 1), {l, i})}));
  int loops = 0, computed = 0;
  for (const auto& inst : lk.insts) {
    loops += inst.kind == LinearKind::LoopBegin;
    computed += inst.kind == LinearKind::Value && inst.uop == row;
  }
  CHECK(loops == 5);     // i {j, k}, then l {i}: the third END does not start with i
  CHECK(computed == 2);  // once in the shared i loop, once in the third END's
  CHECK(depth(lk, LinearKind::LoopBegin, j) == 1);
  CHECK(depth(lk, LinearKind::LoopBegin, k) == 1);
  CHECK(position(lk, LinearKind::LoopEnd, j) < position(lk, LinearKind::LoopBegin, k));
  CHECK(position(lk, LinearKind::LoopEnd, k) < position(lk, LinearKind::LoopBegin, l));
}

TEST_CASE("linearize: kernels the contract does not allow are errors") {
  auto out = global(0, DType::Int64);
  auto i = make_range(4, 0), j = make_range(4, 1);
  SUBCASE("a range used outside its loop") {
    const auto kernel = sink({end(store(index(out, i + j), i), {i})});
    CHECK_THROWS_WITH_AS(linearize(kernel), doctest::Contains("uses range r1 outside the loops"), Error);
  }
  SUBCASE("an effect that is not END or STORE") {
    CHECK_THROWS_WITH_AS(linearize(sink({i + j})),
                         doctest::Contains("must be END, STORE or a SINK of them, got ADD"), Error);
  }
  SUBCASE("a range opened twice") {
    const auto kernel = sink({end(store(index(out, i), i), {i, i})});
    CHECK_THROWS_WITH_AS(linearize(kernel), doctest::Contains("range r0 is opened twice"), Error);
  }
  SUBCASE("not a SINK") {
    CHECK_THROWS_WITH_AS(linearize(i), doctest::Contains("a SINK of effects, got RANGE"), Error);
  }
}

TEST_CASE("linearize: a 100000-deep expression does not exhaust the stack") {
  auto out = global(0, DType::Int64);
  auto i = make_range(4, 0);
  UOpPtr value = i;
  for (int n = 0; n < 100000; ++n) value = value + 1;
  const auto lk = linearize(sink({end(store(index(out, i), value), {i})}));
  CHECK(lk.insts.size() == 100000 + 5);  // global, loop, 100000 adds, index, store, endloop
}
