// The expander (codegen/expander.cpp): upcast and unroll ranges become vector
// lanes. Each case checks the shape of what it made (vector loads and stores,
// gathers, broadcasts, folds) and that it means what the kernel meant: the
// interpreter before and after, and the compiled code against the interpreter.
#include "codegen/codegen.hpp"
#include "codegen/run_kernel.hpp"
#include "ir/symbolic.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <numeric>

using namespace loom;
using namespace loom::test;

namespace {
const auto f32 = DType::Float32;

int count(const UOpPtr& kernel, Op op, int lanes = 0) {
  int n = 0;
  for (const auto& u : toposort(kernel)) n += u->op == op && (lanes == 0 || u->dtype.lanes == lanes);
  return n;
}

bool has_lane_ranges(const UOpPtr& kernel) {
  for (const auto& r : ranges_of(kernel)) {
    const AxisKind k = r->get<AxisArg>().kind;
    if (k == AxisKind::Upcast || k == AxisKind::Unroll) return true;
  }
  return false;
}

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37) % 101) * 0.25f - 12.0f;
  return v;
}

// Expanded, lowered, compiled: all agree with the interpreter on the original.
void check_expansion(const UOpPtr& kernel, const UOpPtr& expanded, const std::vector<Slot>& slots,
                     const std::string& name, bool reorders = false) {
  check_same_results(kernel, expanded, slots, reorders);
  const UOpPtr lowered = lower_reduce(expanded);
  check_same_results(kernel, lowered, slots, reorders);
  std::vector<Aligned<std::byte>> copies;  // 64-byte aligned, as the ABI promises
  std::vector<Slot> compiled;
  for (const Slot& s : slots) {
    copies.emplace_back(s.bytes);
    std::memcpy(copies.back().data(), s.data, s.bytes);
    compiled.emplace_back(copies.back().data(), s.bytes);
  }
  const KernelFn fn = Jit::instance().compile(emit_llvm_ir(lower_numerics(lowered), name), name).fn;
  run_slice(fn, reorders ? lowered : kernel, compiled, {}, 0, 1);
}
}  // namespace

TEST_CASE("expander: a contiguous upcast range becomes vector loads and stores") {
  auto out = global(0, f32), a = global(1, f32), b = global(2, f32);
  auto i = make_range(4, 0), j = make_range(8, 1, AxisKind::Upcast);
  auto at = i * 8 + j;
  const auto kernel =
      sink({end(store(index(out, at), load(a, at) * load(b, i) + const_float(f32, 1)), {i, j})});
  const auto expanded = expand_lanes(kernel);
  CHECK_FALSE(has_lane_ranges(expanded));
  CHECK(count(expanded, Op::LOAD, 8) == 1);  // a[i*8 .. i*8+7]
  CHECK(count(expanded, Op::LOAD, 1) == 1);  // b[i]: one scalar, broadcast
  CHECK(count(expanded, Op::STORE, 8) == 1);
  for (const auto& u : toposort(expanded))
    if (u->op == Op::INDEX && u->dtype.lanes == 8) CHECK(u->src[1] == simplify(i * 8));
  Aligned<float> o(32), x(ramp(32)), y(ramp(4));
  check_expansion(kernel, expanded, {o, x, y}, "vec_add");
  const std::string ir = emit_llvm_ir(lower_reduce(expanded), "vec_add_ir");
  CHECK(ir.find("load <8 x float>") != std::string::npos);
  CHECK(ir.find("store <8 x float>") != std::string::npos);
}

TEST_CASE("expander: a strided read is a gather; lanes that read one address share a scalar load") {
  auto out = global(0, f32), in = global(1, f32);
  auto i = make_range(8, 0), j = make_range(4, 1, AxisKind::Upcast);
  // out[i*4 + j] = in[j*8 + i] (a transpose): the store is contiguous, the load strides by 8
  const auto kernel = sink({end(store(index(out, i * 4 + j), load(in, j * 8 + i)), {i, j})});
  const auto expanded = expand_lanes(kernel);
  int gathers = 0;
  for (const auto& u : toposort(expanded))
    if (u->op == Op::INDEX && u->src[1]->dtype.lanes == 4) ++gathers;
  CHECK(gathers == 1);
  Aligned<float> o(32), x(ramp(32));
  check_expansion(kernel, expanded, {o, x}, "vec_gather");
  const std::string ir = emit_llvm_ir(lower_reduce(expanded), "vec_gather_ir");
  CHECK(ir.find("llvm.masked.gather.v4f32") != std::string::npos);
}

TEST_CASE("expander: two lane axes (a register tile) load and store runs of consecutive elements") {
  auto out = global(0, f32), in = global(1, f32);
  auto i = make_range(4, 0), r = make_range(2, 1, AxisKind::Unroll), c = make_range(4, 2, AxisKind::Upcast);
  // out[(i*2 + r)*4 + c] = 2 * in[(i*2 + r)*8 + c]: rows of 4 contiguous lanes, rows 8 apart
  auto row = i * 2 + r;
  const auto kernel =
      sink({end(store(index(out, row * 4 + c), load(in, row * 8 + c) * const_float(f32, 2)), {i, r, c})});
  const auto expanded = expand_lanes(kernel);
  CHECK(count(expanded, Op::LOAD, 4) == 2);   // one per row
  CHECK(count(expanded, Op::STORE, 4) == 0);  // the store's rows are one run: out is contiguous
  CHECK(count(expanded, Op::STORE, 8) == 1);
  Aligned<float> o(32), x(ramp(64));
  check_expansion(kernel, expanded, {o, x}, "vec_tile");
}

