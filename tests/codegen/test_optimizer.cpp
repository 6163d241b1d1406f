#include "codegen/codegen.hpp"
#include "codegen/run_kernel.hpp"
#include "ir/target.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

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

// The ranges of one kind, in toposort order.
std::vector<UOpPtr> ranges_of_kind(const UOpPtr& kernel, AxisKind k) {
  std::vector<UOpPtr> out;
  for (const auto& r : ranges_of(kernel))
    if (r->get<AxisArg>().kind == k) out.push_back(r);
  return out;
}
// A range's constant trip count (every range these tests read has one).
int64_t extent(const UOpPtr& r) { return r->src.at(0)->const_int(); }
int native_lanes(DType dt) { return current_target().vector_bytes / dt.itemsize(); }

}  // namespace

TEST_CASE("optimize_kernel: the outermost output range becomes parallel, the contiguous one SIMD lanes") {
  const auto kernel = elementwise(8, 4);
  const auto opt = optimize_kernel(kernel);
  CHECK(opt != kernel);
  CHECK(kind_of(opt, 0) == AxisKind::Parallel);
  CHECK(kind_of(opt, 1) == AxisKind::Upcast);  // 4 columns: fewer than a register holds, all of them
  CHECK(parallel_extent(opt, {}) == 8);
  CHECK(parallel_extent(kernel, {}) == 1);  // no parallel range: called once
  CHECK(optimize_kernel(opt) == opt);       // idempotent: choices are not made twice
}

TEST_CASE("optimize_kernel: a long contiguous range is split into outer iterations and native lanes") {
  const auto kernel = elementwise(16, 256);
  const auto opt = optimize_kernel(kernel);
  const auto upcast = ranges_of_kind(opt, AxisKind::Upcast);
  REQUIRE(upcast.size() == 1);
  CHECK(extent(upcast[0]) == native_lanes(DType::Float32));
  CHECK(ranges_of_kind(opt, AxisKind::Unroll).empty());  // no reduction: one vector per iteration
  CHECK(kind_of(opt, 0) == AxisKind::Parallel);
  Aligned<float> out(16 * 256), in(std::vector<float>(16 * 256, 1.5f));
  check_same_results(kernel, opt, {out, in});
}

TEST_CASE("optimize_kernel: a length that is not a multiple of the lanes is padded, its extra lanes masked") {
  const auto kernel = elementwise(3, 21);
  const auto opt = optimize_kernel(kernel);
  REQUIRE(ranges_of_kind(opt, AxisKind::Upcast).size() == 1);
  std::vector<float> x(63);
  std::iota(x.begin(), x.end(), 0.0f);
  Aligned<float> out(63), in(x);
  check_same_results(kernel, opt, {out, in});
  check_same_results(kernel, lower_reduce(expand_lanes(opt)), {out, in});
}

TEST_CASE("optimize_kernel: reductions get several vector accumulators and bounded float sums") {
  auto f32 = DType::Float32;
  const int w = native_lanes(f32);
  SUBCASE("sum over the contiguous axis (rows): the reduced range goes to lanes and unrolls") {
    auto out = global(0, f32), in = global(1, f32);
    auto i = make_range(4, 0), k = make_range(4096, 1, AxisKind::Reduce);
    const auto kernel = sink({end(store(index(out, i), reduce(Op::ADD, load(in, i * 4096 + k), {k})), {i})});
    const auto opt = optimize_kernel(kernel);
    const auto upcast = ranges_of_kind(opt, AxisKind::Upcast), unroll = ranges_of_kind(opt, AxisKind::Unroll);
    REQUIRE(upcast.size() == 1);
    REQUIRE(unroll.size() == 1);
    CHECK(extent(upcast[0]) == w);
    CHECK(extent(unroll[0]) == 4);
    CHECK(kind_of(opt, 0) == AxisKind::Parallel);
    // 4096 / 32 lanes = 128 per lane, within one block; 4096 / 16 lanes = 256 likewise.
    for (const auto& r : ranges_of_kind(opt, AxisKind::Reduce)) CHECK(extent(r) <= 256);
    std::vector<float> x(4 * 4096);
    for (size_t n = 0; n < x.size(); ++n) x[n] = static_cast<float>(n % 7) - 3.0f;
    Aligned<float> o(4), xs(x);
    check_same_results(kernel, opt, {o, xs}, true);
  }
  SUBCASE("sum over axis 0: the output columns go to lanes, the rows stay a loop, blocked") {
    auto out = global(0, f32), in = global(1, f32);
    auto j = make_range(256, 0), i = make_range(1024, 1, AxisKind::Reduce);
    const auto kernel = sink({end(store(index(out, j), reduce(Op::ADD, load(in, i * 256 + j), {i})), {j})});
    const auto opt = optimize_kernel(kernel);
    const auto upcast = ranges_of_kind(opt, AxisKind::Upcast);
    REQUIRE(upcast.size() == 1);
    CHECK(extent(upcast[0]) == w);
    CHECK(ranges_of_kind(opt, AxisKind::Unroll).size() == 1);
    int reduces = 0;
    for (const auto& u : toposort(opt)) reduces += u->op == Op::REDUCE;
    CHECK(reduces == 2);  // 1024 rows in two nested blocks of 32
    for (const auto& r : ranges_of_kind(opt, AxisKind::Reduce)) CHECK(extent(r) <= 256);
    std::vector<float> x(256 * 1024);
    for (size_t n = 0; n < x.size(); ++n) x[n] = static_cast<float>(n % 11) * 0.5f;
    Aligned<float> o(256), xs(x);
    check_same_results(kernel, opt, {o, xs}, true);
  }
}

