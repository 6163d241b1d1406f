// Register tiles over contractions of symbolic extent (a DEFINE_VAR bound at launch):
// the heuristic plans the tile for the variable's upper bound, the tile pads what it
// splits of a symbolic range (its tail masked or a real row again, never memory past
// the end), and one compiled kernel equals the kernel-IR interpreter at every binding,
// 1 and the bounds included, for AVX-512 (x86-64-v4) and AVX2 (x86-64-v3).
#include "codegen/codegen.hpp"
#include "codegen/heuristic.hpp"
#include "codegen/opt.hpp"
#include "codegen/register_tile.hpp"
#include "codegen/run_kernel.hpp"
#include "codegen/symbolic_bindings.hpp"
#include "tests/support/sanitizer_budget.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace loom;
using namespace loom::test;

namespace {

// Under the sanitizers the first only (tests/support/sanitizer_budget.hpp).
const std::vector<const char*> kTargets =
    loom::test::sanitizer_budget<const char*>({"x86-64-v4", "x86-64-v3"});

// out[i, j] = sum_k a[i, k] * b[k, j] (+ bias[j], relu), all row-major; m and k
// either constants or expressions over one variable.
UOpPtr matmul(const UOpPtr& m, const UOpPtr& k, int64_t n, bool epilogue = false) {
  const auto f32 = DType::Float32;
  auto out = global(0, f32), a = global(1, f32), b = global(2, f32);
  auto i = make_range(m, 0), j = make_range(n, 1), r = make_range(k, 2, AxisKind::Reduce);
  UOpPtr value = reduce(Op::ADD, load(a, i * k + r) * load(b, r * n + j), {r});
  if (epilogue) value = alu(Op::MAX, {value + load(global(3, f32), j), const_float(f32, 0)});
  return sink({end(store(index(out, i * n + j), value), {i, j})});
}

// out[i, j] = sum_k a[i, k] * b[k, j] with n columns: b's rows and the output's n apart.
UOpPtr matmul_columns(const UOpPtr& m, int64_t k, const UOpPtr& n) {
  const auto f32 = DType::Float32;
  auto out = global(0, f32), a = global(1, f32), b = global(2, f32);
  auto i = make_range(m, 0), j = make_range(n, 1), r = make_range(k, 2, AxisKind::Reduce);
  const UOpPtr value = reduce(Op::ADD, load(a, i * k + r) * load(b, r * n + j), {r});
  return sink({end(store(index(out, i * n + j), value), {i, j})});
}

bool has(const std::vector<Opt>& opts, OptKind kind) {
  for (const Opt& o : opts)
    if (o.kind == kind) return true;
  return false;
}

}  // namespace

TEST_CASE("symbolic rows: the heuristic picks the matmul tile it picks for the variable's upper bound") {
  const auto n = make_var("n", 1, 300);
  for (const char* t : kTargets) {
    INFO(t);
    const Target& target = target_named(t);
    const std::string symbolic = to_string(heuristic_opts(matmul(n, const_i64(64), 48), target));
    const std::string bound = to_string(heuristic_opts(matmul(const_i64(300), const_i64(64), 48), target));
    CHECK(symbolic.find("matmul_tile(") != std::string::npos);
    CHECK(symbolic == bound);
  }
  // What LOOM_DEBUG=3 prints for the kernel: on AVX2 tiles of six rows by two vectors of 8
  // lanes, the loop over blocks of columns (axis 5) the threads'; the row tiles' loop inside
  // it runs (n + 5) / 6 times. On AVX-512 the 48 columns are 3 whole vectors, which tiles of
  // two would pad to 64: one tile of 3 vectors spans them, 6 rows, the row tiles' loop the
  // threads' (codegen/register_tile.cpp).
  CHECK(to_string(heuristic_opts(matmul(n, const_i64(64), 48), target_named("x86-64-v4"))) ==
        "[matmul_tile(1, 3, rows=6), parallel(7)]");
  CHECK(to_string(heuristic_opts(matmul(n, const_i64(64), 48), target_named("x86-64-v3"))) ==
        "[matmul_tile(1, 2, rows=6), parallel(5)]");
}

