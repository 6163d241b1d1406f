// Opts applied to kernels (codegen/opt.hpp) and the heuristic's list of them
// (codegen/heuristic.hpp): a list written by hand makes the heuristic's kernel, a
// recorded list replays, and a list the heuristic would not choose still computes the
// kernel's values (the reference interpreter runs both).
#include "codegen/opt.hpp"

#include "codegen/codegen.hpp"
#include "codegen/heuristic.hpp"
#include "codegen/run_kernel.hpp"
#include "ir/buffer_access.hpp"
#include "ir/target.hpp"

#include <doctest/doctest.h>

#include <algorithm>

#include <vector>

using namespace loom;
using namespace loom::test;

namespace {

const DType f32 = DType::Float32;

// out[i*cols + j] = in[i*cols + j] + 1 over END(i, j): axes 0 (i) and 1 (j).
UOpPtr elementwise(int64_t rows, int64_t cols) {
  auto out = global(0, f32), in = global(1, f32);
  auto i = make_range(rows, 0), j = make_range(cols, 1);
  auto at = i * cols + j;
  return sink({end(store(index(out, at), load(in, at) + const_float(f32, 1)), {i, j})});
}

// out[j*rows + i] = in[i*cols + j] over END(i, j): a transposing copy, axes 0 (i) and 1 (j).
UOpPtr transpose(int64_t rows, int64_t cols) {
  auto out = global(0, f32), in = global(1, f32);
  auto i = make_range(rows, 0), j = make_range(cols, 1);
  return sink({end(store(index(out, j * rows + i), load(in, i * cols + j)), {i, j})});
}

// b [rows, n] copied into column panels of `width`, as schedule/panel_packing.cpp packs a
// matmul's b: out[((jo * rows) + r) * width + ji] = in[r * n + jo * width + ji] over
// END(jo, r, ji): axes 0 (jo), 1 (r) and 2 (ji).
// panel_packing's copy of a matmul's a into bfloat16-pair row panels, in float32:
// P[p, q, r, t] = in[6p + r, 2q + 1 - t] (each pair's later k first), k = 2 * pairs, over
// END(p, q, r, t), q, r and t of axes first_axis, +1 and +2.
UOpPtr pair_panel_end(int out_slot, int in_slot, const UOpPtr& p, int64_t pairs, int64_t first_axis) {
  auto out = global(out_slot, f32), in = global(in_slot, f32);
  auto q = make_range(pairs, first_axis), r = make_range(6, first_axis + 1),
       t = make_range(2, first_axis + 2);
  const UOpPtr at = ((p * pairs + q) * 6 + r) * 2 + t;
  const UOpPtr from = (p * 6 + r) * (2 * pairs) + q * 2 + const_int(DType::Int64, 1) - t;
  return end(store(index(out, at), load(in, from)), {p, q, r, t});
}

// One such copy: axes 0 (p), 1 (q), 2 (r) and 3 (t), from slot 1 into slot 0.
UOpPtr pair_panel_copy(int64_t panels, int64_t pairs) {
  return sink({pair_panel_end(0, 1, make_range(panels, 0), pairs, 1)});
}

// Two in one kernel, as multi_output joins a product's two operands' copies: from slots 2
// and 3 into 0 and 1, the second over END(p, q2, r2, t2) (axes 0, 4-6).
UOpPtr two_pair_panel_copies(int64_t panels, int64_t pairs, int64_t pairs2) {
  const UOpPtr p = make_range(panels, 0);
  return sink({pair_panel_end(0, 2, p, pairs, 1), pair_panel_end(1, 3, p, pairs2, 4)});
}

// The bfloat16 pair copy of a transposed a (a weight gradient's dY^T, read from a float32
// dY [k, m], m = 6 panels - short_rows): P[p, q, r, t] = in[2q + 1 - t, min(6p + r, m - 1)],
// axes 0 (p), 1 (q), 2 (r), 3 (t), the panels past m repeating the last row. Every range
// strides the read (the clamp hides the rows' stride), and the stores are half its bytes.
// With short_rows 2 only the last panel clamps (the heuristic peels it); with 8 the last two
// do (nothing to peel); with 0 none. With `pieces` 3, the sum of three such inputs (slots 1
// to 3), as the bfloat16 concatenation of attention's q, k and v gradients reads them.
UOpPtr transposed_pair_copy(int64_t panels, int64_t pairs, int64_t pieces = 1, int64_t short_rows = 8) {
  auto out = global(0, DType::BFloat16);
  auto p = make_range(panels, 0), q = make_range(pairs, 1), r = make_range(6, 2), t = make_range(2, 3);
  const int64_t m = 6 * panels - short_rows;
  const UOpPtr at = ((p * pairs + q) * 6 + r) * 2 + t;
  const UOpPtr row = p * 6 + r, last = const_int(DType::Int64, m - 1);
  const UOpPtr from = (q * 2 + const_int(DType::Int64, 1) - t) * m +
                      (short_rows == 0 ? row : where(row < const_int(DType::Int64, m), row, last));
  UOpPtr value = load(global(1, f32), from);
  for (int64_t slot = 2; slot <= pieces; ++slot) value = value + load(global(slot, f32), from);
  return sink({end(store(index(out, at), cast(value, DType::BFloat16)), {p, q, r, t})});
}

UOpPtr panel_copy(int64_t rows, int64_t n, int64_t width) {
  auto out = global(0, f32), in = global(1, f32);
  auto jo = make_range(n / width, 0), r = make_range(rows, 1), ji = make_range(width, 2);
  return sink(
      {end(store(index(out, (jo * rows + r) * width + ji), load(in, r * n + jo * width + ji)), {jo, r, ji})});
}

// out[i] = sum_k in[i*n + k]: axes 0 (i) and 1 (k, reduced).
UOpPtr row_sums(int64_t rows, int64_t n) {
  auto out = global(0, f32), in = global(1, f32);
  auto i = make_range(rows, 0), k = make_range(n, 1, AxisKind::Reduce);
  return sink({end(store(index(out, i), reduce(Op::ADD, load(in, i * n + k), {k})), {i})});
}

// out[i, j] = sum_k a[i, k] * b[k, j]: axes 0 (i), 1 (j), 2 (k, reduced).
UOpPtr matmul(int64_t m, int64_t k_len, int64_t n) {
  auto out = global(0, f32), a = global(1, f32), b = global(2, f32);
  auto i = make_range(m, 0), j = make_range(n, 1), k = make_range(k_len, 2, AxisKind::Reduce);
  UOpPtr value = reduce(Op::ADD, load(a, i * k_len + k) * load(b, k * n + j), {k});
  return sink({end(store(index(out, i * n + j), value), {i, j})});
}

// scatter_reduce's kernel for the first part of a split row sum: out (parts blocks of
// parts * n) zeroed over axis 2, then block s's row s gets in's row s added, over
// END(s, j): axes 0 (s) and 1 (j).
UOpPtr fill_then_add(int64_t parts, int64_t n) {
  auto out = global(0, f32), in = global(1, f32);
  auto f = make_range(parts * parts * n, 2);
  auto zeroed = UOp::make(Op::AFTER, out->dtype, {out, end(store(index(out, f), const_float(f32, 0)), {f})});
  auto s = make_range(parts, 0), j = make_range(n, 1);
  auto at = index(zeroed, s * (parts * n + n) + j);
  return sink({end(store(at, kb::load(at) + load(in, s * n + j)), {s, j})});
}

std::vector<float> ramp(size_t n, int mod) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(static_cast<int>(i) % mod) * 0.25f - 1.0f;
  return x;
}

