// The rewrite stages on real programs: each changes what runs. Checked on the
// kernels the scheduler generates (kernel count, ranges and their sizes,
// REDUCEs, loads) and on the values the realized programs give.
#include "check.hpp"

#include "codegen/codegen.hpp"
#include "schedule/schedule.hpp"
#include "support/tensor_schedule.hpp"

#include <loom/context.hpp>
#include <loom/loom.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

using namespace loom;
using loom::test::check_ref;
using loom::test::kernel_asts_of;
using loom::test::nodes_of;

namespace {

// Does any kernel loop over a range of exactly `n` iterations?
bool loops_over(const Schedule& s, int64_t n) {
  for (const auto& r : nodes_of(s, Op::RANGE))
    if (r->src[0]->is_const() && r->src[0]->const_int() == n) return true;
  return false;
}

constexpr int64_t kRows = 65536, kWidth = 64, kLookups = 256;

struct Lookup {
  Tensor idx, table;
  std::vector<int32_t> ids;
  std::vector<float> rows;
  // The rows the lookup must give, read off the realized inputs by hand.
  std::vector<float> expected() const {
    std::vector<float> out;
    for (int32_t i : ids) out.insert(out.end(), rows.begin() + i * kWidth, rows.begin() + (i + 1) * kWidth);
    return out;
  }
};

Lookup lookup_inputs() {
  Lookup l;
  l.idx = Tensor::randint(0, kRows, {kLookups}).realize();
  l.table = Tensor::rand({kRows, kWidth}).realize();
  l.ids = l.idx.to_vector<int32_t>();
  l.rows = l.table.to_vector<float>();
  return l;
}

Tensor one_hot_lookup(const Lookup& l) {
  return (l.idx.one_hot(kRows).cast(DType::Float32).unsqueeze(-1) * l.table).sum(1);
}

}  // namespace

TEST_CASE("a one-hot embedding lookup of 256 rows of a [65536, 64] table has no loop over the 65536 rows") {
  const Lookup l = lookup_inputs();
  const Tensor y = one_hot_lookup(l);
  const Schedule s = kernel_asts_of({y});
  CHECK(s.kernels.size() == 1);
  CHECK_FALSE(loops_over(s, kRows));
  CHECK(nodes_of(s, Op::REDUCE).empty());
  CHECK(nodes_of(s, Op::LOAD).size() == 2);  // the index and the one row element it selects
  CHECK(y.to_vector<float>() == l.expected());
  {  // with reduce_collapse off the sum over the table's rows is back
    Context off{{"DISABLE", "reduce_collapse"}};
    const Schedule slow = kernel_asts_of({one_hot_lookup(l)});
    CHECK(loops_over(slow, kRows));
    CHECK(nodes_of(slow, Op::REDUCE).size() == 1);
  }
}

TEST_CASE(
    "the one-hot lookup's gradient with respect to the table is a zero fill and a scatter of 256 rows") {
  // d/dtable[r, d] of sum(lookup * w) is the sum of w[i, d] over the lookups i
  // with idx[i] == r. scatter_reduce writes it as zeros plus w's 256 rows added
  // into the rows they selected: no loop over the 65536 rows (the fill is one
  // range over all 65536 * 64 elements) and no reduce at all.
  const Lookup l = lookup_inputs();
  const Tensor w = Tensor::rand({kLookups, kWidth}).realize();
  const Tensor g = gradient((one_hot_lookup(l) * w).sum(), {l.table})[0];
  const Schedule s = kernel_asts_of({g});
  CHECK(s.kernels.size() == 1);
  CHECK_FALSE(loops_over(s, kRows));
  CHECK(nodes_of(s, Op::REDUCE).empty());
  CHECK(loops_over(s, kLookups));
  {  // with scatter_reduce off, every table element sums over the 256 lookups
    Context off{{"DISABLE", "scatter_reduce"}};
    const Schedule dense = kernel_asts_of({gradient((one_hot_lookup(l) * w).sum(), {l.table})[0]});
    CHECK(loops_over(dense, kRows));
    CHECK(nodes_of(dense, Op::REDUCE).size() == 1);
  }
  const std::vector<float> ws = w.to_vector<float>();
  std::vector<float> expected(kRows * kWidth, 0.0f);
  for (int64_t i = 0; i < kLookups; ++i)
    for (int64_t d = 0; d < kWidth; ++d) expected[l.ids[i] * kWidth + d] += ws[i * kWidth + d];
  const std::vector<float> got = g.to_vector<float>();
  REQUIRE(got.size() == expected.size());
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::abs(got[i] - expected[i]) > 1e-6f * std::max(1.0f, std::abs(expected[i]))) ++wrong;
  CHECK(wrong == 0);
}