TEST_CASE("symbolic rows: an n x 64 @ 64 x 48 product, rows padded to whole tiles, equals the interpreter") {
  const auto n = make_var("n", 1, 60);
  const auto kernel = matmul(n, const_i64(64), 48);
  for (const char* t : kTargets) {
    const auto opts =
        check_bindings(kernel, "k_sym_rows_mm", t, {1, 2, 5, 6, 7, 13, 59, 60}, {60 * 48, 60 * 64, 64 * 48});
    CHECK(has(opts, OptKind::MatmulTile));
  }
}

TEST_CASE("symbolic rows: columns that leave a tail (40 of 2 x 16 lanes), with a bias and relu epilogue") {
  const auto n = make_var("n", 1, 50);
  const auto kernel = matmul(n, const_i64(33), 40, true);
  for (const char* t : kTargets) {
    const auto opts =
        check_bindings(kernel, "k_sym_rows_tail", t, {1, 3, 11, 49, 50}, {50 * 40, 50 * 33, 33 * 40, 40});
    CHECK(has(opts, OptKind::MatmulTile));
  }
}

TEST_CASE("symbolic rows that may be none: n of 0 masks every access of the padded rows") {
  // No last row to read again: the padding is pad_range's, loads and stores under n.
  const auto n = make_var("n", 0, 20);
  const auto kernel = matmul(n, const_i64(16), 32);
  for (const char* t : kTargets) {
    const auto opts =
        check_bindings(kernel, "k_sym_rows_zero", t, {0, 1, 7, 20}, {20 * 32, 20 * 16, 16 * 32});
    CHECK(has(opts, OptKind::MatmulTile));
  }
}

TEST_CASE("symbolic rows, b packed in panels of 16 columns: one tile of rows passes every panel") {
  // As schedule/panel_packing.cpp packs b: b[k, jo*16 + ji] at p[jo, k, ji]. Symbolic rows
  // are not padded to whole row blocks (a block for the bound would make n = 1 compute it).
  const auto f32 = DType::Float32;
  const auto n = make_var("n", 1, 26);
  const int64_t kk = 48, cols = 64, w = 16;
  auto out = global(0, f32), a = global(1, f32), p = global(2, f32);
  auto i = make_range(n, 0), jo = make_range(cols / w, 1), ji = make_range(w, 3);
  auto r = make_range(kk, 2, AxisKind::Reduce);
  const UOpPtr value = reduce(Op::ADD, load(a, i * kk + r) * load(p, jo * (kk * w) + r * w + ji), {r});
  const auto kernel = sink({end(store(index(out, i * cols + jo * w + ji), value), {i, jo, ji})});
  REQUIRE(matmul_axes(kernel));
  CHECK(matmul_axes(kernel)->panels.size() == 1);
  for (const char* t : kTargets) {
    const auto opts =
        check_bindings(kernel, "k_sym_rows_panels", t, {1, 5, 6, 7, 25, 26}, {26 * cols, 26 * kk, kk * cols});
    CHECK(has(opts, OptKind::MatmulTile));
  }
}

TEST_CASE("a symbolic batch among b's panels: out[b, o, j] = sum_c w[o, c] * x[b, c, j] over B images") {
  // A 1x1 convolution over a DataLoader's batch of B images: b (x) reads along the batch,
  // which the tile does not split; it stays a loop outside the tile, whatever B is.
  const auto f32 = DType::Float32;
  const auto images = make_var("B", 1, 9);
  const int64_t channels_out = 24, channels = 16, pixels = 40;
  auto out = global(0, f32), w = global(1, f32), x = global(2, f32);
  auto b = make_range(images, 0), o = make_range(channels_out, 1), j = make_range(pixels, 3);
  auto c = make_range(channels, 2, AxisKind::Reduce);
  const UOpPtr value =
      reduce(Op::ADD, load(w, o * channels + c) * load(x, b * (channels * pixels) + c * pixels + j), {c});
  const auto kernel =
      sink({end(store(index(out, b * (channels_out * pixels) + o * pixels + j), value), {b, o, j})});
  REQUIRE(matmul_axes(kernel));
  CHECK(matmul_axes(kernel)->panels == std::vector<UOpPtr>{b});
  for (const char* t : kTargets) {
    const auto opts =
        check_bindings(kernel, "k_sym_batch_panel", t, {1, 2, 8, 9},
                       {9 * channels_out * pixels, channels_out * channels, 9 * channels * pixels});
    CHECK(has(opts, OptKind::MatmulTile));
  }
}

