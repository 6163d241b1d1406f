// lower_reduce: every REDUCE becomes a DEFINE_REG accumulator whose updates are
// ordered by AFTER; the kernel means what it meant (interpreted before and after,
// and compiled), and no REDUCE is left for the linearizer.
#include "codegen/codegen.hpp"
#include "codegen/run_kernel.hpp"

#include <doctest/doctest.h>

#include <limits>

using namespace loom;
using namespace loom::test;

namespace {
const auto f32 = DType::Float32;

int count(const UOpPtr& kernel, Op op) {
  int n = 0;
  for (const auto& u : toposort(kernel)) n += u->op == op;
  return n;
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7919) % 23) - 5.0f;
  return v;
}
}  // namespace

TEST_CASE("lower_reduce: a row sum becomes one accumulator set per row, updated in the loop, read after") {
  auto out = global(0, f32), in = global(1, f32);
  auto i = make_range(5, 0), k = make_range(7, 1, AxisKind::Reduce);
  const auto kernel = sink({end(store(index(out, i), reduce(Op::ADD, load(in, i * 7 + k), {k})), {i})});
  const auto lowered = lower_reduce(kernel);
  CHECK(count(lowered, Op::REDUCE) == 0);
  CHECK(count(lowered, Op::DEFINE_REG) == 1);
  // The initial store waits for the row loop (it runs once per row), the update's read for the
  // initial store and the reduce loop, the result's read for the END of the reduce loop.
  for (const auto& u : toposort(lowered))
    if (u->op == Op::DEFINE_REG) {
      CHECK(u->dtype == f32.ptr_to());
      CHECK(u->get<std::vector<int64_t>>() == std::vector<int64_t>{0, 1});
    }
  CHECK(reaches(lowered,
                UOp::make(Op::AFTER, f32.ptr_to(),
                          {UOp::make(Op::DEFINE_REG, f32.ptr_to(), {}, std::vector<int64_t>{0, 1}), i})));
  Aligned<float> o(5), x(ramp(35, 0.5f));
  check_same_results(kernel, lowered, {o, x});
  run_all(compile_kernel(kernel, "row_sum"), kernel, {o, x});
}

TEST_CASE("lower_reduce: nested and sibling reduces each get their own accumulator") {
  auto out = global(0, f32), in = global(1, f32);
  auto i = make_range(4, 0), j = make_range(3, 1, AxisKind::Reduce), k = make_range(5, 2, AxisKind::Reduce);
  // max over j of (sum over k of in[i, j, k]), plus the product over k of in[i, 0, k]
  auto inner = reduce(Op::ADD, load(in, i * 15 + j * 5 + k), {k});
  auto outer = reduce(Op::MAX, inner, {j});
  auto prod = reduce(Op::MUL, load(in, i * 15 + k), {k});
  const auto kernel = sink({end(store(index(out, i), outer + prod), {i})});
  const auto lowered = lower_reduce(kernel);
  CHECK(count(lowered, Op::REDUCE) == 0);
  CHECK(count(lowered, Op::DEFINE_REG) == 3);
  Aligned<float> o(4), x(ramp(60, 0.25f));
  check_same_results(kernel, lowered, {o, x});
  run_all(compile_kernel(kernel, "nested"), kernel, {o, x});
}

TEST_CASE("lower_reduce: the identities: an empty sum is 0, an empty max the lowest value, NaN propagates") {
  auto out = global(0, f32), in = global(1, f32), iout = global(2, DType::Int32);
  auto none = make_range(0, 0, AxisKind::Reduce), k = make_range(3, 1, AxisKind::Reduce);
  const auto kernel = sink({
      store(index(out, i64(0)), reduce(Op::ADD, load(in, none), {none})),
      store(index(out, i64(1)), reduce(Op::MAX, load(in, none), {none})),
      store(index(out, i64(2)), reduce(Op::MAX, load(in, k), {k})),
      store(index(iout, i64(0)), reduce(Op::MAX, cast(load(in, none), DType::Int32), {none})),
  });
  const auto lowered = lower_reduce(kernel);
  Aligned<float> o(3, 7.0f), x(std::vector<float>{1, std::numeric_limits<float>::quiet_NaN(), 2});
  Aligned<int32_t> io(1, 7);
  check_same_results(kernel, lowered, {o, x, io});
  run_all(compile_kernel(kernel, "identities"), kernel, {o, x, io});
  CHECK(o[0] == 0.0f);
  CHECK(o[1] == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(o[2]));
  CHECK(io[0] == std::numeric_limits<int32_t>::min());
}

TEST_CASE("lower_reduce: a REDUCE over no ranges is its value") {
  auto out = global(0, f32), in = global(1, f32);
  auto x = load(in, i64(0));
  const auto kernel = sink({store(index(out, i64(0)), reduce(Op::ADD, x, {}))});
  CHECK(lower_reduce(kernel) == sink({store(index(out, i64(0)), x)}));
}