TEST_CASE("index_select and gather read only the rows they select") {
  const Lookup l = lookup_inputs();
  const Tensor picked = l.table.index_select(0, l.idx);
  const Schedule s = kernel_asts_of({picked});
  CHECK(s.kernels.size() == 1);
  CHECK_FALSE(loops_over(s, kRows));
  CHECK(nodes_of(s, Op::REDUCE).empty());
  CHECK(picked.to_vector<float>() == l.expected());

  const Tensor where = l.idx.reshape({kLookups, 1}).expand({kLookups, kWidth});
  const Tensor gathered = l.table.gather(0, where);
  const Schedule g = kernel_asts_of({gathered});
  CHECK_FALSE(loops_over(g, kRows));
  CHECK(nodes_of(g, Op::REDUCE).empty());
  CHECK(gathered.to_vector<float>() == l.expected());
}

TEST_CASE("index_select's gradient scatters the selected rows back, repeated indices adding up") {
  // nn::Embedding's backward: the rows that 256 lookups (with repeats) read from a
  // [65536, 64] table get the sum of their upstream rows; every other row is 0.
  const Lookup l = lookup_inputs();
  std::vector<int32_t> ids = l.ids;
  for (size_t i = 0; i < ids.size(); i += 4) ids[i] = ids[0];  // a quarter of the lookups share one row
  const Tensor idx = Tensor::from_vector(ids, {kLookups});
  const Tensor w = Tensor::rand({kLookups, kWidth}).realize();
  const Tensor g = gradient((l.table.index_select(0, idx) * w).sum(), {l.table})[0];
  const Schedule s = kernel_asts_of({g});
  CHECK_FALSE(loops_over(s, kRows));
  CHECK(nodes_of(s, Op::REDUCE).empty());
  const std::vector<float> ws = w.to_vector<float>();
  std::vector<float> expected(kRows * kWidth, 0.0f);
  for (int64_t i = 0; i < kLookups; ++i)
    for (int64_t d = 0; d < kWidth; ++d) expected[ids[i] * kWidth + d] += ws[i * kWidth + d];
  CHECK(g.to_vector<float>() == expected);  // the same additions in the same order: exact
}

TEST_CASE("a position embedding's gradient over a large upstream keeps every row") {
  // Its sum over the rows read through the positions 0..T-1 is split in parts (the
  // upstream, 2 MiB, comes from memory), and each part's scatter zero-fills its output
  // first: run across threads, every task zeroed what the tasks before it had added.
  const int64_t batch = 8, positions = 256, width = 256;
  manual_seed(11);
  const Tensor table = Tensor::randn({positions, width}).realize();
  const Tensor up = Tensor::randn({batch, positions, width}).realize();
  const Tensor g = gradient((table.index_select(0, Tensor::arange(positions)) * up).sum(), {table})[0];
  const std::vector<float> got = g.to_vector<float>(), ups = up.to_vector<float>();
  int64_t wrong = 0;
  for (int64_t t = 0; t < positions; ++t)
    for (int64_t c = 0; c < width; ++c) {
      double want = 0;
      for (int64_t b = 0; b < batch; ++b) want += ups[(b * positions + t) * width + c];
      const float have = got[t * width + c];
      if (std::abs(have - want) > 1e-5 * (1 + std::abs(want)) && wrong++ < 3)
        FAIL_CHECK(fmt::format("row {} column {}: {} where the sum is {}", t, c, have, want));
    }
  CHECK(wrong == 0);
}