TEST_CASE("a symbolic sum: 24 x n @ n x 64, the tile's loop over k runs n steps, nothing masked") {
  // The plain tile does not split its k (one loop, no blocks): a symbolic k is that loop
  // with the variable's end, no tail to mask.
  const auto n = make_var("n", 1, 100);
  const auto kernel = matmul(const_i64(24), n, 64);
  for (const char* t : kTargets) {
    INFO(t);
    CHECK(to_string(heuristic_opts(kernel, target_named(t))) ==
          to_string(heuristic_opts(matmul(const_i64(24), const_i64(100), 64), target_named(t))));
    const auto opts =
        check_bindings(kernel, "k_sym_k", t, {1, 2, 15, 16, 17, 99, 100}, {24 * 64, 24 * 100, 100 * 64});
    CHECK(has(opts, OptKind::MatmulTile));
  }
}

TEST_CASE("attention's scores @ v: T x T @ T x 64, rows and the sum both T, one tile for every T") {
  const auto tv = make_var("T", 1, 70);
  const auto kernel = matmul(tv, tv, 64);
  for (const char* t : kTargets) {
    const auto opts =
        check_bindings(kernel, "k_sym_pv", t, {1, 2, 6, 7, 64, 69, 70}, {70 * 64, 70 * 70, 70 * 64});
    CHECK(has(opts, OptKind::MatmulTile));
  }
}

TEST_CASE(
    "a symbolic sum in a dot tile (a conv's weight gradient over n positions): lanes along it, masked") {
  // dw[co, kw] = sum_p x[p + kw] * dy[co, p]: three columns, both factors contiguous along
  // the sum, so the sum goes to the lanes, padded to whole vectors, its tail masked.
  const auto f32 = DType::Float32;
  const auto n = make_var("n", 1, 300);
  auto out = global(0, f32), x = global(1, f32), dy = global(2, f32);
  auto co = make_range(8, 0), kw = make_range(3, 1), p = make_range(n, 2, AxisKind::Reduce);
  const UOpPtr value = reduce(Op::ADD, load(x, p + kw) * load(dy, co * n + p), {p});
  const auto kernel = sink({end(store(index(out, co * 3 + kw), value), {co, kw})});
  for (const char* t : kTargets) {
    const auto opts =
        check_bindings(kernel, "k_sym_dot", t, {1, 2, 15, 16, 17, 299, 300}, {8 * 3, 302, 8 * 300});
    CHECK(has(opts, OptKind::DotTile));
  }
}

TEST_CASE("a blocked dot tile of symbolic rows: its row tiles stay the threads' loop, outside the blocks") {
  // dw[co, kw] = sum_{b, p} x[b, p + kw] * dy[b, co, p] over 64 images of 512 positions: a
  // tile's rows of dy over the batch outgrow a quarter of the L2, so the sum runs in blocks. Of
  // a symbolic count, the row tiles cannot go in groups a core; they stay outermost, shared by
  // the threads, as before the groups.
  const auto f32 = DType::Float32;
  const auto n = make_var("co", 1, 12);
  auto out = global(0, f32), x = global(1, f32), dy = global(2, f32);
  auto co = make_range(n, 0), kw = make_range(3, 1), b = make_range(64, 2, AxisKind::Reduce),
       p = make_range(512, 3, AxisKind::Reduce);
  const UOpPtr value = reduce(Op::ADD, load(x, b * 514 + p + kw) * load(dy, (b * n + co) * 512 + p), {b, p});
  const auto kernel = sink({end(store(index(out, co * 3 + kw), value), {co, kw})});
  for (const char* t : kTargets) {
    INFO(t);
    Target target = target_named(t);
    target.cores = 2, target.l2_bytes = 1 << 20;
    const UOpPtr opt = optimize_kernel(kernel, {true, target});
    REQUIRE(opt->src.size() == 1);
    CHECK(opt->src[0]->src.at(1)->get<AxisArg>().kind == AxisKind::Parallel);
    const auto opts =
        check_bindings(kernel, "k_sym_dot_blocked", t, {1, 5, 6, 12}, {12 * 3, 64 * 514, 64 * 12 * 512});
    CHECK(has(opts, OptKind::DotTile));
  }
}