Target v3() { return target_named("x86-64-v3"); }
Target v4() { return target_named("x86-64-v4"); }

}  // namespace

TEST_CASE("heuristic_opts: a list written by hand gives the heuristic's kernel") {
  for (const Target& t : {v3(), v4()}) {
    CAPTURE(t.name);
    const int64_t w = t.vector_bytes / 4;  // float32 lanes: 8 on x86-64-v3, 16 on v4
    // A pair copy (axes p 0, q 1, r 2, t 3): lanes along the pairs q, the halves t and the
    // panel's rows r unrolled whole, and the list is the heuristic's kernel.
    const auto check_pair_lanes = [&](const UOpPtr& kernel, const std::vector<Opt>& opts) {
      REQUIRE(opts.size() >= 3);
      CHECK(opts[0] == Opt{OptKind::Upcast, 1, w});
      CHECK(std::count(opts.begin(), opts.end(), Opt{OptKind::Unroll, 3, 2}) == 1);
      CHECK(std::count(opts.begin(), opts.end(), Opt{OptKind::Unroll, 2, 6}) == 1);
      CHECK(apply_opts(kernel, opts, t) == optimize_kernel(kernel, {true, t, std::nullopt}));
    };
    SUBCASE("elementwise: the contiguous columns to lanes, the rows across threads") {
      const UOpPtr kernel = elementwise(16, 256);
      const std::vector<Opt> by_hand{{OptKind::Upcast, 1, w}, {OptKind::Parallel, 0}};
      CHECK(heuristic_opts(kernel, t) == by_hand);
      CHECK(apply_opts(kernel, by_hand, t) == optimize_kernel(kernel, {true, t, std::nullopt}));
    }
    SUBCASE("row sums: the reduced range to lanes and four accumulators (axis 2, the split's outer part)") {
      const UOpPtr kernel = row_sums(4, 4096);
      const std::vector<Opt> by_hand{
          {OptKind::Upcast, 1, w}, {OptKind::Unroll, 2, 4}, {OptKind::Parallel, 0}};
      CHECK(heuristic_opts(kernel, t) == by_hand);
      CHECK(apply_opts(kernel, by_hand, t) == optimize_kernel(kernel, {true, t, std::nullopt}));
    }
    SUBCASE("a sum at most half a vector long: all its values are the lanes, nothing padded") {
      const UOpPtr kernel = row_sums(64, 4);  // a 2x2 pool's window: padded to w lanes it folded w
      const std::vector<Opt> opts = heuristic_opts(kernel, t);
      REQUIRE(!opts.empty());
      CHECK(opts[0] == Opt{OptKind::Upcast, 1, 0});
      CHECK(std::none_of(opts.begin(), opts.end(), [](const Opt& o) { return o.kind == OptKind::Pad; }));
      CHECK(apply_opts(kernel, opts, t) == optimize_kernel(kernel, {true, t, std::nullopt}));
      const std::vector<Opt> longer = heuristic_opts(row_sums(64, w - 1), t);  // over half: padded to w
      REQUIRE(!longer.empty());
      CHECK(longer[0] == Opt{OptKind::Pad, 1, w});
    }
    SUBCASE("a Float64 scalar read outside the loops leaves a Float32 kernel its full lanes") {
      // Adam's update: Float32 p, m, v in lanes, its Float64 step count read once.
      const DType f64 = DType::Float64;
      auto out = global(0, f32), in = global(1, f32), scalar = global(2, f64), wide = global(3, f64);
      auto i = make_range(16, 0), j = make_range(256, 1);
      const UOpPtr s = cast(load(scalar, const_int(DType::Int64, 0)), f32);
      const UOpPtr kernel = sink({end(store(index(out, i * 256 + j), load(in, i * 256 + j) * s), {i, j})});
      const std::vector<Opt> opts = heuristic_opts(kernel, t);
      REQUIRE(!opts.empty());
      CHECK(opts[0] == Opt{OptKind::Upcast, 1, w});
      Aligned<float> o(16 * 256), x(ramp(16 * 256, 7));
      Aligned<double> sv(std::vector<double>{0.375});
      check_same_results(kernel, apply_opts(kernel, opts, t), {o, x, sv});
      // Float64 read in the loops: as many lanes as a register holds of it, half as many.
      const UOpPtr in_loops = sink(
          {end(store(index(out, i * 256 + j), load(in, i * 256 + j) * cast(load(wide, i * 256 + j), f32)),
               {i, j})});
      const std::vector<Opt> half = heuristic_opts(in_loops, t);
      REQUIRE(!half.empty());
      CHECK(half[0] == Opt{OptKind::Upcast, 1, w / 2});
    }
    SUBCASE("a transposing copy: lanes along one side, 8 rows of the other unrolled") {
      // Loaded a vector per unrolled row and transposed in registers, not gathered or scattered.
      const UOpPtr kernel = transpose(64, 784);  // a Linear weight [64, 784] copied as [784, 64]
      const std::vector<Opt> opts = heuristic_opts(kernel, t);
      REQUIRE(opts.size() >= 2);
      CHECK(opts[0].kind == OptKind::Upcast);
      const int64_t other = opts[0].axis == 0 ? 1 : 0;
      CHECK(std::count(opts.begin(), opts.end(), Opt{OptKind::Unroll, other, 8}) == 1);
      CHECK(apply_opts(kernel, opts, t) == optimize_kernel(kernel, {true, t, std::nullopt}));
      Aligned<float> out(64 * 784), in(ramp(64 * 784, 11));
      check_same_results(kernel, apply_opts(kernel, opts, t), {out, in});
      // A copy that does not transpose unrolls nothing.
      const std::vector<Opt> plain = heuristic_opts(elementwise(64, 784), t);
      CHECK(std::none_of(plain.begin(), plain.end(), [](const Opt& o) { return o.kind == OptKind::Unroll; }));
    }
    SUBCASE("a pair copy: lanes along the pairs, their halves and the panel's rows unrolled whole") {
      // Each row's pairs are one run of the input, read as one vector and shuffled; the panel's
      // 6 rows of pairs one run of the output: no gather, no scatter, no per-pair store.
      const UOpPtr kernel = pair_panel_copy(4, 64);
      const std::vector<Opt> opts = heuristic_opts(kernel, t);
      check_pair_lanes(kernel, opts);
      Aligned<float> out(4 * 64 * 12), in(ramp(4 * 6 * 128, 17));
      check_same_results(kernel, apply_opts(kernel, opts, t), {out, in});
    }
    SUBCASE("two pair copies in one kernel: each copy's halves and rows unrolled whole") {
      // multi_output joins a product's two operands' copies; each END has its own lane range,
      // and each its runs (one lane range for both left both copies gathering and scattering).
      const UOpPtr kernel = two_pair_panel_copies(4, 64, 32);
      const std::vector<Opt> opts = heuristic_opts(kernel, t);
      for (const int64_t halves : {3, 6})
        CHECK(std::count(opts.begin(), opts.end(), Opt{OptKind::Unroll, halves, 2}) == 1);
      for (const int64_t rows : {2, 5})
        CHECK(std::count(opts.begin(), opts.end(), Opt{OptKind::Unroll, rows, 6}) == 1);
      CHECK(apply_opts(kernel, opts, t) == optimize_kernel(kernel, {true, t, std::nullopt}));
      Aligned<float> out(4 * 64 * 12), out2(4 * 32 * 12), in(ramp(4 * 6 * 128, 17)), in2(ramp(4 * 6 * 64, 7));
      check_same_results(kernel, apply_opts(kernel, opts, t), {out, out2, in, in2});
    }
    SUBCASE("a pair copy of a transposed operand: lanes along the pairs, whose stores are runs") {
      // No range takes lanes by traffic (the float32 reads stride every range, the bfloat16
      // stores are half as many bytes); the pairs do, their halves and the panel's rows
      // unrolled, so each step stores one run of 12 x lanes.
      const UOpPtr kernel = transposed_pair_copy(8, 64);
      const std::vector<Opt> opts = heuristic_opts(kernel, t);
      check_pair_lanes(kernel, opts);
      Aligned<uint16_t> out(8 * 64 * 12);
      Aligned<float> in(ramp(46 * 128, 19));
      check_same_results(kernel, apply_opts(kernel, opts, t), {out, in});
    }
    SUBCASE("a pair copy whose unrolled runs would not fit the registers keeps its lanes alone") {
      // Three float32 pieces a lane: 12 bytes, 12 x lanes lanes unrolled would load 144 bytes a
      // lane of the vector (36 zmm on v4, 18 ymm on v3), past the 32 or 16 registers.
      const UOpPtr kernel = transposed_pair_copy(8, 64, 3);
      const std::vector<Opt> opts = heuristic_opts(kernel, t);
      CHECK(std::none_of(opts.begin(), opts.end(), [](const Opt& o) { return o.kind == OptKind::Unroll; }));
      CHECK(std::any_of(opts.begin(), opts.end(), [](const Opt& o) { return o.kind == OptKind::Upcast; }));
      Aligned<uint16_t> out(8 * 64 * 12);
      Aligned<float> a(ramp(46 * 128, 19)), b(ramp(46 * 128, 7)), c(ramp(46 * 128, 5));
      check_same_results(kernel, apply_opts(kernel, opts, t), {out, a, b, c});
    }
    SUBCASE("a copy whose inner loop reads a page apart: prefetch_streams lines of a row per step") {
      // b's panels at n = 1024: each step of r reads one panel row of the next row of b, 4 KiB
      // on; the panels' loop outside it unrolled reads prefetch_streams lines of a row at once.
      const int64_t width = 2 * w, n = t.page_bytes / 4;  // rows a page apart
      const UOpPtr kernel = panel_copy(4, n, width);
      const std::vector<Opt> opts = heuristic_opts(kernel, t);
      const int64_t lines = t.prefetch_streams * t.line_bytes / (width * 4);  // 8 on v3, 4 on v4 here
      CHECK(std::count(opts.begin(), opts.end(), Opt{OptKind::Unroll, 0, lines}) == 1);
      CHECK(apply_opts(kernel, opts, t) == optimize_kernel(kernel, {true, t, std::nullopt}));
      Aligned<float> out(static_cast<size_t>(4 * n)), in(ramp(static_cast<size_t>(4 * n), 13));
      check_same_results(kernel, apply_opts(kernel, opts, t), {out, in});
      // Rows half a page apart: the prefetchers follow them, nothing unrolled.
      const std::vector<Opt> near = heuristic_opts(panel_copy(4, n / 2, width), t);
      CHECK(std::none_of(near.begin(), near.end(), [](const Opt& o) { return o.kind == OptKind::Unroll; }));
    }
    SUBCASE("a length that is no multiple of the lanes is padded first, then blocked") {
      const UOpPtr kernel = row_sums(2, 4 * w * 300 - 3);  // 300 steps of 4 vectors, 3 lanes short
      const std::vector<Opt> opts = heuristic_opts(kernel, t);
      REQUIRE(opts.size() == 5);
      CHECK(opts[0] == Opt{OptKind::Pad, 1, 4 * w});
      CHECK(opts[1] == Opt{OptKind::Upcast, 1, w});
      CHECK(opts[2] == Opt{OptKind::Unroll, 2, 4});
      CHECK(opts[3] == Opt{OptKind::BlockSum, 4, 256});  // 301 iterations per accumulator
      CHECK(opts[4] == Opt{OptKind::Parallel, 0});
      CHECK(apply_opts(kernel, opts, t) == optimize_kernel(kernel, {true, t, std::nullopt}));
    }
    SUBCASE("matmul: one register-tile recipe over its columns, then the parallel loop") {
      const UOpPtr kernel = matmul(24, 64, 48);
      const std::vector<Opt> opts = heuristic_opts(kernel, t);
      REQUIRE(!opts.empty());
      CHECK(opts[0].kind == OptKind::MatmulTile);
      CHECK(opts[0].axis == 1);
      CHECK(opts[0].rows > 1);
      CHECK(apply_opts(kernel, opts, t) == optimize_kernel(kernel, {true, t, std::nullopt}));
    }
  }
}

