#include "codegen/codegen.hpp"
#include "codegen/run_kernel.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::test;

namespace {

// out[i*cols + j] = in[i*cols + j] + 1 over END(i, j).
UOpPtr elementwise(int64_t rows, int64_t cols) {
  auto out = global(0, DType::Float32), in = global(1, DType::Float32);
  auto i = make_range(rows, 0), j = make_range(cols, 1);
  auto at = i * cols + j;
  return sink({end(store(index(out, at), load(in, at) + const_float(DType::Float32, 1)), {i, j})});
}

AxisKind kind_of(const UOpPtr& kernel, int64_t axis) {
  for (const auto& r : ranges_of(kernel))
    if (r->get<AxisArg>().id == axis) return r->get<AxisArg>().kind;
  FAIL("no range with axis id " << axis);
  return AxisKind::Loop;
}

}  // namespace

TEST_CASE("optimize_kernel: the outermost output range of a single END becomes parallel") {
  const auto kernel = elementwise(8, 4);
  const auto opt = optimize_kernel(kernel);
  CHECK(opt != kernel);
  CHECK(kind_of(opt, 0) == AxisKind::Parallel);
  CHECK(kind_of(opt, 1) == AxisKind::Loop);
  CHECK(parallel_extent(opt, {}) == 8);
  CHECK(parallel_extent(kernel, {}) == 1);  // no parallel range: called once
  CHECK(optimize_kernel(opt) == opt);       // idempotent: a parallel range is not chosen again
}

TEST_CASE("optimize_kernel: leaves kernels alone when splitting is not possible or not asked for") {
  SUBCASE("disabled (LOOM_NOOPT)") {
    const auto kernel = elementwise(8, 4);
    CHECK(optimize_kernel(kernel, OptimizerOptions{.enabled = false}) == kernel);
  }
  SUBCASE("a one-iteration outer loop") {
    const auto kernel = elementwise(1, 4);
    CHECK(optimize_kernel(kernel) == kernel);
  }
  SUBCASE("a scalar kernel (bare STORE)") {
    auto out = global(0, DType::Int32);
    const auto kernel = sink({store(index(out, i64(0)), const_int(DType::Int32, 7))});
    CHECK(optimize_kernel(kernel) == kernel);
    CHECK(parallel_extent(kernel, {}) == 1);
  }
  SUBCASE("two ENDs: the second would run once per task") {
    auto a = global(0, DType::Int32), b = global(1, DType::Int32);
    auto i = make_range(8, 0);
    const auto kernel = sink({end(store(index(a, i), const_int(DType::Int32, 1)), {i}),
                              end(store(index(b, i), const_int(DType::Int32, 2)), {i})});
    CHECK(optimize_kernel(kernel) == kernel);
  }
  SUBCASE("a symbolic trip count") {
    auto out = global(0, DType::Int64);
    auto n = make_var("n", 1, 100);
    auto i = UOp::make(Op::RANGE, DType::Int64, {n}, AxisArg{0, AxisKind::Loop});
    const auto kernel = sink({end(store(index(out, i), i), {i})});
    CHECK(optimize_kernel(kernel) == kernel);
  }
}

TEST_CASE("kernel_vars: sorted by name, each once; one name with two bounds is an error") {
  auto out = global(0, DType::Int64);
  auto b = make_var("b", 0, 10), a = make_var("a", 0, 10);
  const auto kernel = sink({store(index(out, i64(0)), b * 3 + a + b)});
  const auto vars = kernel_vars(kernel);
  REQUIRE(vars.size() == 2);
  CHECK(vars[0] == a);
  CHECK(vars[1] == b);

  const auto clash = sink({store(index(out, i64(0)), a + make_var("a", 0, 20))});
  CHECK_THROWS_WITH_AS(kernel_vars(clash), doctest::Contains("variable 'a' appears twice"), Error);
}

TEST_CASE("parallel_extent: evaluates a symbolic bound with the ABI's variable values") {
  auto out = global(0, DType::Int64);
  auto n = make_var("n", 1, 100), m = make_var("m", 1, 100);
  auto i = UOp::make(Op::RANGE, DType::Int64, {n * 2 + m}, AxisArg{0, AxisKind::Parallel});
  const auto kernel = sink({end(store(index(out, i), i), {i})});
  CHECK(parallel_extent(kernel, {5, 7}) == 19);  // vars sorted by name: m = 5, n = 7
  CHECK_THROWS_WITH_AS(parallel_extent(kernel, {5}), doctest::Contains("2 variables but 1 values"), Error);
}