TEST_CASE("symbolic columns: 24 x 64 @ 64 x n, the columns padded to whole tiles, b and the store masked") {
  const auto n = make_var("n", 1, 100);
  const auto kernel = matmul_columns(const_i64(24), 64, n);
  for (const char* t : kTargets) {
    INFO(t);
    CHECK(to_string(heuristic_opts(kernel, target_named(t))) ==
          to_string(heuristic_opts(matmul_columns(const_i64(24), 64, const_i64(100)), target_named(t))));
    const auto opts = check_bindings(kernel, "k_sym_cols_mm", t, {1, 7, 8, 15, 16, 17, 32, 33, 99, 100},
                                     {24 * 100, 24 * 64, 64 * 100});
    CHECK(has(opts, OptKind::MatmulTile));
  }
}

TEST_CASE("attention's q @ k^T with k^T stored [64, T]: T x T scores, rows and columns both T") {
  const auto tv = make_var("T", 1, 70);
  const auto kernel = matmul_columns(tv, 64, tv);
  for (const char* t : kTargets) {
    const auto opts =
        check_bindings(kernel, "k_sym_qk", t, {1, 2, 6, 7, 16, 17, 69, 70}, {70 * 70, 70 * 64, 64 * 70});
    CHECK(has(opts, OptKind::MatmulTile));
  }
}

TEST_CASE("symbolic rows with a second output riding along the tile's rows and columns") {
  // A kernel of two ENDs (docs/kernel-ir.md): the product, and beside it d[i, j] = 2 c[i, j]
  // over the same rows and columns. The side END's padded rows are masked, its loads a
  // vector of each row where the main END's read the last row again.
  const auto f32 = DType::Float32;
  const auto n = make_var("n", 1, 40);
  const int64_t kk = 24, cols = 48;
  auto out = global(0, f32), a = global(1, f32), b = global(2, f32), c = global(3, f32), d = global(4, f32);
  auto i = make_range(n, 0), j = make_range(cols, 1), r = make_range(kk, 2, AxisKind::Reduce);
  const UOpPtr value = reduce(Op::ADD, load(a, i * kk + r) * load(b, r * cols + j), {r});
  const auto kernel =
      sink({end(store(index(out, i * cols + j), value), {i, j}),
            end(store(index(d, i * cols + j), load(c, i * cols + j) * const_float(f32, 2)), {i, j})});
  REQUIRE(matmul_axes(kernel));
  for (const char* t : kTargets) {
    const auto opts = check_bindings(kernel, "k_sym_rows_side", t, {1, 5, 6, 7, 39, 40},
                                     {40 * cols, 40 * kk, kk * cols, 40 * cols, 40 * cols});
    CHECK(has(opts, OptKind::MatmulTile));
  }
}