TEST_CASE("apply_opts: a recorded list replays, from its text too, to the same kernel") {
  const Target t = v4();
  for (const UOpPtr& kernel : {elementwise(3, 21), row_sums(4, 1000), matmul(13, 40, 37)}) {
    std::vector<Opt> recorded;
    const UOpPtr made = optimize_kernel(kernel, {true, t, std::nullopt}, &recorded);
    CHECK(recorded == heuristic_opts(kernel, t));
    CHECK(apply_opts(kernel, parse_opts(to_string(recorded)), t) == made);
    CHECK(optimize_kernel(kernel, {true, t, recorded}) == made);
  }
  // Off, the optimiser applies nothing and records nothing.
  std::vector<Opt> none{{OptKind::Parallel, 0}};
  CHECK(optimize_kernel(elementwise(4, 4), {false, t, std::nullopt}, &none) == elementwise(4, 4));
  CHECK(none.size() == 1);  // untouched: no list was made
}

TEST_CASE("apply_opts: a list the heuristic would not choose computes the same values") {
  const Target t = v3();
  SUBCASE("row sums in lanes of 4, two accumulators, blocks of 16, rows across threads") {
    const UOpPtr kernel = row_sums(4, 1000);
    const std::vector<Opt> opts{{OptKind::Pad, 1, 16},
                                {OptKind::Upcast, 1, 4},
                                {OptKind::Unroll, 2, 2},
                                {OptKind::BlockSum, 4, 16},
                                {OptKind::Parallel, 0}};
    const UOpPtr opt = apply_opts(kernel, opts, t);
    CHECK(opt != optimize_kernel(kernel, {true, t, std::nullopt}));
    Aligned<float> out(4), in(ramp(4 * 1000, 13));
    check_same_results(kernel, opt, {out, in}, true);
  }
  SUBCASE("elementwise with its rows in lanes and its padded columns unrolled") {
    const UOpPtr kernel = elementwise(8, 30);
    const std::vector<Opt> opts{{OptKind::Upcast, 0, 0}, {OptKind::Pad, 1, 4}, {OptKind::Unroll, 1, 4}};
    Aligned<float> out(8 * 30), in(ramp(8 * 30, 7));
    check_same_results(kernel, apply_opts(kernel, opts, t), {out, in});
  }
  SUBCASE("a matmul's register tile of 3 rows and one vector") {
    const UOpPtr kernel = matmul(13, 40, 37);
    const std::vector<Opt> opts{{OptKind::MatmulTile, 1, 1, 3}};
    Aligned<float> out(13 * 37), a(ramp(13 * 40, 5)), b(ramp(40 * 37, 9));
    check_same_results(kernel, apply_opts(kernel, opts, t), {out, a, b}, true);
  }
}