TEST_CASE("a full sum of 16M floats runs as two kernels, the first split across threads") {
  const int64_t n = int64_t{1} << 24;
  const UOpPtr x = gb::input(1, {n});
  const UOpPtr sum = gb::reduce_axis(x, Op::ADD, {0});
  gb::FakeBuffers fb;
  const Schedule s = create_schedule({sum}, fb.factory());
  REQUIRE(s.kernels.size() == 2);
  const UOpPtr first = optimize_kernel(s.kernels[0].ast);
  const UOpPtr& end = first->src.at(0);
  REQUIRE(end->op == Op::END);
  CHECK(end->src.at(1)->get<AxisArg>().kind == AxisKind::Parallel);
  CHECK(end->src.at(1)->src[0]->const_int() == 256);
  const auto reduces = nodes_of(s, Op::REDUCE);
  REQUIRE(reduces.size() == 2);
  CHECK(reduces[0]->src.at(1)->src[0]->const_int() == n / 256);
  CHECK(reduces[1]->src.at(1)->src[0]->const_int() == 256);
  {
    Context off{{"DISABLE", "split_reduceop"}};
    CHECK(create_schedule({sum}, fb.factory()).kernels.size() == 1);
  }
  // And it sums right: 1 + 2 + ... in parts, exact in Float32 below 2^24.
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 3);
  const double got = Tensor::from_vector<float>(v, {n}).sum().to_vector<float>()[0];
  CHECK(got == doctest::Approx(static_cast<double>(n / 3) * 3.0 + 1.0).epsilon(1e-6));
}

TEST_CASE("x / x.sum() keeps its reduce in a buffer; s + s.flip(0) computes its reduce once") {
  const Tensor x = Tensor::rand({64, 48}).realize();
  const Schedule norm = kernel_asts_of({x / x.sum()});
  CHECK(norm.kernels.size() == 2);
  CHECK(nodes_of(norm, Op::REDUCE).size() == 1);
  check_ref(x / x.sum(), 64);

  const Tensor s = x.sum(1);
  const Tensor y = s + s.flip(0);
  const Schedule both = kernel_asts_of({y});
  CHECK(nodes_of(both, Op::REDUCE).size() == 1);
  CHECK(both.kernels.size() == 2);
  check_ref(y, 64);
}

TEST_CASE(
    "a permute-reshape-expand chain over one [64,32,16] buffer ending contiguous is one kernel, one range") {
  const Tensor x = Tensor::rand({64, 32, 16}).realize();
  // Permutes and reshapes that come back to x's order, and an expand of a size-1 axis.
  const Tensor chain = x.permute({2, 0, 1})
                           .reshape({16, 2048})
                           .permute({1, 0})
                           .reshape({64, 32, 16, 1})
                           .expand({64, 32, 16, 1})
                           .reshape({64, 32, 16})
                           .contiguous();
  const Schedule s = kernel_asts_of({chain});
  REQUIRE(s.kernels.size() == 1);
  CHECK(nodes_of(s, Op::RANGE).size() == 1);
  CHECK(chain.to_vector<float>() == x.to_vector<float>());
}

TEST_CASE("an elementwise add on [1024, 1024] reaches the optimiser as one range of 1048576") {
  const Tensor a = Tensor::rand({1024, 1024}).realize(), b = Tensor::rand({1024, 1024}).realize();
  const Schedule s = kernel_asts_of({a + b});
  REQUIRE(s.kernels.size() == 1);
  const auto ranges = nodes_of(s, Op::RANGE);
  REQUIRE(ranges.size() == 1);
  CHECK(ranges[0]->src[0]->const_int() == 1024 * 1024);
  {
    Context off{{"DISABLE", "range_merge"}};
    CHECK(nodes_of(kernel_asts_of({a + b}), Op::RANGE).size() == 2);
  }
  check_ref(a + b);
}
