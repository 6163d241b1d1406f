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

double ranks_sum_of(int n) { return n * (n + 1) / 2.0; }  // 1 + 2 + ... + n

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

// The halves' values here are small integers and halves of them: exact in both.
// UInt8's largest here, a sum over 3 ranks of 30 * (r + 1), is 180: no wrap up to 3 ranks.
const DType kDTypes[] = {DType::Float32, DType::Float64,  DType::Int32,  DType::Int64,
                         DType::UInt8,   DType::BFloat16, DType::Float16};
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

TEST_CASE("all_gather joins every rank's tensor along a dim") {
  const int n = dist::world_size();
  for (DType dtype : kDTypes) {
    CAPTURE(to_string(dtype));
    // x[a, b] = (rank + 1) * (3a + b + 1) on [2, 3]; gathered along 0: [2n, 3], along 1 (or -1): [2, 3n].
    const Tensor x = ranked({2, 3}, dtype);
    const auto rows = values(dist::all_gather(x, 0), {2 * n, 3}, dtype);
    for (int r = 0; r < n; ++r)
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 3; ++b)
          CHECK(rows[static_cast<size_t>((2 * r + a) * 3 + b)] == (r + 1.0) * (3 * a + b + 1));
    const auto cols = values(dist::all_gather(x, -1), {2, 3 * n}, dtype);
    for (int r = 0; r < n; ++r)
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 3; ++b)
          CHECK(cols[static_cast<size_t>(a * 3 * n + 3 * r + b)] == (r + 1.0) * (3 * a + b + 1));
    // Sizes 0 and 1.
    CHECK(values(dist::all_gather(ranked({0, 2}, dtype), 1), {0, 2 * n}, dtype).empty());
    const auto one = values(dist::all_gather(ranked({1}, dtype), 0), {n}, dtype);
    for (int r = 0; r < n; ++r) CHECK(one[static_cast<size_t>(r)] == r + 1.0);
  }
}

TEST_CASE("reduce_scatter sums every rank's tensor and gives rank r block r") {
  const int n = dist::world_size(), me = dist::rank();
  const double ranks_sum = n * (n + 1) / 2.0;  // sum over ranks of (rank + 1)
  for (DType dtype : kDTypes) {
    CAPTURE(to_string(dtype));
    // x[i, j] = (rank + 1) * (4i + j + 1) on [2n, 4]: rank me gets rows [2me, 2me + 2) summed.
    const auto rows = values(dist::reduce_scatter(ranked({2 * n, 4}, dtype), 0), {2, 4}, dtype);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j)
        CHECK(rows[static_cast<size_t>(i * 4 + j)] == ranks_sum * (4 * (2 * me + i) + j + 1));
    // Along dim 1 of [3, 2n]: columns [2me, 2me + 2).
    const auto cols = values(dist::reduce_scatter(ranked({3, 2 * n}, dtype), 1), {3, 2}, dtype);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j)
        CHECK(cols[static_cast<size_t>(i * 2 + j)] == ranks_sum * (2 * n * i + 2 * me + j + 1));
    CHECK(values(dist::reduce_scatter(ranked({n, 0}, dtype), 0), {1, 0}, dtype).empty());
    const auto one = values(dist::reduce_scatter(ranked({n}, dtype), 0), {1}, dtype);
    CHECK(one[0] == ranks_sum * (me + 1));
  }
}

TEST_CASE("reduce_scatter of a size the ranks cannot split, and a dim out of range, are errors") {
  const int n = dist::world_size();
  const Tensor x = Tensor::ones({2 * n + 1, 2});
  if (n > 1) CHECK_THROWS_AS(dist::reduce_scatter(x, 0), Error);
  CHECK_THROWS_AS(dist::all_gather(x, 2), Error);
  CHECK_THROWS_AS(dist::all_gather(Tensor::scalar(1), 0), Error);
}