TEST_CASE("apply_opts: an Opt that does not fit the kernel is an error naming it and the kernel's ranges") {
  const Target t = v3();
  const UOpPtr kernel = elementwise(16, 256);
  CHECK_THROWS_WITH_AS(apply_opts(kernel, {{OptKind::Upcast, 1, 7}}, t),
                       doctest::Contains("upcast(1, 7) does not fit the kernel: 7 does not divide"), Error);
  CHECK_THROWS_WITH_AS(apply_opts(kernel, {{OptKind::Unroll, 9, 2}}, t),
                       doctest::Contains("no range has axis id 9"), Error);
  CHECK_THROWS_WITH_AS(apply_opts(kernel, {{OptKind::BlockSum, 1, 16}}, t),
                       doctest::Contains("not one a float sum reduces"), Error);
  CHECK_THROWS_WITH_AS(apply_opts(kernel, {{OptKind::MatmulTile, 1, 2, 4}}, t),
                       doctest::Contains("not that contraction"), Error);
  CHECK_THROWS_WITH_AS(apply_opts(kernel, {{OptKind::Parallel, 0}, {OptKind::Upcast, 1, 8}}, t),
                       doctest::Contains("range splits come before"), Error);
  CHECK_THROWS_WITH_AS(apply_opts(row_sums(4, 64), {{OptKind::Parallel, 1}}, t),
                       doctest::Contains("only a loop runs across threads"), Error);
  CHECK_THROWS_WITH_AS(apply_opts(kernel, {{OptKind::Upcast, 1, 7}}, t), doctest::Contains("1 (loop, 256)"),
                       Error);
  // A tile past the lanes one UOp's vector holds (a list written by hand, or a search's) is refused.
  CHECK_THROWS_WITH_AS(apply_opts(matmul(64, 64, 128), {{OptKind::MatmulTile, 1, 4, 17}}, v4()),
                       doctest::Contains("17 rows x 4 vectors of 16 lanes exceed a tile's 1024 lanes"),
                       Error);
  CHECK_THROWS_WITH_AS(apply_opts(matmul(64, 64, 128), {{OptKind::PairDot, 2, 2}}, v4()),
                       doctest::Contains("no pair-dot instruction"), Error);
  CHECK_THROWS_WITH_AS(apply_opts(kernel, {{OptKind::Blocks, 1, 100}}, t),
                       doctest::Contains("blocks(1, 100) does not fit the kernel: the blocks must divide"),
                       Error);
  CHECK_THROWS_WITH_AS(apply_opts(row_sums(4, 64), {{OptKind::Blocks, 1, 16}}, t),
                       doctest::Contains("only a loop is blocked"), Error);
}

