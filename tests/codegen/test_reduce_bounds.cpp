// reduce_bounds: a sum whose terms are its identity outside a bound on its own loop runs
// over the bound only (from the tile's least start to its greatest stop), and a sum a select
// needs in no lane of the tile runs no iteration; the kernel means what it meant
// (interpreted before and after, and compiled).
#include "codegen/codegen.hpp"
#include "codegen/run_kernel.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <string>

using namespace loom;
using namespace loom::test;

namespace {

const auto f32 = DType::Float32;
constexpr int64_t kRows = 64, kTile = 4, kCols = 16;  // loops of 16 or more: reduce_bounds bounds them

// The extents of every REDUCE's reduce loops.
std::vector<UOpPtr> sum_extents(const UOpPtr& kernel) {
  std::vector<UOpPtr> out;
  for (const auto& u : toposort(kernel))
    if (u->op == Op::REDUCE)
      for (size_t k = 1; k < u->src.size(); ++k)
        if (u->src[k]->get<AxisArg>().kind == AxisKind::Reduce) out.push_back(u->src[k]->src[0]);
  return out;
}

// out[i, d] = sum_j where(j <= i, p[i, j], 0) * v[j, d] (or where i <= j: `after`), over
// i = 4 io + iu (iu unrolled: a tile of rows), d, and j in [0, 64): causal attention's P @ V
// (and, transposed, dV = P^T dO).
UOpPtr masked_product(bool after, const UOpPtr& select_zero = const_float(f32, 0.0)) {
  auto out = global(0, f32), p = global(1, f32), v = global(2, f32);
  const UOpPtr io = make_range(kRows / kTile, 0), iu = make_range(kTile, 1, AxisKind::Unroll),
               d = make_range(kCols, 2), j = make_range(kRows, 3, AxisKind::Reduce);
  const UOpPtr i = io * i64(kTile) + iu;
  const UOpPtr visible = after ? alu(Op::OR, {i < j, eq(i, j)}) : alu(Op::OR, {j < i, eq(j, i)});
  const UOpPtr term = where(visible, load(p, i * i64(kRows) + j), select_zero) * load(v, j * i64(kCols) + d);
  return sink({end(store(index(out, i * i64(kCols) + d), reduce(Op::ADD, term, {j})), {io, iu, d})});
}

void check_meaning(const UOpPtr& before, const UOpPtr& after) {
  Aligned<float> out(kRows * kCols, -7.0f), p(kRows * kRows), v(kRows * kCols);
  for (size_t n = 0; n < p.size(); ++n) p[n] = static_cast<float>(n % 7) - 2.5f;
  for (size_t n = 0; n < v.size(); ++n) v[n] = static_cast<float>(n % 5) * 0.5f - 1.0f;
  check_same_results(before, after, {out, p, v});
  run_all(compile_kernel(after, "reduce_bounds"), after, {out, p, v});
}

// A kernel over kRows rows reading s[kRows, kRows]: before and after mean the same
// (interpreted), and the compiled kernel agrees with the interpreter.
void check_rows(const UOpPtr& before, const UOpPtr& after, const std::string& name, size_t step, size_t mod) {
  Aligned<float> o(kRows, -7.0f), sv(kRows * kRows);
  for (size_t n = 0; n < sv.size(); ++n)
    sv[n] = static_cast<float>((n * step) % mod) - static_cast<float>(mod / 2);
  check_same_results(before, after, {o, sv});
  run_all(compile_kernel(after, name), after, {o, sv});
}

}  // namespace

TEST_CASE("reduce_bounds: a sum of terms zero above the diagonal stops at the tile's last row") {
  const UOpPtr before = masked_product(false), after = bound_reduces(before);
  REQUIRE(after != before);
  const std::vector<UOpPtr> extents = sum_extents(after);
  REQUIRE(extents.size() == 1);
  // min(64, 4 io + 4): the tile's greatest row plus one, never past the row's end.
  CHECK(extents[0]->vmin() <= kTile);
  CHECK(extents[0]->vmax() == kRows);
  CHECK(!extents[0]->is_const());
  check_meaning(before, after);
}

TEST_CASE("reduce_bounds: a sum of terms zero below the diagonal starts at the tile's first row") {
  const UOpPtr before = masked_product(true), after = bound_reduces(before);
  REQUIRE(after != before);
  const std::vector<UOpPtr> extents = sum_extents(after);
  REQUIRE(extents.size() == 1);
  CHECK(extents[0]->vmax() == kRows);  // the first tile starts at 0
  CHECK(extents[0]->vmin() < kRows);
  check_meaning(before, after);
}

