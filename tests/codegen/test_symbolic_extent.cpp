// Kernels whose ranges have a symbolic extent (a DEFINE_VAR, bound at launch):
// the whole kernel pipeline (optimizer included) compiles each once, and the
// compiled kernel equals the kernel-IR interpreter for every binding, the
// variable's bounds and 1 included.
#include "codegen/codegen.hpp"
#include "codegen/heuristic.hpp"
#include "codegen/opt.hpp"
#include "codegen/run_kernel.hpp"
#include "codegen/symbolic_bindings.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace loom;
using namespace loom::test;

namespace {

UOpPtr sym_range(const UOpPtr& extent, int64_t axis, AxisKind kind = AxisKind::Loop) {
  return UOp::make(Op::RANGE, DType::Int64, {extent}, AxisArg{axis, kind});
}

}  // namespace

TEST_CASE("symbolic extent: elementwise over n") {
  const auto n = make_var("n", 1, 1000);
  auto out = global(0, DType::Float32), in = global(1, DType::Float32);
  auto i = sym_range(n, 0);
  const auto kernel = sink({end(store(index(out, i), load(in, i) * const_float(DType::Float32, 2.0)), {i})});
  for (const char* t : {"x86-64-v4", "x86-64-v3"})
    check_bindings(kernel, "k_sym_ew", t, {1, 7, 16, 17, 100, 999, 1000}, {1000, 1000});
}

TEST_CASE("symbolic extent: rows of 64 summed, n rows") {
  const auto n = make_var("n", 1, 300);
  auto out = global(0, DType::Float32), in = global(1, DType::Float32);
  auto i = sym_range(n, 0), k = make_range(64, 1, AxisKind::Reduce);
  const auto kernel = sink({end(store(index(out, i), reduce(Op::ADD, load(in, i * 64 + k), {k})), {i})});
  for (const char* t : {"x86-64-v4", "x86-64-v3"})
    check_bindings(kernel, "k_sym_rows", t, {1, 2, 7, 64, 299, 300}, {300, 300 * 64});
}

TEST_CASE("symbolic extent: 32 rows of n summed") {
  const auto n = make_var("n", 1, 500);
  auto out = global(0, DType::Float32), in = global(1, DType::Float32);
  auto i = make_range(32, 0), k = sym_range(n, 1, AxisKind::Reduce);
  const auto kernel = sink({end(store(index(out, i), reduce(Op::ADD, load(in, i * n + k), {k})), {i})});
  for (const char* t : {"x86-64-v4", "x86-64-v3"})
    check_bindings(kernel, "k_sym_cols", t, {1, 3, 16, 33, 499, 500}, {32, 32 * 500});
}

TEST_CASE("symbolic extent: n x 48 times 48 x 40 product") {
  const auto n = make_var("n", 1, 200);
  auto out = global(0, DType::Float32), a = global(1, DType::Float32), b = global(2, DType::Float32);
  auto i = sym_range(n, 0), j = make_range(40, 1), k = make_range(48, 2, AxisKind::Reduce);
  const auto kernel = sink(
      {end(store(index(out, i * 40 + j), reduce(Op::ADD, load(a, i * 48 + k) * load(b, k * 40 + j), {k})),
           {i, j})});
  for (const char* t : {"x86-64-v4", "x86-64-v3"})
    check_bindings(kernel, "k_sym_mm", t, {1, 5, 64, 199, 200}, {200 * 40, 200 * 48, 48 * 40});
}

TEST_CASE("symbolic extent: a long sum over n is blocked for the variable's upper bound") {
  const auto n = make_var("n", 1, 40000);
  auto out = global(0, DType::Float32), in = global(1, DType::Float32);
  auto i = make_range(3, 0), k = sym_range(n, 1, AxisKind::Reduce);
  const auto kernel = sink({end(store(index(out, i), reduce(Op::ADD, load(in, i * n + k), {k})), {i})});
  for (const char* t : {"x86-64-v4", "x86-64-v3", "x86-64-v2"})
    check_bindings(kernel, "k_sym_long", t, {1, 15, 4097, 39999, 40000}, {3, 3 * 40000});
}

TEST_CASE("symbolic extent: a row's max, then the row scaled by it (softmax's shape), n columns") {
  const auto n = make_var("n", 1, 600);
  auto out = global(0, DType::Float32), in = global(1, DType::Float32);
  auto i = make_range(6, 0), k = sym_range(n, 1, AxisKind::Reduce), j = sym_range(n, 2);
  const auto row_max = reduce(Op::MAX, load(in, i * n + k), {k});
  const auto kernel = sink({end(store(index(out, i * n + j), load(in, i * n + j) - row_max), {i, j})});
  for (const char* t : {"x86-64-v4", "x86-64-v3"})
    check_bindings(kernel, "k_sym_rowmax", t, {1, 2, 17, 255, 600}, {6 * 600, 6 * 600});
}

TEST_CASE(
    "symbolic extent: the Opts the heuristic picks for a symbolic range split it, mask its tail and thread "
    "it") {
  const auto n = make_var("n", 1, 1000);
  auto out = global(0, DType::Float32), in = global(1, DType::Float32);
  auto i = sym_range(n, 0);
  const auto kernel = sink({end(store(index(out, i), load(in, i) * const_float(DType::Float32, 2.0)), {i})});
  CHECK(to_string(heuristic_opts(kernel, target_named("x86-64-v4"))) ==
        "[pad(0, 16), upcast(0, 16), parallel(1)]");
  CHECK(to_string(heuristic_opts(kernel, target_named("x86-64-v3"))) ==
        "[pad(0, 8), upcast(0, 8), parallel(1)]");
  // Made lanes whole it cannot be: that needs a constant trip count.
  CHECK_THROWS_WITH_AS(apply_opts(kernel, {Opt{OptKind::Upcast, 0, 0}}, target_named("x86-64-v4")),
                       doctest::Contains("never made lanes whole"), Error);
  // A split the variable's range may not divide is refused; padded first, it is taken.
  CHECK_THROWS_WITH_AS(apply_opts(kernel, {Opt{OptKind::Upcast, 0, 16}}, target_named("x86-64-v4")),
                       doctest::Contains("symbolic iterations"), Error);
}
