// src/offset_vars: kernels that differ only in an index offset share one compiled
// kernel, each binding its own offset at launch.
#include "check.hpp"
#include "ir/flags.hpp"
#include "src/offset_vars.hpp"
#include "support/tensor_schedule.hpp"

#include <loom/capture.hpp>
#include <loom/context.hpp>
#include <loom/debug.hpp>
#include <loom/memory.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace loom::test {
namespace {

// Kernels compiled while `run` realizes, from an empty kernel cache and no disk cache.
template <class F>
uint64_t kernels_compiled_by(F&& run) {
  empty_cache();
  const uint64_t before = counters().kernels_compiled;
  run();
  return counters().kernels_compiled - before;
}

// The unrolled RNN of issue 24, h = tanh(x_t + h @ w) over `steps` steps.
Tensor rnn(const Tensor& x, const Tensor& w, int64_t steps) {
  const int64_t batch = x.shape()[1], hidden = x.shape()[2];
  Tensor h = Tensor::zeros({batch, hidden});
  for (int64_t t = 0; t < steps; ++t)
    h = (x.slice(0, t, t + 1).reshape({batch, hidden}) + h.matmul(w)).tanh();
  return h;
}

void check_close_to_reference(const Tensor& t, double rel) {
  const ref::RefTensor want = reference(t);
  Tensor r = t;
  r.realize();
  const std::vector<double> got = values(r);
  REQUIRE(static_cast<int64_t>(got.size()) == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want.at(static_cast<int64_t>(i));
    if (std::abs(got[i] - w) > rel * (1 + std::abs(w))) {
      FAIL_CHECK("element " << i << ": got " << got[i] << ", reference " << w);
      break;
    }
  }
}

}  // namespace

TEST_CASE("offset_pattern: kernels that differ only in an index offset have one pattern, others do not") {
  const Tensor x = Tensor::randn({6, 4, 8}).realize();
  const auto ast_of = [&](const Tensor& t) { return kernel_asts_of({t}).kernels.at(0).ast; };
  const auto step = [&](int64_t t) { return x.slice(0, t, t + 1).reshape({4, 8}).exp(); };
  const detail::OffsetPattern a = detail::offset_pattern(ast_of(step(2))),
                              b = detail::offset_pattern(ast_of(step(5)));
  CHECK(ast_of(step(2)) != ast_of(step(5)));
  CHECK(a.ast == b.ast);
  CHECK(a.values == std::vector<int64_t>{2 * 32});
  CHECK(b.values == std::vector<int64_t>{5 * 32});
  // Another stride (a column of the step, not its row) is another kernel.
  const detail::OffsetPattern c =
      detail::offset_pattern(ast_of(x.slice(0, 2, 3).reshape({4, 8}).permute({1, 0}).exp()));
  CHECK(c.ast != a.ast);
}

TEST_CASE(
    "offset vars: an RNN unrolled in a loop compiles the same kernels at 12 steps as at 6, and matches the "
    "reference") {
  const Context no_disk{{"CACHE_DIR", "off"}};
  manual_seed(24);
  const int64_t batch = 4, hidden = 16;
  const Tensor x = Tensor::randn({12, batch, hidden}).realize();
  const Tensor w = (Tensor::randn({hidden, hidden}) * 0.3).realize();
  const uint64_t six = kernels_compiled_by([&] { rnn(x, w, 6).realize(); });
  const uint64_t twelve = kernels_compiled_by([&] { rnn(x, w, 12).realize(); });
  CHECK(twelve == six);
  {  // without the variables, each step's product reads its slice in a kernel of its own
    const Context off{{"DISABLE", "offset_vars"}};
    const uint64_t six_off = kernels_compiled_by([&] { rnn(x, w, 6).realize(); });
    const uint64_t twelve_off = kernels_compiled_by([&] { rnn(x, w, 12).realize(); });
    CHECK(twelve_off >= six_off + 6);
    CHECK(twelve_off >= twelve + 6);
  }
  check_close_to_reference(rnn(x, w, 12), 1e-5);
}

TEST_CASE("offset vars: each kernel reads its own slice, at the first and last offsets and between them") {
  const Context no_disk{{"CACHE_DIR", "off"}};
  const int64_t steps = 5, rows = 3, cols = 7;
  const Tensor x = make(DType::Float32, iota(steps * rows * cols, 0.5, -3), {steps, rows, cols}).realize();
  std::vector<Tensor> along_steps, along_rows;
  for (int64_t t = 0; t < steps; ++t) along_steps.push_back(x.slice(0, t, t + 1) * 2.0);
  for (int64_t r = 0; r < rows; ++r) along_rows.push_back(x.slice(1, r, r + 1) * 2.0);
  const uint64_t compiled = kernels_compiled_by([&] {
    std::vector<Tensor> all = along_steps;
    all.insert(all.end(), along_rows.begin(), along_rows.end());
    realize(all);
  });
  // Offset 0 has no ADD to lift: that slice and the others, for each axis.
  CHECK(compiled <= 4);
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<double> want;
    for (int64_t i = 0; i < rows * cols; ++i) want.push_back(2 * ((t * rows * cols + i) * 0.5 - 3));
    CHECK(values(along_steps[static_cast<size_t>(t)]) == want);
  }
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> want;
    for (int64_t t = 0; t < steps; ++t)
      for (int64_t c = 0; c < cols; ++c) want.push_back(2 * (((t * rows + r) * cols + c) * 0.5 - 3));
    CHECK(values(along_rows[static_cast<size_t>(r)]) == want);
  }
}

TEST_CASE("offset vars: windows of a padded tensor, the padding read at both ends, equal the reference") {
  const Context no_disk{{"CACHE_DIR", "off"}};
  const int64_t steps = 9, cols = 5;
  const Tensor x = make(DType::Float32, iota(steps * cols, 0.25, 1), {steps, cols}).realize();
  // Rows t-1 .. t+1 of x padded by one row of -1 at each end: the offset t-1 is in the
  // address and in the validity of the padding.
  const Tensor padded = x.pad({{1, 1}, {0, 0}}, -1);
  std::vector<Tensor> windows;
  for (int64_t t = 0; t < steps; ++t) windows.push_back(padded.slice(0, t, t + 3) * 2.0);
  const uint64_t compiled = kernels_compiled_by([&] { realize(windows); });
  CHECK(compiled < static_cast<uint64_t>(steps));
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<double> want;
    for (int64_t r = t - 1; r <= t + 1; ++r)
      for (int64_t c = 0; c < cols; ++c)
        want.push_back(r < 0 || r >= steps ? -2.0 : 2 * ((r * cols + c) * 0.25 + 1));
    CHECK(values(windows[static_cast<size_t>(t)]) == want);
  }
}

TEST_CASE("offset vars: a Capture replays each kernel with the offsets it recorded") {
  const int64_t steps = 4, batch = 2, hidden = 8;
  manual_seed(27);
  const Tensor w = (Tensor::randn({hidden, hidden}) * 0.3).realize();
  Capture step([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{rnn(in[0], w, steps)}; });
  for (int call = 0; call < 3; ++call) {
    const Tensor x = Tensor::randn({steps, batch, hidden}).realize();
    const std::vector<double> got = values(step({x})[0]);
    const std::vector<double> want = values(rnn(x, w, steps).realize());
    CHECK(got == want);
    // LOOM_CHECK_BOUNDS runs every call (a replay would not check its indices).
    if (call == 2 && !flags()->check_bounds) CHECK(step.captured({x}));
  }
}

}  // namespace loom::test
