// loom::dist's collectives across the ranks of the job (any world size, 1
// included): values against hand-computed ones, rank r holding
// (r + 1) * (i + 1) at element i, for several shapes and dtypes.
#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

using namespace loom;

namespace {
const std::vector<Shape> kShapes = {{}, {0}, {1}, {3, 4}, {2, 3, 5}};

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// This rank's tensor: (rank + 1) * (i + 1), in `dtype`.
Tensor ranked(const Shape& shape, DType dtype) {
  std::vector<double> v;
  for (int64_t i = 0; i < numel(shape); ++i) v.push_back((dist::rank() + 1.0) * static_cast<double>(i + 1));
  return Tensor::from_vector(v, shape).cast(dtype);
}

// The result as doubles, checked for shape and dtype.
std::vector<double> values(const Tensor& t, const Shape& shape, DType dtype) {
  REQUIRE(t.shape() == shape);
  REQUIRE(t.dtype() == dtype);
  return t.cast(DType::Float64).to_vector<double>();
}

const DType kDTypes[] = {DType::Float32, DType::Float64, DType::Int32};
}  // namespace

TEST_CASE("all_reduce: sum, mean and max of every rank's tensor") {
  const double n = dist::world_size();
  for (DType dtype : kDTypes)
    for (const Shape& shape : kShapes) {
      CAPTURE(to_string(dtype));
      CAPTURE(shape.size());
      const Tensor x = ranked(shape, dtype);
      const auto sum = values(dist::all_reduce(x, dist::Op::Sum), shape, dtype);
      const auto max = values(dist::all_reduce(x, dist::Op::Max), shape, dtype);
      REQUIRE(static_cast<int64_t>(sum.size()) == numel(shape));
      for (size_t i = 0; i < sum.size(); ++i) {
        CHECK(sum[i] == (i + 1.0) * n * (n + 1) / 2);  // sum over r of (r + 1)(i + 1)
        CHECK(max[i] == (i + 1.0) * n);
      }
      if (!dtype.is_float()) continue;
      const auto mean = values(dist::all_reduce(x, dist::Op::Mean), shape, dtype);
      for (size_t i = 0; i < mean.size(); ++i) CHECK(mean[i] == (i + 1.0) * (n + 1) / 2);
    }
}

TEST_CASE("broadcast: every rank gets the root's tensor") {
  const int n = dist::world_size();
  for (DType dtype : kDTypes)
    for (const Shape& shape : kShapes)
      for (int root : {0, n - 1}) {
        CAPTURE(to_string(dtype));
        CAPTURE(root);
        const auto got = values(dist::broadcast(ranked(shape, dtype), root), shape, dtype);
        REQUIRE(static_cast<int64_t>(got.size()) == numel(shape));
        for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == (root + 1.0) * (i + 1.0));
      }
}

TEST_CASE("a collective inside a graph: kernels before and after it") {
  // (all_reduce(2x) + 1) on rank r: 2 (i + 1) n (n + 1) / 2 + 1, computed lazily in one realize.
  const double n = dist::world_size();
  const Tensor x = ranked({4}, DType::Float32);
  const auto got = (dist::all_reduce(x * 2.0f) + 1.0f).to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx((i + 1.0) * n * (n + 1) + 1));
  // Two collectives in a chain, the second reading the first's result, which the graph reads again.
  const Tensor s = dist::all_reduce(x);
  const auto chain = (dist::all_reduce(s) - s).to_vector<float>();
  for (size_t i = 0; i < chain.size(); ++i)
    CHECK(chain[i] == doctest::Approx((n - 1) * (i + 1.0) * n * (n + 1) / 2));
}

TEST_CASE("Capture replays a step with a collective: the same values, no graph built") {
  const double n = dist::world_size();
  Capture step(
      [](const std::vector<Tensor>& a) { return std::vector<Tensor>{dist::all_reduce(a[0] * 3.0f) - 1.0f}; });
  for (int call = 0; call < 4; ++call) {
    Tensor x = ranked({5}, DType::Float32) + static_cast<float>(call);
    x.realize();
    const uint64_t built = counters().schedules_built;
    const auto got = step({x})[0].to_vector<float>();
    if (call >= 2) {
      CHECK(step.captured({x}));
      CHECK(counters().schedules_built == built);
    }
    for (size_t i = 0; i < got.size(); ++i)
      CHECK(got[i] == doctest::Approx(3 * ((i + 1.0) * n * (n + 1) / 2 + call * n) - 1));
  }
}

TEST_CASE("barrier, rank and world_size") {
  // CTest names the job's size: a launch that started separate one-process jobs fails here.
  if (const char* ranks = std::getenv("LOOM_TEST_RANKS")) CHECK(dist::world_size() == std::atoi(ranks));
  CHECK(dist::world_size() >= 1);
  CHECK(dist::rank() >= 0);
  CHECK(dist::rank() < dist::world_size());
  dist::barrier();
}