TEST_CASE("reduce_bounds: a select against anything but the sum's identity bounds nothing") {
  const UOpPtr before = masked_product(false, const_float(f32, 1.0));
  CHECK(bound_reduces(before) == before);
}

TEST_CASE("reduce_bounds: a max over -inf outside the bound runs over the bound") {
  auto out = global(0, f32), s = global(1, f32);
  const UOpPtr io = make_range(kRows / kTile, 0), iu = make_range(kTile, 1, AxisKind::Unroll),
               j = make_range(kRows, 2, AxisKind::Reduce);
  const UOpPtr i = io * i64(kTile) + iu;
  const UOpPtr masked = where(j < i + i64(1), load(s, i * i64(kRows) + j),
                              const_float(f32, -std::numeric_limits<double>::infinity()));
  const UOpPtr before = sink({end(store(index(out, i), reduce(Op::MAX, masked, {j})), {io, iu})});
  const UOpPtr after = bound_reduces(before);
  REQUIRE(after != before);
  check_rows(before, after, "reduce_bounds_max", 7, 11);
}

namespace {
// out[i, j] = value(j <= i, s) with s = sum_e q[i, e] k[j, e], i and j tiles of 4 (unrolled).
UOpPtr scores_kernel(UOpPtr (*value)(const UOpPtr& visible, const UOpPtr& s)) {
  auto out = global(0, f32), q = global(1, f32), k = global(2, f32);
  const UOpPtr io = make_range(kRows / kTile, 0), iu = make_range(kTile, 1, AxisKind::Unroll),
               jo = make_range(kRows / kTile, 2), ju = make_range(kTile, 3, AxisKind::Unroll),
               e = make_range(kCols, 4, AxisKind::Reduce);
  const UOpPtr i = io * i64(kTile) + iu, j = jo * i64(kTile) + ju;
  const UOpPtr dot = reduce(Op::ADD, load(q, i * i64(kCols) + e) * load(k, j * i64(kCols) + e), {e});
  const UOpPtr visible = alu(Op::OR, {j < i, eq(j, i)});
  return sink({end(store(index(out, i * i64(kRows) + j), value(visible, dot)), {io, iu, jo, ju})});
}
}  // namespace

TEST_CASE("reduce_bounds: a score no lane of the tile keeps is not summed") {
  // where(j <= i, s / 2, -inf): causal attention's scores. In a tile wholly above the diagonal
  // the sum runs no step.
  const UOpPtr before = scores_kernel([](const UOpPtr& visible, const UOpPtr& s) {
    return where(visible, s * const_float(f32, 0.5),
                 const_float(f32, -std::numeric_limits<double>::infinity()));
  });
  const UOpPtr after = bound_reduces(before);
  REQUIRE(after != before);
  const std::vector<UOpPtr> extents = sum_extents(after);
  REQUIRE(extents.size() == 1);
  CHECK(extents[0]->vmin() == 0);
  CHECK(extents[0]->vmax() == kCols);
  Aligned<float> o(kRows * kRows, -7.0f), qv(kRows * kCols), kv(kRows * kCols);
  for (size_t n = 0; n < qv.size(); ++n)
    qv[n] = static_cast<float>(n % 9) - 4.0f, kv[n] = static_cast<float>(n % 4);
  check_same_results(before, after, {o, qv, kv});
  run_all(compile_kernel(after, "reduce_bounds_select"), after, {o, qv, kv});
}

TEST_CASE("reduce_bounds: a sum the other branch reads too is summed once, unbounded") {
  // where(j <= i, s, s + 1): the shape of a product in blocks of k whose epilogue (here + 1)
  // applies at the last block. Bounding s's loop in the first branch made a second sum for
  // the other: two loops over e per element.
  const UOpPtr before = scores_kernel(
      [](const UOpPtr& visible, const UOpPtr& s) { return where(visible, s, s + const_float(f32, 1.0)); });
  CHECK(bound_reduces(before) == before);
}