TEST_CASE("expander: a transposing copy's lanes load and store whole vectors, transposed in registers") {
  auto out = global(0, f32), in = global(1, f32);
  // out[c*8 + r] = in[r*16 + c] for 8 rows r = i*4 + u and 16 columns c = j*4 + l: the
  // columns' lanes l read in contiguously, the unrolled rows u write out contiguously
  auto i = make_range(2, 0), j = make_range(4, 1), l = make_range(4, 2, AxisKind::Upcast),
       u = make_range(4, 3, AxisKind::Unroll);
  auto r = i * 4 + u, c = j * 4 + l;
  const auto kernel = sink({end(store(index(out, c * 8 + r), load(in, r * 16 + c)), {i, j, l, u})});
  const auto expanded = expand_lanes(kernel);
  CHECK(count(expanded, Op::LOAD, 4) == 4);   // a row of 4 columns each, not one 16-lane gather
  CHECK(count(expanded, Op::STORE, 4) == 4);  // a column of 4 rows each
  for (const auto& u_ : toposort(expanded))
    if (u_->op == Op::INDEX) CHECK(u_->src[1]->dtype.lanes == 1);  // no gather, no scatter
  Aligned<float> o(128), x(ramp(128));
  check_expansion(kernel, expanded, {o, x}, "vec_transpose");
  const std::string ir = emit_llvm_ir(lower_reduce(expanded), "vec_transpose_ir");
  CHECK(ir.find("llvm.masked.gather") == std::string::npos);
  CHECK(ir.find("llvm.masked.scatter") == std::string::npos);
}

TEST_CASE("expander: a REDUCE over lane ranges folds them by halves; over a loop range it keeps its lanes") {
  auto out = global(0, f32), in = global(1, f32);
  SUBCASE("reduced lanes: out[i] = sum over k of in[i*32 + k], k = outer*8 + lane") {
    auto i = make_range(3, 0), ko = make_range(4, 1, AxisKind::Reduce),
         kl = make_range(8, 2, AxisKind::Upcast);
    const auto kernel =
        sink({end(store(index(out, i), reduce(Op::ADD, load(in, i * 32 + ko * 8 + kl), {ko, kl})), {i})});
    const auto expanded = expand_lanes(kernel);
    CHECK(count(expanded, Op::REDUCE, 8) == 1);  // one vector accumulator over ko
    CHECK(count(expanded, Op::STORE, 1) == 1);   // the folded sum
    // by halves: 8 lanes -> 4 -> 2 -> 1, one vector add a level, not 7 scalar adds
    CHECK(count(expanded, Op::ADD, 4) == 1);
    CHECK(count(expanded, Op::ADD, 2) == 1);
    Aligned<float> o(3), x(ramp(96));
    check_expansion(kernel, expanded, {o, x}, "vec_fold", true);
  }
  SUBCASE("output lanes: out[j] = max over i of in[i*8 + j]") {
    auto j = make_range(8, 0, AxisKind::Upcast), i = make_range(5, 1, AxisKind::Reduce);
    const auto kernel = sink({end(store(index(out, j), reduce(Op::MAX, load(in, i * 8 + j), {i})), {j})});
    const auto expanded = expand_lanes(kernel);
    CHECK(count(expanded, Op::REDUCE, 8) == 1);
    CHECK(count(expanded, Op::STORE, 8) == 1);
    Aligned<float> o(8), x(ramp(40));
    check_expansion(kernel, expanded, {o, x}, "vec_colmax");
  }
  SUBCASE("a lane range the value does not use counts each lane once") {
    auto k = make_range(4, 0, AxisKind::Unroll);
    const auto kernel = sink({store(index(out, i64(0)), reduce(Op::ADD, load(in, i64(1)), {k}))});
    Aligned<float> o(1), x(std::vector<float>{0, 2.5f});
    check_expansion(kernel, expand_lanes(kernel), {o, x}, "vec_unparented");
    interpret_kernel(expand_lanes(kernel), std::vector<void*>{o.data(), x.data()}.data(), {});
    CHECK(o[0] == 10.0f);
  }
}

TEST_CASE("expander: per-lane validity becomes masked vector accesses; bool lanes are stored as bytes") {
  auto out = global(0, DType::Bool), in = global(1, f32);
  auto i = make_range(2, 0), j = make_range(8, 1, AxisKind::Upcast);
  auto at = i * 8 + j;
  auto inside = at < 13;  // a padded range: lanes past 13 neither read nor write
  const auto kernel = sink(
      {end(store(index(out, at, inside), load(index(in, at, inside)) < const_float(f32, 0.5f)), {i, j})});
  const auto expanded = expand_lanes(kernel);
  Aligned<uint8_t> o(16, 7);
  Aligned<float> x(ramp(13));
  check_expansion(kernel, expanded, {o, x}, "vec_masked");
  const std::string ir = emit_llvm_ir(lower_reduce(expanded), "vec_masked_ir");
  CHECK(ir.find("llvm.masked.load.v8f32") != std::string::npos);
  CHECK(ir.find("llvm.masked.store.v8i8") != std::string::npos);
}