TEST_CASE("a decoding step's p @ v: [1, T] @ [T, 64], a GEMV whose sum is T in blocks of 8 rows") {
  // One new token's weights over the T cached values: one-row tiles over the 64 columns,
  // T padded to whole blocks of 8 rows of v (gemv_rows), the last block's rows past T masked.
  const auto f32 = DType::Float32;
  const auto tv = make_var("T", 1, 300);
  auto out = global(0, f32), p = global(1, f32), v = global(2, f32);
  auto j = make_range(64, 0), t = make_range(tv, 1, AxisKind::Reduce);
  const auto kernel =
      sink({end(store(index(out, j), reduce(Op::ADD, load(p, t) * load(v, t * 64 + j), {t})), {j})});
  REQUIRE(gemv_axes(kernel));
  for (const char* tg : kTargets) {
    INFO(tg);
    // The sum's loop is gemv_rows (8) long, inside a loop over (T + 7) / 8 blocks.
    const Target& target = target_named(tg);
    const UOpPtr opt = optimize_kernel(kernel, {true, target});
    bool block = false, blocks = false;
    for (const auto& r : ranges_of(opt)) {
      block |= r->get<AxisArg>().kind == AxisKind::Reduce && trip(r) == target.gemv_rows();
      blocks |= r->get<AxisArg>().kind == AxisKind::Loop && !trip(r) &&
                trip_bound(r) == (300 + target.gemv_rows() - 1) / target.gemv_rows();
    }
    CHECK(block);
    CHECK(blocks);
    const auto opts =
        check_bindings(kernel, "k_sym_gemv_k", tg, {1, 2, 7, 8, 9, 255, 299, 300}, {64, 300, 300 * 64});
    CHECK(has(opts, OptKind::GemvTile));
  }
}

TEST_CASE("a GEMV over symbolic columns ([1, 64] @ [64, n]) and a batch of n GEMVs") {
  const auto f32 = DType::Float32;
  const auto n = make_var("n", 1, 100);
  {
    auto out = global(0, f32), a = global(1, f32), b = global(2, f32);
    auto j = make_range(n, 0), r = make_range(64, 1, AxisKind::Reduce);
    const auto kernel =
        sink({end(store(index(out, j), reduce(Op::ADD, load(a, r) * load(b, r * n + j), {r})), {j})});
    REQUIRE(gemv_axes(kernel));
    for (const char* tg : kTargets) {
      const auto opts =
          check_bindings(kernel, "k_sym_gemv_cols", tg, {1, 15, 16, 17, 33, 99, 100}, {100, 64, 64 * 100});
      CHECK(has(opts, OptKind::GemvTile));
    }
  }
  {
    // out[t, j] = sum_k a[t, k] * b[t, k, j]: t a batch both factors use, n of them.
    auto out = global(0, f32), a = global(1, f32), b = global(2, f32);
    auto t = make_range(n, 0), j = make_range(48, 1), r = make_range(16, 2, AxisKind::Reduce);
    const UOpPtr value = reduce(Op::ADD, load(a, t * 16 + r) * load(b, t * (16 * 48) + r * 48 + j), {r});
    const auto kernel = sink({end(store(index(out, t * 48 + j), value), {t, j})});
    REQUIRE(gemv_axes(kernel));
    for (const char* tg : kTargets) {
      const auto opts = check_bindings(kernel, "k_sym_gemv_batch", tg, {1, 2, 3, 99, 100},
                                       {100 * 48, 100 * 16, 100 * 16 * 48});
      CHECK(has(opts, OptKind::GemvTile));
    }
  }
}

TEST_CASE("a column sum down n rows a page apart: one-row tiles over the columns, n in blocks of 8 rows") {
  const auto f32 = DType::Float32;
  const auto n = make_var("n", 1, 40);
  auto out = global(0, f32), b = global(1, f32);
  auto j = make_range(1024, 0), r = make_range(n, 1, AxisKind::Reduce);
  const auto kernel = sink({end(store(index(out, j), reduce(Op::ADD, load(b, r * 1024 + j), {r})), {j})});
  REQUIRE(column_sum_axes(kernel, target_named("x86-64-v4")));
  for (const char* tg : kTargets) {
    const auto opts = check_bindings(kernel, "k_sym_colsum", tg, {1, 2, 7, 8, 9, 39, 40}, {1024, 40 * 1024});
    CHECK(has(opts, OptKind::ColumnSumTile));
  }
}