TEST_CASE("blocks: a loop in blocks, the loop over the blocks first, computes the same values") {
  const UOpPtr kernel = transposed_pair_copy(4, 64, 3);  // axes p 0, q 1, r 2, t 3
  const UOpPtr blocked = apply_opts(kernel, {{OptKind::Blocks, 1, 16}}, v4());
  const UOpPtr& end = blocked->src.at(0);
  REQUIRE(end->op == Op::END);
  CHECK(end->src.at(1)->get<AxisArg>().id == 4);  // the blocks' loop, a fresh axis, outermost
  CHECK(trip(end->src[1]) == 4);                  // 64 pairs in blocks of 16
  CHECK(end->src.at(2)->get<AxisArg>().id == 0);  // then the panels
  Aligned<uint16_t> out(4 * 64 * 12);
  Aligned<float> a(ramp(22 * 128, 19)), b(ramp(22 * 128, 7)), c(ramp(22 * 128, 5));
  check_same_results(kernel, blocked, {out, a, b, c});
}

TEST_CASE("peel: a pair copy's last panel, which alone clamps its rows, becomes an END of its own") {
  // m = 22 rows in 4 panels: only the last panel's rows 22 and 23 clamp. Peeled, the other
  // panels read 6 consecutive rows of each source row, the unit stride the lanes take.
  const UOpPtr kernel = transposed_pair_copy(4, 64, 1, 2);
  const UOpPtr peeled = apply_opts(kernel, {{OptKind::Peel, 0}}, v4());
  REQUIRE(peeled->src.size() == 2);
  const UOpPtr &rest = peeled->src[0], &last = peeled->src[1];
  CHECK(rest->src.at(1)->get<AxisArg>().id == 1);  // both under the pairs' loop, which they share
  CHECK(last->src.at(1) == rest->src[1]);
  CHECK(trip(rest->src.at(2)) == 3);  // the panels but the last
  CHECK(last->src.size() == 4);       // the last panel: the pairs, fresh rows and halves
  const UOpPtr read = [&] {
    for (const auto& n : toposort(rest))
      if (n->op == Op::INDEX && n->dtype.base() == f32) return n;
    return UOpPtr{};
  }();
  REQUIRE(read);
  CHECK(address_stride(read, rest->src.at(3)) == std::optional<int64_t>{1});  // along the rows
  for (const Target& t : {v3(), v4()}) {
    CAPTURE(t.name);
    const std::vector<Opt> opts = heuristic_opts(kernel, t);
    REQUIRE(!opts.empty());
    CHECK(opts[0] == Opt{OptKind::Peel, 0});
    CHECK(std::count(opts.begin(), opts.end(), Opt{OptKind::Upcast, 2, 0}) == 1);  // lanes along the rows
    Aligned<uint16_t> out(4 * 64 * 12);
    Aligned<float> in(ramp(22 * 128, 19));
    check_same_results(kernel, apply_opts(kernel, opts, t), {out, in});
    check_same_results(kernel, peeled, {out, in});
    // Rows that run out in two panels: peeling one leaves the clamp, so nothing is peeled.
    const std::vector<Opt> two = heuristic_opts(transposed_pair_copy(4, 64, 1, 8), t);
    CHECK(std::none_of(two.begin(), two.end(), [](const Opt& o) { return o.kind == OptKind::Peel; }));
  }
  CHECK_THROWS_WITH_AS(apply_opts(row_sums(4, 64), {{OptKind::Peel, 1}}, v4()),
                       doctest::Contains("only a loop of 2 or more"), Error);
  CHECK_THROWS_WITH_AS(apply_opts(row_sums(4, 64), {{OptKind::Peel, 0}}, v4()),
                       doctest::Contains("only a kernel of one END over two loops or more"), Error);
}

