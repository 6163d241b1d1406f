#include "ir/kernel_cost.hpp"

#include "ir/float_math.hpp"

#include "support/kernel_builders.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::kb;

namespace {
const DType f32 = DType::Float32;
}

TEST_CASE("an elementwise add counts one op per element; its index math counts nothing") {
  auto i = make_range(100, 0), j = make_range(30, 1);
  auto at = [&](int64_t slot) { return load(index(global(slot, f32), i * 30 + j)); };
  auto k = sink({end(store(index(global(0, f32), i * 30 + j), at(1) + at(2)), {i, j})});
  CHECK(kernel_flops(k) == 3000.0);
}

TEST_CASE("a reduce counts its fold per iteration; ops after it count once per output") {
  // out[i] = 3 * sum_k(2 * in[i*64 + k]) over i < 10: 640 MULs, 640 folds, 10 MULs.
  auto i = make_range(10, 0), k = make_range(64, 1, AxisKind::Reduce);
  auto body = load(index(global(1, f32), i * 64 + k)) * const_float(f32, 2.0);
  auto total = reduce(Op::ADD, body, {k}) * const_float(f32, 3.0);
  CHECK(kernel_flops(sink({end(store(index(global(0, f32), i), total), {i})})) == 640 + 640 + 10);
}

TEST_CASE("a value of the outer range alone counts once per outer iteration; MULACC counts two") {
  auto i = make_range(8, 0), j = make_range(5, 1);
  auto a = load(index(global(1, f32), i));  // depends on i only
  auto e = alu(Op::MULACC, {a, a, load(index(global(2, f32), j))});
  auto outer = a * a;  // 8 ops
  CHECK(kernel_flops(sink({end(store(index(global(0, f32), i * 5 + j), e + outer), {i, j})})) ==
        8 + 2 * 40 + 40);
}

TEST_CASE("a kernel that only copies does no arithmetic") {
  auto i = make_range(256, 0);
  CHECK(kernel_flops(sink({end(store(index(global(0, f32), i), load(index(global(1, f32), i))), {i})})) == 0);
}

TEST_CASE("a Float32 EXP counts the operations of the form codegen lowers it to") {
  auto i = make_range(100, 0);
  auto x = load(index(global(1, f32), i));
  double form = 0;  // exp_f32's ALU operations, MULACC counting two, for one element
  for (const UOpPtr& u : toposort(exp_f32(x)))
    if (is_alu(u->op)) form += u->op == Op::MULACC ? 2 : 1;
  REQUIRE(form > 10);
  CHECK(kernel_flops(sink({end(store(index(global(0, f32), i), alu(Op::EXP, {x})), {i})})) == 100 * form);
  // Float64's EXP stays LLVM's intrinsic: one operation.
  const DType f64 = DType::Float64;
  auto y = load(index(global(1, f64), i));
  CHECK(kernel_flops(sink({end(store(index(global(0, f64), i), alu(Op::EXP, {y})), {i})})) == 100);
}