TEST_CASE("reduce_bounds: a sum over a split loop bounds its outer part") {
  // out[i] = sum_j where(j <= i, s[i, j], 0), j = 4 jo + ju (ju unrolled): a softmax row's
  // sum as the optimiser leaves it. jo stops at (i - 0) / 4 + 1 over the tile of rows.
  auto out = global(0, f32), s = global(1, f32);
  const UOpPtr io = make_range(kRows / kTile, 0), iu = make_range(kTile, 1, AxisKind::Unroll),
               jo = make_range(kRows / 4, 2, AxisKind::Reduce), ju = make_range(4, 3, AxisKind::Unroll);
  const UOpPtr i = io * i64(kTile) + iu, j = jo * i64(4) + ju;
  const UOpPtr term = where(alu(Op::OR, {cast(j, DType::Int32) < cast(i, DType::Int32),
                                         eq(cast(j, DType::Int32), cast(i, DType::Int32))}),
                            load(s, i * i64(kRows) + j), const_float(f32, 0.0));
  const UOpPtr before = sink({end(store(index(out, i), reduce(Op::ADD, term, {jo, ju})), {io, iu})});
  const UOpPtr after = bound_reduces(before);
  REQUIRE(after != before);
  const std::vector<UOpPtr> extents = sum_extents(after);
  REQUIRE(extents.size() == 1);
  CHECK(!extents[0]->is_const());
  CHECK(extents[0]->vmax() == kRows / 4);
  check_rows(before, after, "reduce_bounds_split", 5, 13);
}

TEST_CASE("reduce_bounds: a bound from the left of a split loop starts its outer part late enough") {
  // out[i] = sum_j where(i <= j, s[i, j], 0), j = 4 jo + ju: the transposed product's rows.
  auto out = global(0, f32), s = global(1, f32);
  const UOpPtr io = make_range(kRows / kTile, 0), iu = make_range(kTile, 1, AxisKind::Unroll),
               jo = make_range(kRows / 4, 2, AxisKind::Reduce), ju = make_range(4, 3, AxisKind::Unroll);
  const UOpPtr i = io * i64(kTile) + iu, j = jo * i64(4) + ju;
  const UOpPtr term =
      where(alu(Op::OR, {i < j, eq(i, j)}), load(s, i * i64(kRows) + j), const_float(f32, 0.0));
  const UOpPtr before = sink({end(store(index(out, i), reduce(Op::ADD, term, {jo, ju})), {io, iu})});
  const UOpPtr after = bound_reduces(before);
  REQUIRE(after != before);
  check_rows(before, after, "reduce_bounds_split_start", 5, 13);
}

TEST_CASE("reduce_bounds: a bound that reads the sum's other loop is not taken") {
  // out[i] = sum_{a, b} where(a + b <= i, x[a, b], 0): a's bound i - b reads b, which runs
  // inside a's loop (a padded conv's two kernel axes); the compiled kernel still runs.
  auto out = global(0, f32), x = global(1, f32);
  const UOpPtr i = make_range(40, 0), a = make_range(16, 1, AxisKind::Reduce),
               b = make_range(16, 2, AxisKind::Reduce);
  const UOpPtr term =
      where(alu(Op::OR, {a + b < i, eq(a + b, i)}), load(x, a * i64(16) + b), const_float(f32, 0.0));
  const UOpPtr before = sink({end(store(index(out, i), reduce(Op::ADD, term, {a, b})), {i})});
  const UOpPtr after = bound_reduces(before);
  for (const UOpPtr& e : sum_extents(after)) {
    bool reads_other_sum = false;
    for (const UOpPtr& u : toposort(e)) reads_other_sum |= u == a || u == b;
    CHECK(!reads_other_sum);
  }
  Aligned<float> o(40, -7.0f), xv(256);
  for (size_t n = 0; n < xv.size(); ++n) xv[n] = static_cast<float>(n) - 3.5f;
  check_same_results(before, after, {o, xv});
  run_all(compile_kernel(after, "reduce_bounds_two_sums"), after, {o, xv});
}

TEST_CASE("reduce_bounds: a loop of few iterations keeps its constant count") {
  // A 3 x 3 window's sum under its padding's guard: LLVM unrolls a loop of 3 whole, which a
  // bounded loop would forgo; the sum is left as it is.
  auto out = global(0, f32), x = global(1, f32);
  const UOpPtr i = make_range(8, 0), kh = make_range(3, 1, AxisKind::Reduce);
  const UOpPtr guard = alu(Op::OR, {kh < i, eq(kh, i)});
  const UOpPtr before = sink(
      {end(store(index(out, i), reduce(Op::ADD, where(guard, load(x, i + kh), const_float(f32, 0.0)), {kh})),
           {i})});
  CHECK(bound_reduces(before) == before);
}