TEST_CASE("heuristic_opts: a copy whose inner sweep crosses more lines than half of L1 is blocked") {
  // A pair copy of three float32 sources transposed (the GPT's gradient through a GELU): a
  // step of the pairs' loop reads lanes x 2 halves rows of each source, a line each, and
  // the next panel reads 6 elements further along the same lines. With 32 KiB of L1 the
  // budget is 16 KiB, 256 lines: on v4 a step touches 16 x 2 x 3 = 96 lines, so blocks of
  // 2 steps (192 lines); on v3 8 x 2 x 3 = 48 lines, 5 steps at most, 4 dividing the 32.
  for (Target t : {v3(), v4()}) {
    CAPTURE(t.name);
    t.l1d_bytes = 32 << 10, t.line_bytes = 64, t.cores = 2;
    const int64_t w = t.vector_bytes / 4;
    const UOpPtr kernel = transposed_pair_copy(4, 256, 3, 8);
    const std::vector<Opt> opts = heuristic_opts(kernel, t);
    const Opt blocks{OptKind::Blocks, 4, w == 16 ? 2 : 4};  // axis 4: the pairs' loop outside the lanes
    CHECK(std::count(opts.begin(), opts.end(), blocks) == 1);
    CHECK(opts.back().kind == OptKind::Parallel);
    const UOpPtr made = apply_opts(kernel, opts, t);
    CHECK(trip(made->src.at(0)->src.at(1)) == 256 / w / blocks.amount);  // the threads share the blocks
    Aligned<uint16_t> out(4 * 256 * 12);
    Aligned<float> a(ramp(22 * 512, 19)), b(ramp(22 * 512, 7)), c(ramp(22 * 512, 5));
    check_same_results(kernel, made, {out, a, b, c});
    // One source: 16 x 2 lines a step, 8 steps (256 lines) fit the budget; nothing is blocked.
    const std::vector<Opt> one = heuristic_opts(transposed_pair_copy(4, 128, 1), t);
    CHECK(std::none_of(one.begin(), one.end(), [](const Opt& o) { return o.kind == OptKind::Blocks; }));
  }
}

