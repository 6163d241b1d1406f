#include "codegen/register_tile.hpp"

#include "codegen/codegen.hpp"
#include "codegen/heuristic.hpp"
#include "codegen/run_kernel.hpp"
#include "ir/target.hpp"
#include "tests/support/sanitizer_budget.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <string>

using namespace loom;
using namespace loom::test;

namespace {

struct MatmulShape {
  int64_t batch, m, k, n;
  bool a_transposed = false;  // a stored [k, m], as in the weight gradient x^T dy
};

// out[t, i, j] = sum_k a[t, i, k] * b[t, k, j] (+ bias[j], relu, with an epilogue), all row-major.
UOpPtr matmul_kernel(const MatmulShape& s, bool epilogue = false) {
  const auto f32 = DType::Float32;
  auto out = global(0, f32), a = global(1, f32), b = global(2, f32);
  auto t = make_range(s.batch, 0), i = make_range(s.m, 1), j = make_range(s.n, 2);
  auto k = make_range(s.k, 3, AxisKind::Reduce);
  auto a_at = t * (s.m * s.k) + (s.a_transposed ? k * s.m + i : i * s.k + k);
  UOpPtr value = reduce(Op::ADD, load(a, a_at) * load(b, t * (s.k * s.n) + k * s.n + j), {k});
  if (epilogue) {
    auto bias = global(3, f32);
    value = alu(Op::MAX, {value + load(bias, j), const_float(f32, 0)});
  }
  return sink({end(store(index(out, t * (s.m * s.n) + i * s.n + j), value), {t, i, j})});
}

// Columns padded to whole panels of 16, as schedule/panel_packing.cpp pads them.
int64_t padded_columns(int64_t n) { return (n + 15) / 16 * 16; }

// The same product with b packed as schedule/panel_packing.cpp packs it: b[t, k, jo*16 + ji]
// at P[t, jo, k, ji]; the output's columns j = jo*16 + ji as two ranges, padded to whole
// panels where 16 does not divide n (P's last panel is whole), every access at j but
// P's guarded by j < n. With `row_term`, the row's index is added to each sum: a value that
// depends on the row other than through a load.
UOpPtr packed_kernel(const MatmulShape& s, bool epilogue = false, bool row_term = false) {
  const auto f32 = DType::Float32;
  const int64_t w = 16, np = padded_columns(s.n);
  auto out = global(0, f32), a = global(1, f32), p = global(2, f32);
  auto t = make_range(s.batch, 0), i = make_range(s.m, 1), jo = make_range(np / w, 2), ji = make_range(w, 4);
  auto k = make_range(s.k, 3, AxisKind::Reduce);
  const UOpPtr j = jo * w + ji, inside = np == s.n ? nullptr : j < s.n;
  auto a_at = t * (s.m * s.k) + (s.a_transposed ? k * s.m + i : i * s.k + k);
  auto p_at = t * (s.k * np) + jo * (s.k * w) + k * w + ji;
  UOpPtr value = reduce(Op::ADD, load(a, a_at) * load(p, p_at), {k});
  if (epilogue) {
    auto bias = global(3, f32);
    value = alu(Op::MAX, {value + load(make_index(bias, {j}, inside)), const_float(f32, 0)});
  }
  if (row_term) value = value + cast(i, f32);
  return sink({end(store(make_index(out, {t * (s.m * s.n) + i * s.n + j}, inside), value), {t, i, jo, ji})});
}

// The packed product with a in row panels too, m a multiple of 6 (as the schedule leaves
// it: the rows split into io * 6 + ii, Q[t, io, k, ii]).
UOpPtr row_panels_kernel(const MatmulShape& s) {
  const auto f32 = DType::Float32;
  const int64_t w = 16, r = 6;
  auto out = global(0, f32), q = global(1, f32), p = global(2, f32);
  auto t = make_range(s.batch, 0), io = make_range(s.m / r, 1), ii = make_range(r, 5);
  auto jo = make_range(s.n / w, 2), ji = make_range(w, 4), k = make_range(s.k, 3, AxisKind::Reduce);
  auto q_at = t * (s.m * s.k) + io * (s.k * r) + k * r + ii;
  auto p_at = t * (s.k * s.n) + jo * (s.k * w) + k * w + ji;
  UOpPtr value = reduce(Op::ADD, load(q, q_at) * load(p, p_at), {k});
  auto out_at = t * (s.m * s.n) + (io * r + ii) * s.n + jo * w + ji;
  return sink({end(store(index(out, out_at), value), {t, io, ii, jo, ji})});
}

// The product for one row of a, as the schedule leaves it (no range of size
// 1): out[t, j] = sum_k a[t, k] * b[t, k, j] (+ bias[j], relu). s.m is ignored.
UOpPtr gemv_kernel(const MatmulShape& s, bool epilogue = false) {
  const auto f32 = DType::Float32;
  auto out = global(0, f32), a = global(1, f32), b = global(2, f32);
  auto t = make_range(s.batch, 0), j = make_range(s.n, 2), k = make_range(s.k, 3, AxisKind::Reduce);
  UOpPtr value = reduce(Op::ADD, load(a, t * s.k + k) * load(b, t * (s.k * s.n) + k * s.n + j), {k});
  if (epilogue) {
    auto bias = global(3, f32);
    value = alu(Op::MAX, {value + load(bias, j), const_float(f32, 0)});
  }
  return sink({end(store(index(out, t * s.n + j), value), {t, j})});
}

// A sum down the rows of blocks of b: out[t, j] = sum_k b[t, k, j], as split_reduceop's
// blocks of rows leave [K, N].sum(0) (t: the blocks; no t when `blocks` is 0).
UOpPtr column_sum_kernel(int64_t blocks, int64_t k, int64_t n) {
  const auto f32 = DType::Float32;
  auto out = global(0, f32), b = global(1, f32);
  auto j = make_range(n, 2), r = make_range(k, 3, AxisKind::Reduce);
  if (blocks == 0) return sink({end(store(index(out, j), reduce(Op::ADD, load(b, r * n + j), {r})), {j})});
  auto t = make_range(blocks, 0);
  return sink(
      {end(store(index(out, t * n + j), reduce(Op::ADD, load(b, t * (k * n) + r * n + j), {r})), {t, j})});
}

// Small whole numbers: every product and partial sum is exact in float32, so
// fused and unfused multiply-adds, in any order, give the same bits.
std::vector<float> whole_numbers(int64_t count, int seed) {
  std::vector<float> v(static_cast<size_t>(count));
  for (size_t n = 0; n < v.size(); ++n)
    v[n] = static_cast<float>((n * 7 + static_cast<size_t>(seed)) % 9) - 4.0f;
  return v;
}

std::vector<UOpPtr> of_kind(const UOpPtr& kernel, AxisKind k) {
  std::vector<UOpPtr> out;
  for (const auto& r : ranges_of(kernel))
    if (r->get<AxisArg>().kind == k) out.push_back(r);
  return out;
}
// A range's constant trip count (every range these tests read has one).
int64_t extent(const UOpPtr& r) { return r->src.at(0)->const_int(); }

// The loops of the kernel's one END, outermost first (not its lanes: unroll and upcast).
std::vector<UOpPtr> loops_in_order(const UOpPtr& kernel) {
  const UOpPtr& end = kernel->src.at(0);
  std::vector<UOpPtr> loops;
  for (size_t r = 1; r < end->src.size(); ++r) {
    const AxisKind k = end->src[r]->get<AxisArg>().kind;
    if (k != AxisKind::Unroll && k != AxisKind::Upcast) loops.push_back(end->src[r]);
  }
  return loops;
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Accumulator registers of `lanes` float lanes in a lowered kernel.
int accumulators(const UOpPtr& lowered, int lanes) {
  int n = 0;
  for (const auto& u : toposort(lowered))
    n += u->op == Op::DEFINE_REG && u->dtype.deref() == DType::Float32.vec(lanes);
  return n;
}

// Every load from memory in the reduce loop of `k` (the lowered kernel's
// innermost loop) is a contiguous vector, or a scalar that steps by one element
// per iteration (a row of a, broadcast): no gather, no strided scalar walk.
void check_inner_loads(const UOpPtr& lowered, const UOpPtr& reduce_range) {
  int vectors = 0, scalars = 0;
  for (const auto& u : toposort(lowered)) {
    if (u->op != Op::LOAD || u->src[0]->src.at(0)->op != Op::DEFINE_GLOBAL || !reaches(u, reduce_range))
      continue;
    const UOpPtr& index = u->src[0];
    INFO(to_string(u->dtype));
    CHECK(index->src.at(1)->dtype.lanes == 1);  // never a gather
    if (u->dtype.lanes > 1) {
      ++vectors;
    } else {
      ++scalars;
      CHECK(address_stride(index, reduce_range) == 1);
    }
  }
  CHECK(vectors >= 1);
  CHECK(scalars >= 1);
}

// The Target in force (LOOM_TARGET) planned for vectors of `bytes`.
Target planned(int bytes) { return with_vector_bytes(current_target(), bytes); }

// The machine the blocking expectations below were derived for: two cores, 1 MiB of L2
// (a quarter of it, 256 KiB, for a row block and for a masked panel's k lines), 32 MiB
// of L3 per complex, 64-byte lines; explicit, so they hold on any host.
// A Target of `registers` vector registers and the default core (FMA latency 4 on
// 2 pipes: 8 chains, tiles of at most 6 rows x 2 vectors).
Target regs(int registers) {
  Target t;
  t.vector_registers = registers;
  return t;
}

Target two_cores_1m_l2(int vector_bytes = 32) {
  Target t = with_vector_bytes(current_target(), vector_bytes);
  t.cores = 2;
  t.l2_bytes = 1 << 20;
  t.line_bytes = 64;
  t.l3_complex_bytes = 32 << 20;
  return t;
}

// The optimised kernel lowered as the pipeline lowers it for `vector_bytes`.
UOpPtr lowered(const UOpPtr& kernel, int vector_bytes) {
  return split_vectors(
      lower_reduce(expand_lanes(optimize_kernel(kernel, {true, planned(vector_bytes)})), vector_bytes),
      vector_bytes);
}

// Compiled with the tile for `vector_bytes`, run on whole numbers, and checked
// against the kernel-IR interpreter on the plain loop nest.
enum class Form { Plain, Packed, PackedRowTerm, Gemv, RowPanels };

void check_values(const MatmulShape& s, int vector_bytes, bool epilogue = false, Form form = Form::Plain) {
  INFO("batch " << s.batch << " m " << s.m << " k " << s.k << " n " << s.n << " transposed " << s.a_transposed
                << " vector bytes " << vector_bytes << " form " << static_cast<int>(form));
  const UOpPtr kernel = form == Form::Packed          ? packed_kernel(s, epilogue)
                        : form == Form::PackedRowTerm ? packed_kernel(s, epilogue, true)
                        : form == Form::Gemv          ? gemv_kernel(s, epilogue)
                        : form == Form::RowPanels     ? row_panels_kernel(s)
                                                      : matmul_kernel(s, epilogue);
  const UOpPtr opt = optimize_kernel(kernel, {true, planned(vector_bytes)});
  const UOpPtr tile = split_vectors(lower_reduce(expand_lanes(opt), vector_bytes), vector_bytes);
  const KernelFn fn = Jit::instance().compile(emit_llvm_ir(lower_numerics(tile), "tile"), "tile").fn;
  Aligned<float> out(static_cast<size_t>(s.batch * s.m * s.n), -99.0f);
  const int64_t b_columns = form == Form::Packed || form == Form::PackedRowTerm ? padded_columns(s.n) : s.n;
  Aligned<float> a(whole_numbers(s.batch * s.m * s.k, 1)), b(whole_numbers(s.batch * s.k * b_columns, 2));
  Aligned<float> bias(whole_numbers(s.n, 3));
  std::vector<Slot> slots{out, a, b};
  if (epilogue) slots.emplace_back(bias);
  Aligned<float> want(static_cast<size_t>(s.batch * s.m * s.n), -99.0f);
  std::vector<void*> bufs{want.data(), a.data(), b.data(), bias.data()};
  interpret_kernel(kernel, bufs.data(), {});
  run_all(fn, opt, slots);  // the compiled tile against the interpreter on the tile
  for (size_t e = 0; e < out.size(); ++e) {
    INFO("element " << e);
    REQUIRE(out[e] == want[e]);  // ... and against the plain loop nest
  }
}

}  // namespace

TEST_CASE("row_block: an even count of row blocks (two threads share them), few padded tiles") {
  const Target t = two_cores_1m_l2(64);
  auto blocks = [](int64_t tiles, int64_t block) { return (tiles + block - 1) / block; };
  // 42 tiles x 6 rows x 256 floats fill a quarter of its L2; a block may pass that by a sixteenth
  // (44 tiles) when fewer tiles are padded. 512 rows: 86 tiles of 6, and three blocks left one
  // thread idle a third of the time: 2 blocks of 43, none padded
  const int64_t quarter = 256 * 1024, stretched = quarter + quarter / 16;
  const int64_t at512 = row_block(86, 6, 256, 4, t);
  CHECK(at512 * 6 * 256 * 4 <= stretched);
  CHECK(blocks(86, at512) % 2 == 0);
  CHECK(blocks(86, at512) * at512 == 86);
  // 1024 rows: 171 tiles; 4 blocks of 43 pad one tile, where 6 blocks of 29 padded three
  const int64_t at1024 = row_block(171, 6, 256, 4, t);
  CHECK(at1024 * 6 * 256 * 4 <= stretched);
  CHECK(blocks(171, at1024) % 2 == 0);
  CHECK(blocks(171, at1024) * at1024 - 171 <= 1);
  CHECK(row_block(683, 6, 256, 4, t) * 6 * 256 * 4 <= stretched);  // 4096 rows
  CHECK(blocks(683, row_block(683, 6, 256, 4, t)) % 2 == 0);
  CHECK(row_block(1, 6, 256, 4, t) == 1);  // one tile: one block, none padded
  CHECK(blocks(3, row_block(3, 6, 256, 4, t)) * row_block(3, 6, 256, 4, t) <= 4);
}

TEST_CASE("matmul_axes: the rows a reads, the columns b and the output are contiguous along, the sum") {
  SUBCASE("matmul") {
    const auto k = matmul_kernel({1, 64, 32, 48});
    const auto mm = matmul_axes(k);
    REQUIRE(mm);
    CHECK(mm->rows->get<AxisArg>().id == 1);
    CHECK(mm->cols->get<AxisArg>().id == 2);
    CHECK(mm->reduce->get<AxisArg>().id == 3);
    CHECK(mm->a_ops == 0);
  }
  SUBCASE("batched, and with a transposed (the weight gradient's x^T)") {
    for (bool transposed : {false, true}) {
      const auto mm = matmul_axes(matmul_kernel({3, 10, 7, 20, transposed}));
      REQUIRE(mm);
      CHECK(mm->rows->get<AxisArg>().id == 1);
      CHECK(mm->cols->get<AxisArg>().id == 2);
    }
  }
  SUBCASE("with a fused epilogue") { CHECK(matmul_axes(matmul_kernel({1, 8, 8, 8}, true))); }
  SUBCASE("not a product of two reads, or b not contiguous along the columns: no tile") {
    const auto f32 = DType::Float32;
    auto out = global(0, f32), a = global(1, f32), b = global(2, f32);
    auto i = make_range(16, 0), j = make_range(16, 1), k = make_range(16, 2, AxisKind::Reduce);
    const auto sum =
        sink({end(store(index(out, i * 16 + j), reduce(Op::ADD, load(a, i * 16 + k), {k})), {i, j})});
    CHECK_FALSE(matmul_axes(sum));
    // out = a b^T: b's address steps by k's length along j; the reduce axis is contiguous in both.
    const auto abt = sink(
        {end(store(index(out, i * 16 + j), reduce(Op::ADD, load(a, i * 16 + k) * load(b, j * 16 + k), {k})),
             {i, j})});
    CHECK_FALSE(matmul_axes(abt));
  }
}

TEST_CASE("register_tile: accumulators, b vectors and the a broadcast fit the register file") {
  SUBCASE("AVX2: 16 ymm, 8 lanes: 6 rows x 2 vectors = 12 accumulators + 2 + 1") {
    const RegisterTile t = register_tile(1024, 1024, 8, regs(16));
    CHECK(t.rows == 6);
    CHECK(t.vectors == 2);
    CHECK(t.lanes == 8);
    CHECK(t.rows * t.vectors + t.vectors + 1 <= 16);
  }
  SUBCASE("AVX-512: 32 zmm, 16 lanes: 6 rows x 2 vectors (6 x 32 floats)") {
    const RegisterTile t = register_tile(1024, 1024, 16, regs(32));
    CHECK(t.rows == 6);
    CHECK(t.vectors == 2);
    CHECK(t.lanes == 16);
  }
  SUBCASE("AVX-512 with a 5-cycle FMA: 10 chains, 3 x 10 / (2 x 2) = 7 rows x 2 vectors") {
    Target t = regs(32);
    t.fma_latency = 5;
    const RegisterTile tile = register_tile(1024, 1024, 16, t);
    CHECK(tile.rows == 7);
    CHECK(tile.vectors == 2);
  }
  SUBCASE("columns that do not fill the tiles keep two registers for the masks: 5 rows") {
    CHECK(register_tile(513, 513, 8, regs(16)).rows == 5);
  }
  SUBCASE("GEMV and skinny outputs: more column vectors keep 8 FMA chains in flight") {
    const RegisterTile gemv = register_tile(1, 4096, 8, regs(16));
    CHECK(gemv.rows == 1);
    CHECK(gemv.vectors == 8);
    const RegisterTile two = register_tile(2, 4096, 8, regs(16));
    CHECK(two.rows * two.vectors >= 8);
  }
  SUBCASE("a costly a (a fused softmax's exp) is computed once per row: one tile spans the columns") {
    const RegisterTile t = register_tile(512, 64, 8, regs(16), 20);
    CHECK(t.vectors * t.lanes == 64);
    CHECK(t.rows * t.vectors + 2 <= 16);
    CHECK(register_tile(512, 64, 8, regs(16), 1).vectors == 2);  // a cast or a scale is cheap
  }
  SUBCASE("an output narrower than a vector: its columns are the lanes") {
    const RegisterTile t = register_tile(100, 5, 8, regs(16));
    CHECK(t.lanes == 5);
    CHECK(t.vectors == 1);
  }
  SUBCASE("a narrower output's rows fill one register or whole ones, never part of one") {
    // The tile is one vector of rows x lanes; 6 rows of 3 lanes (18 of 16) ran 5x slower
    // than 5 or 16 rows (docs/performance.md, "BEAM search").
    CHECK(register_tile(4096, 3, 16, regs(32)).rows == 16);  // 48 lanes: 3 registers
    CHECK(register_tile(4096, 10, 16, regs(32)).rows == 8);  // 80 lanes: 5 registers
    CHECK(register_tile(4096, 3, 8, regs(16)).rows == 8);    // AVX2: 24 lanes, 3 registers
    CHECK(register_tile(10, 3, 16, regs(32)).rows == 5);     // 10 rows: 15 lanes in one register
    CHECK(register_tile(100, 5, 8, regs(16)).rows == 8);
    for (const int64_t n : {2, 3, 5, 6, 7, 9, 10, 11})
      for (const int64_t m : {1, 4, 7, 17, 4096}) {
        const RegisterTile t = register_tile(m, n, 16, regs(32));
        CAPTURE(n);
        CAPTURE(m);
        CHECK(t.lanes == n);
        CHECK((t.rows * t.lanes <= 16 || t.rows * t.lanes % 16 == 0));
        CHECK(t.rows * t.vectors + t.vectors + 1 <= 32);
      }
  }
  SUBCASE("columns of whole vectors that do not fill the usual tiles: one tile across them") {
    // 112 columns (the stem's output row) in tiles of 2 x 16 would be 128 lanes, 16 of them
    // padding; 7 vectors x 2 rows take them all with fewer loads per FMA (9 per 14 against 8
    // per 12) and no masks.
    const RegisterTile stem = register_tile(64, 112, 16, regs(32));
    CHECK(stem.vectors == 7);
    CHECK(stem.rows == 2);
    // Columns a tile of the most rows holds (Target::tile_wide_col_vectors, 4 of 16 lanes on
    // AVX-512): all of them in one tile of 6 rows, so a is read once.
    const RegisterTile t48 = register_tile(64, 48, 16, regs(32));
    CHECK(t48.vectors == 3);
    CHECK(t48.rows == 6);
    const RegisterTile t64 = register_tile(64, 64, 16, regs(32));
    CHECK(t64.vectors == 4);
    CHECK(t64.rows == 6);  // 24 accumulators, 4 b vectors and a broadcast: 29 of 32 registers
    CHECK(register_tile(3, 64, 16, regs(32)).rows == 3);
    const RegisterTile avx2 = register_tile(64, 24, 8, regs(16));
    CHECK(avx2.vectors == 3);
    CHECK(avx2.rows * 3 + 3 + 1 <= 16);
    // Columns that fill the tiles, or that end in a part of a vector, keep the usual tile.
    CHECK(register_tile(64, 128, 16, regs(32)).vectors == 2);
    CHECK(register_tile(64, 56, 16, regs(32)).vectors == 2);
    // A single row keeps the chains' vectors (a GEMV).
    CHECK(register_tile(1, 112, 16, regs(32)).rows == 1);
  }
  SUBCASE("an output a little narrower than a vector: padded to it, one register a row") {
    const RegisterTile t = register_tile(64, 14, 16, regs(32));  // a 14-wide conv row on AVX-512
    CHECK(t.lanes == 16);
    CHECK(t.vectors == 1);
    CHECK(t.rows == 6);
    CHECK(register_tile(64, 12, 16, regs(32)).lanes == 16);  // a quarter padded
    CHECK(register_tile(64, 11, 16, regs(32)).lanes == 11);  // more: rows of 11 lanes
  }
}

TEST_CASE(
    "a product whose b is smaller than a vector gets no tile, only threads; a larger narrow one gets its "
    "tile") {
  // [64,256,3] @ [64,3,3] (9 < 16 lanes; on AVX2's 8, [64,256,2] @ [64,2,3]): the plain
  // loops, which LLVM unrolls itself, beat every tile and lanes (BEAM, docs/performance.md).
  // Explicit Targets: the rule compares with the lanes.
  for (const int bytes : {32, 64}) {
    const Target t = with_vector_bytes(current_target(), bytes);
    CAPTURE(bytes);
    const std::vector<Opt> tiny = heuristic_opts(matmul_kernel({64, 256, bytes == 64 ? 3 : 2, 3}), t);
    CHECK(std::none_of(tiny.begin(), tiny.end(), [](const Opt& o) { return o.kind != OptKind::Parallel; }));
    const std::vector<Opt> head = heuristic_opts(matmul_kernel({1, 4096, 512, 3}), t);
    CHECK(std::any_of(head.begin(), head.end(), [](const Opt& o) { return o.kind == OptKind::MatmulTile; }));
  }
}

TEST_CASE("register_tile with whole rows: an a that picks by row gets all m rows in one tile when they fit") {
  // The hand-built conv's dw [32, 9]: 9 rows, each a constant, so each row's pick is one load.
  const RegisterTile avx512 = register_tile(9, 32, 16, regs(32), 27, true);
  CHECK(avx512.rows == 9);
  CHECK(avx512.vectors == 1);  // 9 x 2 x 16 lanes would pass a UOp's 255
  const RegisterTile avx2 = register_tile(9, 32, 8, regs(16), 27, true);
  CHECK(avx2.rows == 9);
  CHECK(avx2.rows * avx2.vectors + avx2.vectors + 1 <= 16);
  CHECK(register_tile(40, 32, 16, regs(32), 27, true).rows <= 6);  // too many rows: the usual tile
}

TEST_CASE("dot_tile: rows x every column accumulators, the b vectors and one a within the registers") {
  const RegisterTile t = dot_tile(64, 3, 8, regs(32));  // nn's 3x3 dw on AVX-512, 8 lanes along 56 pixels
  CHECK(t.rows == 6);
  CHECK(t.vectors == 3);
  CHECK(dot_tile(64, 3, 16, regs(32)).rows == 5);  // 5 x 3 x 16 = 240 lanes, 6 would be 288
  const RegisterTile avx2 = dot_tile(64, 3, 8, regs(16));
  CHECK(avx2.rows * 3 + 3 + 1 <= 16);
  CHECK(avx2.rows == 4);
  CHECK(dot_tile(64, 40, 8, regs(16)).rows == 0);  // 40 columns do not fit: no dot tile
}

TEST_CASE("a 1024 matmul gets a register tile: 12 accumulators of 16 lanes with LOOM_VECTOR_WIDTH=512") {
  const auto kernel = matmul_kernel({1, 1024, 1024, 1024});
  const auto opt = optimize_kernel(kernel, {true, planned(64)});
  const auto upcast = of_kind(opt, AxisKind::Upcast), unroll = of_kind(opt, AxisKind::Unroll);
  REQUIRE(upcast.size() == 1);
  CHECK(extent(upcast[0]) == 16);
  REQUIRE(unroll.size() == 2);  // rows, and column vectors
  CHECK(of_kind(opt, AxisKind::Parallel).size() == 1);
  const auto low = lowered(kernel, 64);
  CHECK(accumulators(low, 16) >= 12);
  const auto red = of_kind(low, AxisKind::Reduce);
  REQUIRE(red.size() == 1);  // one loop over k: no blocks for a tile (docs/semantics.md)
  CHECK(extent(red[0]) == 1024);
  check_inner_loads(low, red[0]);
  const std::string ir = emit_llvm_ir(low, "matmul_1024");
  INFO(ir);
  CHECK(count_of(ir, "alloca <16 x float>") >= 12);
  CHECK(count_of(ir, "call <16 x float> @llvm.fmuladd.v16f32") >= 12);
  CHECK(count_of(ir, "load <16 x float>, ptr %") >= 2);  // b's two vectors per step of k
  CHECK(count_of(ir, "gather") == 0);
}

TEST_CASE("a 1024 matmul on the host's own width: 12 or more accumulators of native lanes") {
  const int bytes = current_target().vector_bytes;
  const int lanes = bytes / 4;
  const auto low = lowered(matmul_kernel({1, 1024, 1024, 1024}), bytes);
  CHECK(accumulators(low, lanes) >= 12);
  const auto red = of_kind(low, AxisKind::Reduce);
  REQUIRE(red.size() == 1);
  check_inner_loads(low, red[0]);
  const std::string ir = emit_llvm_ir(low, "matmul_1024");
  CHECK(count_of(ir, "gather") == 0);
}

TEST_CASE("the epilogue (bias, relu) stays in the tiled kernel's store") {
  const auto low = lowered(matmul_kernel({1, 64, 64, 64}, true), current_target().vector_bytes);
  CHECK(accumulators(low, current_target().vector_bytes / 4) >= 12);
  int maxes = 0, stores = 0;
  for (const auto& u : toposort(low)) {
    maxes += u->op == Op::MAX;
    stores += u->op == Op::STORE && u->src[0]->src.at(0)->op == Op::DEFINE_GLOBAL;
  }
  CHECK(maxes >= 1);
  CHECK(stores >= 1);
  check_values({1, 64, 64, 64}, current_target().vector_bytes, true);
}

TEST_CASE("tiled matmuls agree with the plain loop nest on odd, tail, one-row and batched shapes") {
  const std::pair<const char*, MatmulShape> shapes[] = {
      {"rows and columns both leave a tail", {1, 13, 300, 37}},
      {"one row (GEMV)", {1, 1, 33, 17}},
      {"fewer columns than a vector", {1, 7, 5, 3}},
      {"narrow columns in whole registers: 16 rows of 3 lanes, a tail of 5", {1, 37, 20, 3}},
      {"narrow columns in whole registers: 8 rows of 10 lanes, a tail of 3", {1, 19, 9, 10}},
      {"narrow columns, batched", {2, 21, 7, 5}},
      {"one element", {1, 1, 1, 1}},
      {"batched", {2, 5, 9, 19}},
      {"a transposed", {3, 6, 11, 16, true}},
      {"columns of whole vectors in one tile: 7 x 16 lanes, 2 rows, a tail row", {1, 13, 40, 112}},
      {"columns of whole vectors in one tile: 3 x 16 or 6 x 8 lanes", {1, 11, 20, 48}},
      {"columns of whole vectors in one tile on AVX2: 3 x 8 lanes", {2, 9, 30, 24}},
  };
  for (int bytes : sanitizer_budget<int>({current_target().vector_bytes, 32, 64}))
    for (const auto& [what, shape] : shapes) {
      INFO(std::string(what) << ", " << bytes << " vector bytes");
      check_values(shape, bytes);
    }
  check_values({1, 25, 40, 70}, current_target().vector_bytes, true);
}

TEST_CASE("b in panels: the tile runs in blocks of rows, then blocks of k, then panels, then row tiles") {
  const auto kernel = packed_kernel({1, 1024, 1024, 1024});
  const auto mm = matmul_axes(kernel);
  REQUIRE(mm);
  REQUIRE(mm->panels.size() == 1);  // jo: b uses it, a does not
  CHECK(mm->panels[0]->get<AxisArg>().id == 2);
  const auto opt = optimize_kernel(kernel, {true, two_cores_1m_l2()});
  const std::vector<UOpPtr> loops = loops_in_order(opt);
  REQUIRE(loops.size() == 4);
  CHECK(loops[0]->get<AxisArg>().kind == AxisKind::Parallel);  // blocks of rows: what the threads share
  CHECK(extent(loops[0]) >= 2);
  CHECK(extent(loops[1]) == 1024 / 256);  // blocks of k: 256 (kc x 16 floats of a panel: half of L1)
  CHECK(extent(loops[2]) == 1024 / 16);   // the panels
  // a block's rows x kc floats of a within a quarter of its 1 MiB L2 and a sixteenth (row_block):
  // at most 44 tiles of 6 rows
  CHECK(extent(loops[3]) * 6 * 256 * 4 <= 256 * 1024 + 256 * 1024 / 16);
  CHECK(extent(loops[0]) * extent(loops[3]) * 6 >= 1024);
  const auto red = of_kind(opt, AxisKind::Reduce);
  REQUIRE(red.size() == 1);
  CHECK(extent(red[0]) == 256);
  const auto low = lowered(kernel, 32);
  CHECK(accumulators(low, 8) >= 12);
  check_inner_loads(low, of_kind(low, AxisKind::Reduce).at(0));
}

TEST_CASE("b in panels, a prime k: one block of k, and a's row blocks sized for all of it") {
  // 2039 has no divisor in [128, 256]: the tiles sum it whole, so a block's rows span
  // 2039 floats each, not the 256 of a block of k (1020 x 2039 @ 2039 x 1024 at one
  // thread: 68 -> 91 to 95 GFLOP/s)
  const auto opt = optimize_kernel(packed_kernel({1, 1020, 2039, 1024}), {true, planned(32)});
  const std::vector<UOpPtr> loops = loops_in_order(opt);
  REQUIRE(loops.size() == 3);  // blocks of rows, panels, row tiles
  CHECK(extent(of_kind(opt, AxisKind::Reduce).at(0)) == 2039);
  CHECK(extent(loops[2]) == row_block(1020 / 6, 6, 2039, 4, current_target()));
  CHECK(extent(loops[2]) != row_block(1020 / 6, 6, 256, 4, current_target()));
}

TEST_CASE("b in panels: the tile's epilogue works a row of registers at a time, rows tested as scalars") {
  // 1022 rows: the last tile's padded rows are stored under their row's validity. Blocks
  // of k: each tile adds the previous block's partial sums, then the bias and relu.
  const auto low = lowered(packed_kernel({1, 1022, 1024, 1024}, true), 32);
  int stores = 0;
  for (const auto& u : toposort(low)) {
    INFO(op_name(u->op) << " " << to_string(u->dtype));
    if (is_alu(u->op) || u->op == Op::LOAD || u->op == Op::VECTORIZE || u->op == Op::GEP)
      CHECK(u->dtype.lanes <= 16);  // a row of the tile: two ymm, never the 6 x 16 tile as one vector
    if (u->op == Op::STORE && u->src[0]->src.at(0)->op == Op::DEFINE_GLOBAL) {
      ++stores;
      const UOpPtr& index = u->src[0];
      CHECK(index->src.size() == 3);               // the padded rows are not stored ...
      CHECK(index->src[2]->dtype == DType::Bool);  // ... as told by one bool per row
    }
  }
  CHECK(stores == 6);
}

TEST_CASE(
    "b in panels: values as the plain loop nest's, blocks of k or not, with tails, batches, epilogues") {
  // Few rows and panels: the interpreters run every element twice, and under the
  // sanitizers this case must stay seconds, not minutes. 13 rows are two tiles and a tail.
  const std::pair<const char*, MatmulShape> shapes[] = {
      {"k in blocks of 150, rows with a tail", {1, 13, 300, 32}},
      {"k prime (263): one block; columns padded to whole panels (20 of 32)", {1, 7, 263, 20}},
      {"batched, a transposed", {2, 7, 260, 32, true}},
  };
  for (int bytes : sanitizer_budget<int>({current_target().vector_bytes, 32, 64}))
    for (const auto& [what, shape] : shapes) {
      INFO(std::string(what) << ", " << bytes << " vector bytes");
      check_values(shape, bytes, false, Form::Packed);
    }
  check_values({1, 7, 350, 45}, current_target().vector_bytes, true,
               Form::Packed);  // the bias read where j < n
  // columns padded, k past 4096 in blocks of 205: their sums read back under the lane mask
  check_values({1, 2, 4100, 20}, current_target().vector_bytes, false, Form::Packed);
}

TEST_CASE(
    "b in panels, k in one block, rows that do not fill the tiles: the padded rows store the last row again, "
    "with no row tested") {
  // 1022 rows: 171 tiles of 6, the last with 4 real rows, then the tiles that pad the row
  // blocks; 1010 columns padded to 64 panels, so k = 1024 is one block. Every use of the
  // row is clamped to the last real one (docs/performance.md: the row tests cost a padded
  // product 3 to 8%); the store keeps its lane mask (j < n) alone.
  const auto opt = optimize_kernel(packed_kernel({1, 1022, 1024, 1010}), {true, planned(32)});
  const UOpPtr& index = opt->src.at(0)->src.at(0)->src.at(0);
  const UOpPtr valid = valid_of(index);
  REQUIRE(valid);
  const auto ranges = ranges_of(opt);
  for (const auto& r : ranges) {
    const AxisKind kind = r->get<AxisArg>().kind;
    const bool rows = kind == AxisKind::Parallel || (kind == AxisKind::Unroll && extent(r) == 6);
    if (rows) CHECK_FALSE(reaches(valid, r));
  }
  const auto nodes = toposort(index->src.at(1));
  CHECK(std::any_of(nodes.begin(), nodes.end(), [](const UOpPtr& u) { return u->op == Op::WHERE; }));
  // Values, also where the stored value depends on the row other than through a load (the
  // row's index added): 7 and 13 rows leave 5 padded rows, k = 263 is one block.
  for (int bytes : {current_target().vector_bytes, 64})
    for (const int64_t m : {7, 13}) check_values({1, m, 263, 20}, bytes, false, Form::PackedRowTerm);
}

TEST_CASE("b in panels, columns padded to whole panels: unmasked panel loads, the store guarded by lane") {
  // 1010 columns in 64 panels, the last 2 columns real: the panel is whole in memory, so
  // the inner loop reads it as for 1024 columns; only the stores and the bias test j < n.
  const auto kernel = packed_kernel({1, 1022, 1024, 1010}, true);
  const auto mm = matmul_axes(kernel);
  REQUIRE(mm);
  REQUIRE(mm->panels.size() == 1);
  // k in one block: the previous blocks' sums would be read under the lane mask, which
  // costs more than the blocks save (codegen/recipes.cpp's masked_whole_k: half of
  // L2 in rows of a panel, 4096 of 64 bytes in 256 KiB)
  const auto opt = optimize_kernel(kernel, {true, two_cores_1m_l2()});
  const std::vector<UOpPtr> loops = loops_in_order(opt);
  REQUIRE(loops.size() == 3);  // blocks of rows (the threads'), panels, row tiles
  CHECK(loops[0]->get<AxisArg>().kind == AxisKind::Parallel);
  CHECK(extent(loops[1]) == 64);
  CHECK(extent(of_kind(opt, AxisKind::Reduce).at(0)) == 1024);
  CHECK(
      extent(loops_in_order(optimize_kernel(packed_kernel({1, 1022, 4100, 1010}), {true, two_cores_1m_l2()}))
                 .at(1)) == 4100 / 205);  // a k past 4096 keeps its blocks
  const auto low = lowered(kernel, 32);
  CHECK(accumulators(low, 8) >= 12);
  const UOpPtr k = of_kind(low, AxisKind::Reduce).at(0);
  check_inner_loads(low, k);
  int stores = 0;
  for (const auto& u : toposort(low)) {
    if (u->op == Op::LOAD && u->src[0]->src.at(0)->op == Op::DEFINE_GLOBAL && reaches(u, k))
      CHECK_FALSE(valid_of(u->src[0]));  // no mask in the inner loop
    if (u->op != Op::STORE || u->src[0]->src.at(0)->op != Op::DEFINE_GLOBAL) continue;
    ++stores;
    const UOpPtr valid = valid_of(u->src[0]);
    REQUIRE(valid);
    CHECK(valid->dtype.lanes == 16);  // a row of the tile, tested lane by lane against n
  }
  CHECK(stores == 6);
}

TEST_CASE("a in row panels as tall as the tile (m a multiple of 6): the panels are the row tiles, blocked") {
  // 1020 rows: the schedule split them into 170 panels of 6, which were left one loop of
  // 170 tiles with no row blocks and no threads (3072 x 3072 too).
  const auto opt = optimize_kernel(row_panels_kernel({1, 1020, 1024, 1024}), {true, planned(32)});
  const std::vector<UOpPtr> loops = loops_in_order(opt);
  REQUIRE(loops.size() == 4);
  CHECK(loops[0]->get<AxisArg>().kind == AxisKind::Parallel);  // blocks of row panels
  CHECK(extent(loops[0]) >= 2);
  CHECK(extent(loops[1]) == 1024 / 256);  // blocks of k
  CHECK(extent(loops[2]) == 1024 / 16);   // the panels of b
  CHECK(extent(loops[0]) * extent(loops[3]) == 170);
  const auto unroll = of_kind(opt, AxisKind::Unroll);
  CHECK(std::any_of(unroll.begin(), unroll.end(), [](const UOpPtr& r) { return extent(r) == 6; }));
  // Two panels of rows in each of two batches, k in two blocks of 150: the interpreters run
  // every element twice, so few of them.
  check_values({2, 12, 300, 16}, current_target().vector_bytes, false, Form::RowPanels);
}

TEST_CASE("b in panels, a kernel that reads its own output (an in-place update): no blocks of k") {
  const auto f32 = DType::Float32;
  auto out = global(0, f32), a = global(1, f32), p = global(2, f32);
  auto i = make_range(64, 1), jo = make_range(2, 2), ji = make_range(16, 4),
       k = make_range(512, 3, AxisKind::Reduce);
  auto at = i * 32 + jo * 16 + ji;
  auto sum = reduce(Op::ADD, load(a, i * 512 + k) * load(p, jo * (512 * 16) + k * 16 + ji), {k});
  const auto kernel = sink({end(store(index(out, at), load(out, at) - sum), {i, jo, ji})});
  const auto opt = optimize_kernel(kernel, {true, planned(32)});
  const auto red = of_kind(opt, AxisKind::Reduce);
  REQUIRE(red.size() == 1);
  CHECK(extent(red[0]) == 512);  // partial sums in the output would be read back as its old value
}

TEST_CASE("GEMV: column chunks across threads, blocks of 8 rows of b, one-row tiles of one cache line") {
  const auto kernel = gemv_kernel({1, 1, 4096, 4096});
  CHECK_FALSE(matmul_axes(kernel));  // no row axis: one row of a
  const auto mm = gemv_axes(kernel);
  REQUIRE(mm);
  CHECK_FALSE(mm->rows);
  const auto opt = optimize_kernel(kernel, {true, planned(32)});
  const std::vector<UOpPtr> loops = loops_in_order(opt);
  REQUIRE(loops.size() == 3);
  CHECK(loops[0]->get<AxisArg>().kind == AxisKind::Parallel);
  CHECK(extent(loops[0]) == 4096 / 2048);  // chunks of 2048 columns: 8 KiB of each row of b
  CHECK(extent(loops[1]) == 4096 / 8);     // blocks of 8 rows of b
  CHECK(extent(loops[2]) == 2048 / 16);    // tiles of 2 vectors (64 bytes) within a chunk
  const auto red = of_kind(opt, AxisKind::Reduce);
  REQUIRE(red.size() == 1);
  CHECK(extent(red[0]) == 8);
  // Each step of a tile reads one 64-byte line of each of the block's 8 rows of b, as
  // OpenBLAS's sgemv_n does: 2 accumulators of 8 floats with AVX2, 1 of 16 with AVX-512.
  CHECK(accumulators(lowered(kernel, 32), 8) == 2);
  CHECK(accumulators(lowered(kernel, 64), 16) == 1);
  CHECK(extent(loops_in_order(optimize_kernel(kernel, {true, planned(64)}))[2]) == 2048 / 16);
}

TEST_CASE(
    "GEMV in parts (split_reduceop's, or a batch): the parts first, shared by the threads, whole rows") {
  const auto opt = optimize_kernel(gemv_kernel({64, 1, 64, 4096}), {true, planned(32)});
  const std::vector<UOpPtr> loops = loops_in_order(opt);
  REQUIRE(loops.size() == 3);
  CHECK(loops[0]->get<AxisArg>().kind == AxisKind::Parallel);
  CHECK(extent(loops[0]) == 64);         // the parts, each 64 rows of b
  CHECK(extent(loops[1]) == 64 / 8);     // blocks of 8 rows: no chunks, each block 8 whole rows
  CHECK(extent(loops[2]) == 4096 / 16);  // tiles of one 64-byte line
  // Rows of 8192 columns: chunks of 4096 (16 KiB of partial sums), inside the parts.
  const std::vector<UOpPtr> wide =
      loops_in_order(optimize_kernel(gemv_kernel({4, 1, 64, 8192}), {true, planned(32)}));
  REQUIRE(wide.size() == 4);
  CHECK(extent(wide[0]) == 4);
  CHECK(extent(wide[1]) == 2);
}

TEST_CASE("GEMV with a costly a (computed again for every column tile): tiles of 8 vectors") {
  const auto f32 = DType::Float32;
  auto out = global(0, f32), a = global(1, f32), b = global(2, f32);
  auto j = make_range(4096, 2), k = make_range(4096, 3, AxisKind::Reduce);
  const UOpPtr a_value = alu(Op::EXP2, {load(a, k)});
  const auto kernel =
      sink({end(store(index(out, j), reduce(Op::ADD, a_value * load(b, k * 4096 + j), {k})), {j})});
  const auto mm = gemv_axes(kernel);
  REQUIRE(mm);
  REQUIRE(mm->a_ops > 0);
  CHECK(accumulators(lowered(kernel, 32), 8) == 8);
}

TEST_CASE("GEMV: values as the plain loop nest's, with column tails, few columns, k without a block") {
  const std::pair<const char*, MatmulShape> shapes[] = {
      {"columns leave a tail", {1, 1, 96, 1000}},
      {"fewer columns than a tile", {1, 1, 64, 24}},
      {"k prime: no blocks", {1, 1, 97, 128}},
      {"batched", {3, 1, 40, 200}},
  };
  for (int bytes : {current_target().vector_bytes, 32, 64})
    for (const auto& [what, shape] : shapes) {
      INFO(std::string(what) << ", " << bytes << " vector bytes");
      REQUIRE(gemv_axes(gemv_kernel(shape)));
      check_values(shape, bytes, false, Form::Gemv);
    }
  check_values({1, 1, 256, 512}, current_target().vector_bytes, true, Form::Gemv);
}

TEST_CASE("column_sum_axes: a sum of loads alone down rows of a page or more") {
  const auto cs = column_sum_axes(column_sum_kernel(4, 64, 1024), Target{});
  REQUIRE(cs);
  CHECK_FALSE(cs->rows);
  CHECK(extent(cs->cols) == 1024);
  CHECK(extent(cs->reduce) == 64);
  REQUIRE(cs->panels.size() == 1);  // the blocks of rows
  CHECK(extent(cs->panels[0]) == 4);
  CHECK_FALSE(column_sum_axes(column_sum_kernel(4, 64, 512), Target{}));  // rows of 2 KiB: the plain tiles
  CHECK_FALSE(column_sum_axes(gemv_kernel({1, 1, 4096, 4096}), Target{}));
  Target big_page;
  big_page.page_bytes = 16384;  // rows of 4 KiB stay within a 16 KiB page: the plain tiles
  CHECK_FALSE(column_sum_axes(column_sum_kernel(4, 64, 1024), big_page));
}

TEST_CASE("column sum: the blocks of rows shared by the threads, each streamed 8 rows at a time") {
  const auto opt = optimize_kernel(column_sum_kernel(64, 64, 4096), {true, planned(32)});
  const std::vector<UOpPtr> loops = loops_in_order(opt);
  REQUIRE(loops.size() == 3);
  CHECK(loops[0]->get<AxisArg>().kind == AxisKind::Parallel);
  CHECK(extent(loops[0]) == 64);         // the blocks of rows
  CHECK(extent(loops[1]) == 64 / 8);     // blocks of 8 whole rows (one chunk of 4096 columns)
  CHECK(extent(loops[2]) == 4096 / 16);  // tiles of one 64-byte line: 2 vectors
  const auto red = of_kind(opt, AxisKind::Reduce);
  REQUIRE(red.size() == 1);
  CHECK(extent(red[0]) == 8);
  CHECK(accumulators(lowered(column_sum_kernel(64, 64, 4096), 32), 8) == 2);
  // One block of rows: the chunks are what the threads share.
  const auto one = loops_in_order(optimize_kernel(column_sum_kernel(0, 64, 4096), {true, planned(32)}));
  REQUIRE(one.size() == 3);
  CHECK(one[0]->get<AxisArg>().kind == AxisKind::Parallel);
  CHECK(extent(one[0]) == 2);
  CHECK(extent(one[1]) == 8);
}

TEST_CASE("column sum: values as the plain loop nest's, with column tails and k without a block") {
  struct Shape {
    int64_t blocks, k, n;
  };
  for (int bytes : {current_target().vector_bytes, 64})
    // Few rows: the interpreters run every element, and under the sanitizers this
    // case must stay seconds. 23 is prime (no block of 8 rows divides it).
    for (const Shape s : {Shape{2, 16, 1024}, Shape{0, 40, 1100}, Shape{3, 23, 1024}, Shape{0, 64, 2048}}) {
      INFO("blocks " << s.blocks << " k " << s.k << " n " << s.n << " vector bytes " << bytes);
      const UOpPtr kernel = column_sum_kernel(s.blocks, s.k, s.n);
      REQUIRE(column_sum_axes(kernel, Target{}));
      const UOpPtr opt = optimize_kernel(kernel, {true, planned(bytes)});
      const KernelFn fn =
          Jit::instance()
              .compile(
                  emit_llvm_ir(lower_numerics(split_vectors(lower_reduce(expand_lanes(opt), bytes), bytes)),
                               "sum"),
                  "sum")
              .fn;
      const int64_t blocks = std::max<int64_t>(s.blocks, 1);
      Aligned<float> out(static_cast<size_t>(blocks * s.n), -99.0f), want(out.size(), -99.0f);
      Aligned<float> b(whole_numbers(blocks * s.k * s.n, 2));
      std::vector<void*> bufs{want.data(), b.data()};
      interpret_kernel(kernel, bufs.data(), {});
      run_all(fn, opt, {out, b});
      for (size_t e = 0; e < out.size(); ++e) {
        INFO("element " << e);
        REQUIRE(out[e] == want[e]);
      }
    }
}

TEST_CASE("LOOM_NOOPT: a matmul stays the plain loop nest") {
  const auto kernel = matmul_kernel({1, 64, 64, 64});
  CHECK(optimize_kernel(kernel, {false}) == kernel);
}

namespace {

// Products whose factor adds a term that does not move along the tile's range, as
// BatchNorm's backward adds a per-channel term to dy before a convolution's gradients:
//   matmul: out[i, j] = sum_k a[i, k] * (b[k, j] + c[k])       (c broadcast along the columns j)
//   dot:    out[i, j] = sum_r (a[i, r] + c[i]) * b[r + j]     (c broadcast along the sum r;
//           j 3 wide, a 1-D convolution's weight gradient)
UOpPtr broadcast_term_kernel(int64_t m, int64_t k, int64_t n, bool dot) {
  const auto f32 = DType::Float32;
  auto out = global(0, f32), a = global(1, f32), b = global(2, f32), c = global(3, f32);
  auto i = make_range(m, 0), j = make_range(n, 1), r = make_range(k, 2, AxisKind::Reduce);
  const UOpPtr product = dot ? (load(a, i * k + r) + load(c, i)) * load(b, r + j)
                             : load(a, i * k + r) * (load(b, r * n + j) + load(c, r));
  return sink({end(store(index(out, i * n + j), reduce(Op::ADD, product, {r})), {i, j})});
}

// The compiled kernel against the interpreter on the optimised kernel and on the plain one.
void check_broadcast_term(int64_t m, int64_t k, int64_t n, bool dot, int vector_bytes) {
  INFO("m " << m << " k " << k << " n " << n << " dot " << dot << " vector bytes " << vector_bytes);
  const UOpPtr kernel = broadcast_term_kernel(m, k, n, dot);
  const UOpPtr opt = optimize_kernel(kernel, {true, planned(vector_bytes)});
  const UOpPtr tile = split_vectors(lower_reduce(expand_lanes(opt), vector_bytes), vector_bytes);
  const KernelFn fn = Jit::instance().compile(emit_llvm_ir(lower_numerics(tile), "tile"), "tile").fn;
  Aligned<float> out(static_cast<size_t>(m * n), -99.0f), want(static_cast<size_t>(m * n), -99.0f);
  Aligned<float> a(whole_numbers(m * k, 1)), b(whole_numbers(dot ? k + n : k * n, 2)),
      c(whole_numbers(dot ? m : k, 3));
  std::vector<void*> bufs{want.data(), a.data(), b.data(), c.data()};
  interpret_kernel(kernel, bufs.data(), {});
  run_all(fn, opt, {out, a, b, c});
  for (size_t e = 0; e < out.size(); ++e) {
    INFO("element " << e);
    REQUIRE(out[e] == want[e]);
  }
}

}  // namespace

TEST_CASE("a factor with a term broadcast along the tile's range still gets the tile, same values") {
  for (const Target& t : {target_named("x86-64-v3"), target_named("x86-64-v4")}) {
    CAPTURE(t.name);
    const int64_t w = t.vector_bytes / 4;
    SUBCASE("matmul: b's columns are contiguous in b and broadcast in c") {
      const std::vector<Opt> opts = heuristic_opts(broadcast_term_kernel(24, 40, 2 * w, false), t);
      REQUIRE(!opts.empty());
      CHECK(opts[0].kind == OptKind::MatmulTile);
      CHECK(opts[0].axis == 1);
    }
    SUBCASE("dot: the sum runs along a and b, c is one value per row") {
      const std::vector<Opt> opts = heuristic_opts(broadcast_term_kernel(12, 4 * w, 3, true), t);
      REQUIRE(!opts.empty());
      CHECK(opts[0].kind == OptKind::DotTile);
    }
  }
  for (int bytes : {32, 64})
    for (const bool dot : {false, true}) {
      check_broadcast_term(13, 37, 19, dot, bytes);  // tails everywhere
      check_broadcast_term(12, 14, 3, dot, bytes);   // a 14-long sum: a padded dot row at 16 lanes
      check_broadcast_term(6, 64, 16, dot, bytes);
    }
}

namespace {

// A 3x3 convolution's weight gradient, padding 1, as rangeify builds it (the sum over n,
// oh, ow in that order):
//   dw[co, ci, kh, kw] = sum x[n, ci, oh + kh - 1, ow + kw - 1] * dy[n, co, oh, ow]
UOpPtr conv_dw_kernel(int64_t n, int64_t co, int64_t ci, int64_t h, int64_t w) {
  const auto f32 = DType::Float32;
  auto out = global(0, f32), x = global(1, f32), dy = global(2, f32);
  auto o = make_range(co, 0), c = make_range(ci, 1), kh = make_range(3, 2), kw = make_range(3, 3);
  auto b = make_range(n, 4, AxisKind::Reduce), i = make_range(h, 5, AxisKind::Reduce),
       j = make_range(w, 6, AxisKind::Reduce);
  const auto zero = const_i64(0);
  const UOpPtr row = i + kh, col = j + kw;  // padded coordinates: 1 to h (w) inside
  const UOpPtr valid =
      land(land(zero < row, row < const_i64(h + 1)), land(zero < col, col < const_i64(w + 1)));
  const UOpPtr x_at = b * (ci * h * w) + c * (h * w) + (row - 1) * w + (col - 1);
  const UOpPtr xs = where(valid, kb::load(kb::index(x, x_at, valid)), const_float(f32, 0.0));
  const UOpPtr product = xs * load(dy, b * (co * h * w) + o * (h * w) + i * w + j);
  return sink({end(store(index(out, o * (ci * 9) + c * 9 + kh * 3 + kw), reduce(Op::ADD, product, {b, i, j})),
                   {o, c, kh, kw})});
}

// The depthwise form: dw[c, kh, kw] = sum x[n, c, oh + kh - 1, ow + kw - 1] * dy[n, c, oh, ow],
// each output reading one channel of both (no rows: gemv_axes' form).
UOpPtr depthwise_dw_kernel(int64_t n, int64_t ch, int64_t h) {
  const auto f32 = DType::Float32;
  auto out = global(0, f32), x = global(1, f32), dy = global(2, f32);
  auto c = make_range(ch, 0), kh = make_range(3, 1), kw = make_range(3, 2);
  auto b = make_range(n, 3, AxisKind::Reduce), i = make_range(h, 4, AxisKind::Reduce),
       j = make_range(h, 5, AxisKind::Reduce);
  const auto zero = const_i64(0);
  const UOpPtr row = i + kh, col = j + kw;
  const UOpPtr valid =
      land(land(zero < row, row < const_i64(h + 1)), land(zero < col, col < const_i64(h + 1)));
  const UOpPtr x_at = b * (ch * h * h) + c * (h * h) + (row - 1) * h + (col - 1);
  const UOpPtr xs = where(valid, kb::load(kb::index(x, x_at, valid)), const_float(f32, 0.0));
  const UOpPtr product = xs * load(dy, b * (ch * h * h) + c * (h * h) + i * h + j);
  return sink(
      {end(store(index(out, c * 9 + kh * 3 + kw), reduce(Op::ADD, product, {b, i, j})), {c, kh, kw})});
}

bool reads_output(const UOpPtr& kernel) {
  for (const auto& u : toposort(kernel))
    if (u->op == Op::LOAD && u->src.at(0)->src.at(0)->op == Op::DEFINE_GLOBAL &&
        u->src[0]->src[0]->arg_int() == 0)
      return true;
  return false;
}

}  // namespace

TEST_CASE(
    "a conv's weight gradient: a dot tile of whole vectors along the row, its sum in blocks of images") {
  // nn's [64, 64, 56, 56] 3x3 layer on AVX-512: 56 pixels a row in 4 vectors of 16 (the
  // last half masked, a quarter at most), not 7 of 8 lanes packed 2 columns a register.
  const Target t = two_cores_1m_l2(64);
  const UOpPtr kernel = conv_dw_kernel(64, 64, 64, 56, 56);
  const std::vector<Opt> opts = heuristic_opts(kernel, t);
  REQUIRE(!opts.empty());
  CHECK(opts[0].kind == OptKind::DotTile);
  CHECK(opts[0].amount == 16);
  CHECK(opts[0].rows == 5);
  // 5 channels of dy over 64 images are 4 MB: the sum runs in blocks, partial sums in dw.
  CHECK(reads_output(optimize_kernel(kernel, {true, t})));
  // Over 2 images they fit a quarter of the L2: one sum.
  CHECK_FALSE(reads_output(optimize_kernel(conv_dw_kernel(2, 64, 64, 56, 56), {true, t})));
}

TEST_CASE("a blocked dot tile of no rows (a depthwise dw over a large batch) runs on every core") {
  // 512 images: a channel's sum is 1.6 MB, so it runs in blocks. The tile has no rows (each
  // channel reads its own x and dy); the 128 channels go in one group a core, the loop over
  // groups the threads', outside the blocks.
  const UOpPtr opt = optimize_kernel(depthwise_dw_kernel(512, 128, 28), {true, two_cores_1m_l2(64)});
  REQUIRE(reads_output(opt));  // in blocks
  REQUIRE(opt->src.size() == 1);
  const UOpPtr& first = opt->src[0]->src.at(1);
  CHECK(first->get<AxisArg>().kind == AxisKind::Parallel);
  CHECK(trip(first) == 2);
}

TEST_CASE("a conv's weight gradient in blocks: one group of row tiles a core, outside the blocks") {
  // 64 output channels in tiles of 5 rows: 13 tiles, padded to 14 in 2 groups of 7. The loop
  // nest is groups (the threads'), blocks of images, the group's tiles: each block is read
  // once a group, not once a tile.
  for (const int cores : {1, 2, 3}) {
    CAPTURE(cores);
    Target t = two_cores_1m_l2(64);
    t.cores = cores;
    const UOpPtr opt = optimize_kernel(conv_dw_kernel(64, 64, 64, 56, 56), {true, t});
    REQUIRE(opt->src.size() == 1);
    const UOpPtr& end = opt->src[0];
    REQUIRE(end->src.size() >= 3);
    const UOpPtr &first = end->src[1], &second = end->src[2];
    if (cores == 1) {  // no groups: the blocks outermost, one thread
      CHECK(first->get<AxisArg>().kind != AxisKind::Parallel);
      CHECK(trip(first) == 64);  // blocks of one image (a block of the 13 tiles' dy is 4 MB)
      continue;
    }
    CHECK(first->get<AxisArg>().kind == AxisKind::Parallel);
    CHECK(trip(first) == cores);
    CHECK(trip(second) == 64);  // blocks of one image
    const int64_t tiles = (13 + cores - 1) / cores;
    REQUIRE(end->src.size() >= 4);
    CHECK(trip(end->src[3]) == tiles);
  }
}

namespace {
// A weight-gradient kernel (out, x, dy) as optimised, compiled at `bytes`, equals the
// interpreter on the kernel as scheduled, element for element.
void check_dw_values(const UOpPtr& kernel, const UOpPtr& opt, int bytes, int64_t out_elements,
                     int64_t x_elements, int64_t dy_elements) {
  const UOpPtr tile = split_vectors(lower_reduce(expand_lanes(opt), bytes), bytes);
  const KernelFn fn = Jit::instance().compile(emit_llvm_ir(lower_numerics(tile), "tile"), "tile").fn;
  Aligned<float> out(static_cast<size_t>(out_elements), -99.0f), want(out.size(), -99.0f);
  Aligned<float> x(whole_numbers(x_elements, 1)), dy(whole_numbers(dy_elements, 2));
  std::vector<void*> bufs{want.data(), x.data(), dy.data()};
  interpret_kernel(kernel, bufs.data(), {});
  run_all(fn, opt, {out, x, dy});
  for (size_t e = 0; e < out.size(); ++e) {
    INFO("element " << e);
    REQUIRE(out[e] == want[e]);
  }
}
}  // namespace

TEST_CASE("a conv's weight gradient in blocks of images: values as the plain loop nest's") {
  for (const int bytes : sanitizer_budget<int>({64, 32}))
    for (const auto [n, co, ci, h] :
         std::vector<std::array<int64_t, 4>>{{4, 7, 3, 14}, {3, 6, 2, 12}, {2, 5, 2, 16}}) {
      INFO("vector bytes " << bytes << " n " << n << " co " << co << " ci " << ci << " h " << h);
      // An L2 of 16 KiB: a block of one image or two, so the small sums run in blocks too.
      Target t = two_cores_1m_l2(bytes);
      t.l2_bytes = 16 << 10;
      const UOpPtr kernel = conv_dw_kernel(n, co, ci, h, h);
      const UOpPtr opt = optimize_kernel(kernel, {true, t});
      CHECK(reads_output(opt));
      check_dw_values(kernel, opt, bytes, co * ci * 9, n * ci * h * h, n * co * h * h);
    }
}

TEST_CASE("a depthwise conv's weight gradient: a dot tile of one row, values as the plain loop nest's") {
  const std::vector<Opt> opts = heuristic_opts(depthwise_dw_kernel(64, 128, 28), two_cores_1m_l2(64));
  REQUIRE(!opts.empty());
  CHECK(opts[0].kind == OptKind::DotTile);
  CHECK(opts[0].amount == 16);  // 28 pixels in 2 vectors of 16
  CHECK(opts[0].rows == 1);
  for (const int bytes : sanitizer_budget<int>({64, 32}))
    for (const auto [n, ch, h] :
         std::vector<std::array<int64_t, 3>>{{3, 5, 14}, {2, 3, 28}, {70, 2, 12}, {70, 3, 12}}) {
      INFO("vector bytes " << bytes << " n " << n << " channels " << ch << " h " << h);
      Target t = two_cores_1m_l2(bytes);
      t.l2_bytes = 16 << 10;  // the last shapes' sums in blocks of images, 3 channels in 2 groups
      const UOpPtr kernel = depthwise_dw_kernel(n, ch, h);
      check_dw_values(kernel, optimize_kernel(kernel, {true, t}), bytes, ch * 9, n * ch * h * h,
                      n * ch * h * h);
    }
}