TEST_CASE("all_gather and reduce_scatter along the middle dim of a 3-d tensor, and sizes 0 and 1") {
  const int n = dist::world_size(), me = dist::rank();
  const double ranks_sum = n * (n + 1) / 2.0;
  for (DType dtype : kDTypes) {
    CAPTURE(to_string(dtype));
    // x[a, b, c] = (rank + 1) * (15a + 5b + c + 1) on [2, 3, 5], gathered along 1: [2, 3n, 5].
    const auto got = values(dist::all_gather(ranked({2, 3, 5}, dtype), 1), {2, 3 * n, 5}, dtype);
    for (int r = 0; r < n; ++r)
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 3; ++b)
          for (int c = 0; c < 5; ++c)
            CHECK(got[static_cast<size_t>((a * 3 * n + 3 * r + b) * 5 + c)] ==
                  (r + 1.0) * (15 * a + 5 * b + c + 1));
    // A gathered dim of size 0, and [1, 1] along its last dim.
    CHECK(values(dist::all_gather(ranked({0}, dtype), 0), {0}, dtype).empty());
    const auto one = values(dist::all_gather(ranked({1, 1}, dtype), -1), {1, n}, dtype);
    for (int r = 0; r < n; ++r) CHECK(one[static_cast<size_t>(r)] == r + 1.0);
    // x[a, b, c] = (rank + 1) * (2n * 2 a + 2 b + c + 1) on [2, 2n, 2]: rank me keeps b in [2me, 2me + 2).
    const auto rs = values(dist::reduce_scatter(ranked({2, 2 * n, 2}, dtype), 1), {2, 2, 2}, dtype);
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b)
        for (int c = 0; c < 2; ++c)
          CHECK(rs[static_cast<size_t>((a * 2 + b) * 2 + c)] ==
                ranks_sum * (4 * n * a + 2 * (2 * me + b) + c + 1));
    CHECK(values(dist::reduce_scatter(ranked({0, n}, dtype), 1), {0, 1}, dtype).empty());
  }
}

TEST_CASE("Bool tensors broadcast and gather; reducing them, and Op::Mean of integers, are errors") {
  const int n = dist::world_size(), me = dist::rank();
  // Rank r's element i: (i + r) odd.
  auto bits = [](int r, int64_t count) {
    std::vector<double> v;
    for (int64_t i = 0; i < count; ++i) v.push_back(static_cast<double>((i + r) % 2));
    return v;
  };
  const Tensor x = Tensor::from_vector(bits(me, 6), {2, 3}).cast(DType::Bool);
  const int root = n - 1;
  const Tensor b = dist::broadcast(x, root);
  CHECK(b.dtype() == DType::Bool);
  CHECK(b.cast(DType::Float64).to_vector<double>() == bits(root, 6));
  const auto gathered = values(dist::all_gather(x, 0), {2 * n, 3}, DType::Bool);
  for (int r = 0; r < n; ++r) {
    const std::vector<double> want = bits(r, 6);
    CHECK(std::vector<double>(gathered.begin() + 6 * r, gathered.begin() + 6 * (r + 1)) == want);
  }
  CHECK_THROWS_AS(dist::all_reduce(x, dist::Op::Max), Error);
  CHECK_THROWS_AS(dist::reduce_scatter(Tensor::zeros({n}, DType::Bool), 0), Error);
  CHECK_THROWS_AS(dist::all_reduce(ranked({3}, DType::Int32), dist::Op::Mean), Error);
}

TEST_CASE("all_reduce(max) of negative and mixed values, and of a value only one rank holds") {
  const int n = dist::world_size(), me = dist::rank();
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    CAPTURE(to_string(dtype));
    // Rank r: {-(r + 1), -10 + r, r == 0 ? 7 : -7}: maxima -1, -10 + (n - 1), 7.
    const Tensor x =
        Tensor::from_vector(std::vector<double>{-(me + 1.0), -10.0 + me, me == 0 ? 7.0 : -7.0}, {3})
            .cast(dtype);
    CHECK(values(dist::all_reduce(x, dist::Op::Max), {3}, dtype) ==
          std::vector<double>{-1, -10.0 + (n - 1), 7});
    CHECK(values(dist::all_reduce(x, dist::Op::Sum), {3}, dtype) ==
          std::vector<double>{-ranks_sum_of(n), -10.0 * n + n * (n - 1) / 2.0, 7.0 - 7.0 * (n - 1)});
  }
}