TEST_CASE("a kernel with a store outside its outer loop never runs that loop across threads") {
  // Each thread's task runs the whole kernel for its slice of the parallel range: the
  // zero fill would run once per task and wipe the rows the tasks before it added (an
  // Embedding's gradient came out with 3 of 4 rows zero).
  const UOpPtr kernel = fill_then_add(4, 4096);
  for (const Target& t : {v3(), v4()}) {
    CAPTURE(t.name);
    const std::vector<Opt> opts = heuristic_opts(kernel, t);
    CHECK(std::none_of(opts.begin(), opts.end(), [](const Opt& o) { return o.kind == OptKind::Parallel; }));
    CHECK_THROWS_WITH_AS(apply_opts(kernel, {{OptKind::Parallel, 0}}, t),
                         doctest::Contains("a store does not move along the range"), Error);
    // Compiled and run as the executor runs it, one task per element of the
    // parallel range: the interpreter's values on the kernel as written.
    const UOpPtr made = optimize_kernel(kernel, {true, t, std::nullopt});
    Aligned<float> want(4 * 4 * 4096, 7.0f), got(4 * 4 * 4096, 7.0f), in(ramp(4 * 4096, 11));
    void* want_bufs[] = {want.data(), in.data()};
    interpret_kernel(kernel, want_bufs, {});
    const KernelFn fn = compile_kernel(made, "fill_then_add");
    void* got_bufs[] = {got.data(), in.data()};
    const int64_t tasks = parallel_extent(made, {});
    for (int64_t task = 0; task < tasks; ++task) fn(got_bufs, nullptr, task, task + 1);
    CHECK(got.values() == want.values());
  }
}

