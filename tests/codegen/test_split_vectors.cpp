// split_vectors: a slice of a value wider than a register is computed from the
// slices of its sources, and a validity that is one bool in every lane becomes
// that bool; the kernel means what it meant (interpreted before and after, and
// compiled).
#include "codegen/codegen.hpp"
#include "codegen/run_kernel.hpp"
#include "codegen/vector_ops.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::test;

namespace {

const auto f32 = DType::Float32;

UOpPtr vindex(const UOpPtr& buf, int lanes, const UOpPtr& at, const UOpPtr& valid = nullptr) {
  std::vector<UOpPtr> src{buf, at};
  if (valid) src.push_back(valid);
  return UOp::make(Op::INDEX, f32.vec(lanes).ptr_to(), std::move(src));
}
UOpPtr vload(const UOpPtr& buf, int lanes, int64_t at) {
  return UOp::make(Op::LOAD, f32.vec(lanes), {vindex(buf, lanes, i64(at))});
}

// out[r*8 .. r*8+7] = (x[0..31] + VECTORIZE(y[0..7], .., y[24..31]))[r*8 .. r*8+7] for
// each register-wide row r: a tile's partial sums added to its accumulators, a row at
// a time.
UOpPtr tile_rows_kernel() {
  auto out = global(0, f32), x = global(1, f32), y = global(2, f32);
  std::vector<UOpPtr> accumulators;
  for (int r = 0; r < 4; ++r) accumulators.push_back(vload(y, 8, 8 * r));
  const UOpPtr sum = vload(x, 32, 0) + UOp::make(Op::VECTORIZE, f32.vec(32), accumulators);
  std::vector<UOpPtr> stores;
  for (int64_t r = 0; r < 4; ++r)
    stores.push_back(store(
        vindex(out, 8, i64(8 * r)),
        gep(sum, {8 * r, 8 * r + 1, 8 * r + 2, 8 * r + 3, 8 * r + 4, 8 * r + 5, 8 * r + 6, 8 * r + 7})));
  return sink(stores);
}

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 13) - 6.0f;
  return v;
}

}  // namespace

TEST_CASE("split_vectors: a row of a wide sum is the sum of the rows of its operands") {
  const UOpPtr kernel = tile_rows_kernel(), split = split_vectors(kernel, 32);
  int rows = 0;
  for (const auto& u : toposort(split)) {
    if (u->op != Op::STORE) continue;
    const UOpPtr& v = u->src.at(1);
    REQUIRE(v->op == Op::ADD);
    CHECK(v->dtype == f32.vec(8));
    CHECK(v->src.at(1)->op == Op::LOAD);  // the accumulator itself, not a lane shuffle of the wide vector
    ++rows;
  }
  CHECK(rows == 4);
  for (const auto& u : toposort(split)) CHECK(u->dtype.lanes <= 32);
  Aligned<float> out(32, -1.0f), x(ramp(32)), y(ramp(32));
  check_same_results(kernel, split, {out, x, y});
  run_all(compile_kernel(split, "split"), split, {out, x, y});
}

TEST_CASE("split_vectors: a sum that fits one register stays whole") {
  const UOpPtr kernel = tile_rows_kernel();
  CHECK(split_vectors(kernel, 128) == kernel);  // 32 floats in one 128-byte register
}

TEST_CASE("split_vectors: a validity that is one bool in every lane becomes that bool") {
  auto out = global(0, f32), x = global(1, f32), flag = global(2, DType::Int32);
  const UOpPtr ok = load(flag, i64(0)) < const_int(DType::Int32, 1);
  const UOpPtr every_lane = UOp::make(Op::VECTORIZE, DType::Bool.vec(8), std::vector<UOpPtr>(8, ok));
  const UOpPtr value = UOp::make(Op::LOAD, f32.vec(8), {vindex(x, 8, i64(0), every_lane)});
  const UOpPtr kernel = sink({store(vindex(out, 8, i64(0), every_lane), value)});
  const UOpPtr split = split_vectors(kernel, 32);
  int indexes = 0;
  for (const auto& u : toposort(split))
    if (u->op == Op::INDEX && u->src.size() > 2) {
      CHECK(u->src[2] == ok);
      ++indexes;
    }
  CHECK(indexes == 2);
  for (int32_t f : {0, 1}) {
    Aligned<float> o(8, -1.0f), in(ramp(8));
    Aligned<int32_t> fl(1, f);
    check_same_results(kernel, split, {o, in, fl});
    run_all(compile_kernel(split, "split_valid"), split, {o, in, fl});
  }
}

TEST_CASE("split_vectors: a fold by halves within a register stays a fold of vectors") {
  // out[0] = max of x[0..15], folded by halves (16 -> 8 -> 4 -> 2 -> 1 lanes) as the
  // expander folds a REDUCE's lanes: one lane of the last MAX is every lane of x, so
  // picking it through the fold would be 15 scalar MAXes where 4 ops do.
  auto out = global(0, f32), x = global(1, f32);
  UOpPtr v = vload(x, 16, 0);
  for (int64_t half = 8; half >= 1; half /= 2) {
    std::vector<int64_t> low(static_cast<size_t>(half)), high(static_cast<size_t>(half));
    for (int64_t l = 0; l < half; ++l)
      low[static_cast<size_t>(l)] = l, high[static_cast<size_t>(l)] = half + l;
    v = alu(Op::MAX, {gep(v, low), gep(v, high)});
  }
  const UOpPtr kernel = sink({store(index(out, i64(0)), v)});
  const UOpPtr split = split_vectors(kernel, 64);
  int maxes = 0;
  for (const auto& u : toposort(split)) maxes += u->op == Op::MAX;
  CHECK(maxes == 4);
  std::vector<float> values = ramp(16);
  values[11] = 9.5f;
  Aligned<float> o(1, -1.0f), in(values);
  check_same_results(kernel, split, {o, in});
  run_all(compile_kernel(split, "split_fold"), split, {o, in});
  CHECK(o[0] == 9.5f);
}

TEST_CASE("split_vectors: one lane of a comparison of broadcasts is the scalar comparison") {
  auto out = global(0, DType::Bool), flag = global(1, DType::Int32);
  const UOpPtr limit = load(flag, i64(0));
  const UOpPtr lanes = UOp::make(Op::VECTORIZE, DType::Int32.vec(8), std::vector<UOpPtr>(8, limit));
  const UOpPtr ones =
      UOp::make(Op::VECTORIZE, DType::Int32.vec(8), std::vector<UOpPtr>(8, const_int(DType::Int32, 1)));
  const UOpPtr kernel = sink({store(index(out, i64(0)), gep(lanes < ones, {0}))});
  const UOpPtr split = split_vectors(kernel, 64);
  for (const auto& u : toposort(split)) CHECK(u->dtype.lanes == 1);
  for (int32_t f : {0, 1}) {
    Aligned<bool> o(1, false);
    Aligned<int32_t> fl(1, f);
    check_same_results(kernel, split, {o, fl});
  }
}