TEST_CASE("optimize_kernel: leaves kernels alone when splitting is not possible or not asked for") {
  SUBCASE("disabled (LOOM_NOOPT)") {
    const auto kernel = elementwise(8, 4);
    CHECK(optimize_kernel(kernel, OptimizerOptions{.enabled = false}) == kernel);
  }
  SUBCASE("a one-iteration outer loop runs on one thread") {
    const auto opt = optimize_kernel(elementwise(1, 4));
    CHECK(ranges_of_kind(opt, AxisKind::Parallel).empty());
    CHECK(parallel_extent(opt, {}) == 1);
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
    CHECK(ranges_of_kind(optimize_kernel(kernel), AxisKind::Parallel).empty());
  }
}

TEST_CASE(
    "optimize_kernel: a range along which a store scatters stays a plain loop, and sums repeats in order") {
  // out[idx[i]] += w[i] for 64 lookups into 4 rows: lanes or threads along i would
  // lose the additions of repeated indices.
  auto out = global(0, DType::Float32), idx = global(1, DType::Int32), w = global(2, DType::Float32);
  auto i = make_range(64, 0);
  const UOpPtr at = cast(load(idx, i), DType::Int64);
  const UOpPtr target = index(out, at);
  const auto kernel = sink({end(store(target, kb::load(target) + load(w, i)), {i})});
  const auto opt = optimize_kernel(kernel);
  CHECK(opt == kernel);
  std::vector<float> sums(4, 0.0f), weights(64);
  std::vector<int32_t> rows(64);
  for (int k = 0; k < 64; ++k) rows[k] = (k * 7) % 4, weights[k] = 0.5f * static_cast<float>(k);
  run_all(
      compile_kernel(opt, "scatter"), opt,
      {{sums.data(), sums.size() * 4}, {rows.data(), rows.size() * 4}, {weights.data(), weights.size() * 4}});
}

TEST_CASE("optimize_kernel: padding lanes guards a gather's index load as well as the gather") {
  // out[i] = src[idx[i]] for 5 elements, padded to whole vectors: the padded lanes
  // must not read idx past its end, not even to address the (masked) gather.
  auto out = global(0, DType::Float64), idx = global(1, DType::Int64), src = global(2, DType::Float64);
  auto i = make_range(5, 0);
  const UOpPtr at = load(idx, i);
  const UOpPtr ok = land(i64(-1) < at, at < i64(5));
  const auto kernel = sink({end(store(index(out, i), kb::load(index(src, at, ok))), {i})});
  const auto opt = optimize_kernel(kernel);
  REQUIRE(!ranges_of_kind(opt, AxisKind::Upcast).empty());
  std::vector<double> got(5, 0.0), values{1.5, 2.5, 3.5, 4.5, 5.5};
  std::vector<int64_t> rows{4, 0, 9, 2, 2};
  void* bufs[] = {got.data(), rows.data(), values.data()};
  interpret_kernel_checked(opt, bufs, {5, 5, 5}, {});  // throws on any access past an end
  CHECK(got == std::vector<double>{5.5, 1.5, 0.0, 3.5, 3.5});
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

TEST_CASE("optimize_kernel: a byte max over a row gets no more lanes and accumulators than a vector holds") {
  // 64 UInt8 lanes in an AVX-512 register, times the 4 accumulators of a float sum, are
  // 256 lanes: one more than a UOp's vector dtype holds. The accumulators give way.
  auto u8 = DType::UInt8;
  auto out = global(0, u8), in = global(1, u8);
  auto i = make_range(4, 0), k = make_range(1024, 1, AxisKind::Reduce);
  const auto kernel = sink({end(store(index(out, i), reduce(Op::MAX, load(in, i * 1024 + k), {k})), {i})});
  const auto opt =
      optimize_kernel(kernel, OptimizerOptions{.target = with_vector_bytes(current_target(), 64)});
  const auto upcast = ranges_of_kind(opt, AxisKind::Upcast), unroll = ranges_of_kind(opt, AxisKind::Unroll);
  REQUIRE(upcast.size() == 1);
  REQUIRE(unroll.size() == 1);
  CHECK(extent(upcast[0]) == 64);
  CHECK(extent(unroll[0]) == 2);
  std::vector<uint8_t> x(4 * 1024);
  for (size_t n = 0; n < x.size(); ++n) x[n] = static_cast<uint8_t>((n * 37) % 251);
  x[2 * 1024 + 999] = 255;  // row 2's max, in the last unrolled vector
  Aligned<uint8_t> o(4), xs(x);
  run_all(compile_kernel(opt, "byte_max_rows"), opt, {o, xs});
  for (size_t r = 0; r < 4; ++r) {
    INFO("row " << r);
    CHECK(o[r] == *std::max_element(x.begin() + r * 1024, x.begin() + (r + 1) * 1024));
  }
  check_same_results(kernel, opt, {o, xs});
}