TEST_CASE("finish_heuristic after the heuristic's range splits gives the heuristic's list") {
  for (const Target& t : {v3(), v4()})
    for (const UOpPtr& kernel : {elementwise(3, 21), row_sums(4, 1000), matmul(13, 40, 37)}) {
      CAPTURE(t.name);
      const std::vector<Opt> heuristic = heuristic_opts(kernel, t);
      OptState s(kernel, t);
      for (const Opt& o : heuristic)
        if (o.kind != OptKind::BlockSum && o.kind != OptKind::AlignSides && o.kind != OptKind::Parallel)
          s.apply(o);
      finish_heuristic(s);
      CHECK(s.applied() == heuristic);
    }
}

TEST_CASE("search_moves: every step fits, finishes, and computes the kernel's values") {
  const Target t = v3();
  struct Case {
    UOpPtr kernel;
    std::vector<std::vector<float>> inputs;
    size_t outputs;
  };
  const std::vector<Case> cases{
      {elementwise(8, 30), {ramp(8 * 30, 7)}, 8 * 30},
      {row_sums(4, 1000), {ramp(4 * 1000, 13)}, 4},
      {matmul(13, 40, 37), {ramp(13 * 40, 5), ramp(40 * 37, 9)}, 13 * 37},
  };
  for (const Case& c : cases) {
    const auto moves = search_moves(OptState(c.kernel, t));
    CHECK(moves.size() >= 2);
    bool tile = false;
    for (const std::vector<Opt>& move : moves) {
      CAPTURE(to_string(move));
      tile |= move.at(0).kind == OptKind::MatmulTile;
      OptState s(c.kernel, t);
      for (const Opt& o : move) s.apply(o);
      finish_heuristic(s);
      std::vector<Aligned<float>> slots;
      slots.emplace_back(c.outputs);
      for (const auto& in : c.inputs) slots.emplace_back(in);
      std::vector<Slot> views(slots.begin(), slots.end());
      check_same_results(c.kernel, s.kernel(), views, true);
    }
    CHECK(tile == (c.kernel == cases[2].kernel));  // tiles for the contraction only
  }
}
