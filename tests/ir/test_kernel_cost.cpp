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

TEST_CASE("a Float32 transcendental counts the operations of the form codegen lowers it to") {
  auto i = make_range(100, 0);
  auto x = load(index(global(1, f32), i));
  for (auto [op, lowered] : {std::pair{Op::EXP, &exp_f32},
                             {Op::EXP2, &exp2_f32},
                             {Op::LOG2, &log2_f32},
                             {Op::SIN, &sin_f32},
                             {Op::COS, &cos_f32},
                             {Op::TANH, &tanh_f32},
                             {Op::SIGMOID, &sigmoid_f32},
                             {Op::ERF, &erf_f32}}) {
    CAPTURE(op_name(op));
    double form = 0;  // the form's ALU operations, MULACC counting two, for one element
    for (const UOpPtr& u : toposort(lowered(x)))
      if (is_alu(u->op)) form += u->op == Op::MULACC ? 2 : 1;
    REQUIRE(form > 10);
    CHECK(kernel_flops(sink({end(store(index(global(0, f32), i), alu(op, {x})), {i})})) == 100 * form);
  }
  // Float64's EXP stays LLVM's intrinsic: one operation.
  const DType f64 = DType::Float64;
  auto y = load(index(global(1, f64), i));
  CHECK(kernel_flops(sink({end(store(index(global(0, f64), i), alu(Op::EXP, {y})), {i})})) == 100);
}

TEST_CASE(
    "kernel_arithmetic: a value inside a reduce's loop runs once per iteration of every loop around it") {
  // out[i, j] = sum_k exp(a[i, k]) * b[k, j]: the EXP reads no j, but the reduce over
  // k runs inside the j loop, so it is computed I * J * K times; kernel_flops counts
  // where its ranges say (I * K), kernel_arithmetic where it runs.
  const int64_t I = 4, J = 8, K = 16;
  auto i = make_range(I, 0), j = make_range(J, 1), k = make_range(K, 2, AxisKind::Reduce);
  auto e = alu(Op::EXP, {load(index(global(1, f32), i * K + k))});
  auto sum = reduce(Op::ADD, e * load(index(global(2, f32), k * J + j)), {k});
  auto kernel = sink({end(store(index(global(0, f32), i * J + j), sum), {i, j})});
  const double exp_ops =
      kernel_flops(
          sink({end(store(index(global(0, f32), i), alu(Op::EXP, {load(index(global(1, f32), i))})), {i})})) /
      I;
  REQUIRE(exp_ops > 10);
  CHECK(kernel_flops(kernel) == exp_ops * I * K + 2 * I * J * K);
  CHECK(kernel_arithmetic(kernel) == exp_ops * I * J * K + 2 * I * J * K);
}

TEST_CASE("kernel_arithmetic: a value the reduce's loop does not read is hoisted out of it") {
  // out[i, j] = sum_k 2 * a[i] * b[k, j]: 2 * a[i] runs once per i, not per k.
  const int64_t I = 4, J = 8, K = 16;
  auto i = make_range(I, 0), j = make_range(J, 1), k = make_range(K, 2, AxisKind::Reduce);
  auto twice = load(index(global(1, f32), i)) * const_float(f32, 2.0);
  auto sum = reduce(Op::ADD, twice * load(index(global(2, f32), k * J + j)), {k});
  CHECK(kernel_arithmetic(sink({end(store(index(global(0, f32), i * J + j), sum), {i, j})})) ==
        I + 2 * I * J * K);
}

TEST_CASE("kernel_arithmetic: a pad's validity and the select it guards are addressing") {
  // out[i] = (i < 5 ? x[i] : 0) + 1 over i < 10: only the ADD computes on data.
  auto i = make_range(10, 0);
  auto inside = alu(Op::CMPLT, {i, i64(5)});
  auto padded = alu(Op::WHERE, {inside, load(index(global(1, f32), i, inside)), const_float(f32, 0.0)});
  auto kernel = sink({end(store(index(global(0, f32), i), padded + const_float(f32, 1.0)), {i})});
  CHECK(kernel_arithmetic(kernel) == 10);
  CHECK(kernel_flops(kernel) == 20);  // the GFLOP/s figure counts the select too
}

TEST_CASE("kernel_arithmetic: a value read through a pad computes on data only inside it") {
  // out[i] = -(x[i - 2] where 2 <= i < 6) over i < 10: the NEG runs at 10 points, 4 of
  // them reading x; the other 6 are masked lanes, not x's values computed again.
  auto i = make_range(10, 0);
  auto inside = alu(Op::AND, {alu(Op::CMPLT, {i64(1), i}), alu(Op::CMPLT, {i, i64(6)})});
  auto x = load(index(global(1, f32), i - i64(2), inside));
  auto kernel = sink({end(store(index(global(0, f32), i), alu(Op::NEG, {x})), {i})});
  CHECK(kernel_arithmetic(kernel) == 4);
  // Added to a value loaded everywhere, the sum computes on data at every point.
  auto y = load(index(global(2, f32), i));
  CHECK(kernel_arithmetic(sink({end(store(index(global(0, f32), i), alu(Op::NEG, {x}) + y), {i})})) ==
        4 + 10);
}

TEST_CASE("kernel_arithmetic: a value of an inner loop runs once per iteration of the loops outside it") {
  // out[i, j] = exp(w[j]) * x[i, j], loops i outside j: the EXP reads no i, but sits
  // inside the i loop: I * J runs (kernel_flops counts J, its ranges).
  const int64_t I = 6, J = 16;
  auto i = make_range(I, 0), j = make_range(J, 1);
  auto e = alu(Op::EXP, {load(index(global(1, f32), j))});
  auto kernel = sink(
      {end(store(index(global(0, f32), i * J + j), e * load(index(global(2, f32), i * J + j))), {i, j})});
  const double exp_ops = (kernel_flops(kernel) - I * J) / J;
  REQUIRE(exp_ops > 10);
  CHECK(kernel_arithmetic(kernel) == exp_ops * I * J + I * J);
}

TEST_CASE("kernel_arithmetic: a load guarded by a condition with a sum inside counts it held everywhere") {
  // out[i] = x[i] where sum_k(k) < i, else 0: the guard's sum has a range of its own, no
  // point of i's range, so the guard's share of iterations is taken as all of them.
  auto i = make_range(8, 0), k = make_range(4, 1, AxisKind::Reduce);
  auto sum_k = reduce(Op::ADD, k, {k});
  auto x = load(index(global(1, f32), i, sum_k < i));
  auto kernel = sink({end(store(index(global(0, f32), i), x * x), {i})});
  CHECK(kernel_arithmetic(kernel) == 8);
}
