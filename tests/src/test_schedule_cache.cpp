// The schedule cache end to end: a graph seen before, over new buffers, runs
// its cached plan with no scheduling and no compiling, and gives the new values.
#include "check.hpp"

#include "codegen/codegen.hpp"
#include "ir/log.hpp"
#include "src/schedule_cache.hpp"

#include <loom/context.hpp>

#include <spdlog/sinks/ostream_sink.h>

#include <sstream>

using namespace loom;
using test::iota;
using test::make;

namespace {
// One step of least squares on y = x w, with the gradient written by hand:
// w -= lr * 2/n * x^T (x w - y). Returns the loss before the step.
Tensor sgd_step(Tensor& w, const Tensor& x, const Tensor& y, float lr) {
  const float n = static_cast<float>(x.shape()[0]);
  Tensor err = x.matmul(w) - y;
  Tensor loss = (err * err).mean();
  w.assign(w - x.transpose().matmul(err) * (2 * lr / n));
  loom::realize({w, loss});
  return loss;
}

// The same step computed in plain loops, in double.
std::vector<double> sgd_by_hand(std::vector<double> w, const std::vector<double>& x,
                                const std::vector<double>& y, double lr) {
  const size_t n = y.size(), k = w.size();
  std::vector<double> err(n), g(k);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < k; ++j) err[i] += x[i * k + j] * w[j];
    err[i] -= y[i];
  }
  for (size_t j = 0; j < k; ++j)
    for (size_t i = 0; i < n; ++i) g[j] += x[i * k + j] * err[i];
  for (size_t j = 0; j < k; ++j) w[j] -= lr * 2 / static_cast<double>(n) * g[j];
  return w;
}
void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
}
}  // namespace

TEST_CASE("the second training step, rebuilt over new input buffers, schedules and compiles nothing") {
  const std::vector<double> w0{0.5, -0.25, 1}, x1 = iota(12, 0.1), y1 = iota(4, 0.5, 1);
  Tensor w = make(DType::Float32, w0, {3, 1});
  sgd_step(w, make(DType::Float32, x1, {4, 3}), make(DType::Float32, y1, {4, 1}), 0.1f);
  const std::vector<double> w1 = sgd_by_hand(w0, x1, y1, 0.1);
  check_close(test::values(w), w1);

  const std::vector<double> x2 = iota(12, -0.2, 1), y2 = iota(4, 0.25, -1);
  const auto before = counters();
  sgd_step(w, make(DType::Float32, x2, {4, 3}), make(DType::Float32, y2, {4, 1}), 0.1f);
  const auto after = counters();
  CHECK(after.schedules_built == before.schedules_built);
  CHECK(after.kernels_compiled == before.kernels_compiled);
  CHECK(after.schedule_cache_hits == before.schedule_cache_hits + 1);
  CHECK(after.schedule_cache_misses == before.schedule_cache_misses);
  CHECK(after.kernels_executed > before.kernels_executed);
  check_close(test::values(w), sgd_by_hand(w1, x2, y2, 0.1));  // the new data, not the cached step's
}

TEST_CASE("a different in-place decision is a different plan, and both are right") {
  auto step = [](bool keep_old) {
    Tensor w = make(DType::Float32, {1, 2, 3}, {3});
    Tensor old = keep_old ? w * 1 : Tensor();  // reads w's old value: no in-place write
    const void* memory = detail::buffer_data(w.node()->uop);
    w.assign(w * 2 + 1);
    const auto before = counters();
    w.realize();
    const auto after = counters();
    CHECK((detail::buffer_data(w.node()->uop) == memory) == !keep_old);
    CHECK(w.to_vector<float>() == std::vector<float>{3, 5, 7});
    if (keep_old) CHECK(old.to_vector<float>() == std::vector<float>{1, 2, 3});
    return std::pair{after.schedule_cache_hits - before.schedule_cache_hits,
                     after.schedule_cache_misses - before.schedule_cache_misses};
  };
  step(false);
  CHECK(step(false) == std::pair<uint64_t, uint64_t>{1, 0});
  CHECK(step(true) == std::pair<uint64_t, uint64_t>{0, 1});
  CHECK(step(true) == std::pair<uint64_t, uint64_t>{1, 0});
}

TEST_CASE("flags that change scheduling or codegen key the plan: NOOPT and DISABLE miss, then hit") {
  auto run = [] { return (make(DType::Float32, iota(64), {8, 8}).sum(1) * 3).to_vector<float>(); };
  const auto expected = run();
  for (auto flag : {std::pair<std::string, Context::Value>{"NOOPT", 1}, {"DISABLE", "no_such_stage"}}) {
    Context ctx{{flag.first, flag.second}};
    auto before = counters();
    CHECK(run() == expected);
    CHECK(counters().schedule_cache_misses == before.schedule_cache_misses + 1);
    before = counters();
    CHECK(run() == expected);
    CHECK(counters().schedule_cache_hits == before.schedule_cache_hits + 1);
  }
}

TEST_CASE("LOOM_DEBUG=1 says whether the schedule cache hit") {
  auto out = std::make_shared<std::ostringstream>();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*out);
  loom::log().sinks().push_back(sink);
  {
    Context ctx{{"DEBUG", 1}};
    for (int i = 0; i < 2; ++i) (make(DType::Int32, iota(5), {5}) * 7 + 123457).realize();
  }
  loom::log().sinks().pop_back();
  const std::string text = out->str();
  CHECK(text.find("(schedule cache miss)") != std::string::npos);
  CHECK(text.find("(schedule cache hit)") != std::string::npos);
}

TEST_CASE(
    "ScheduleCache: the least recently used plan goes past the capacity; a second insert keeps the first") {
  detail::ScheduleCache cache;
  auto plan = [] { return std::make_shared<const detail::Plan>(); };
  auto key = [](uint64_t i) { return detail::KeyHasher().word(i).key(); };
  const auto first = plan();
  CHECK(cache.insert(key(0), first) == first);
  CHECK(cache.insert(key(0), plan()) == first);
  for (uint64_t i = 1; i < detail::ScheduleCache::kCapacity; ++i) cache.insert(key(i), plan());
  CHECK(cache.size() == detail::ScheduleCache::kCapacity);
  CHECK(cache.find(key(0)) == first);  // now the most recent: key(1) is the oldest
  cache.insert(key(detail::ScheduleCache::kCapacity), plan());
  CHECK(cache.size() == detail::ScheduleCache::kCapacity);
  CHECK(cache.find(key(1)) == nullptr);
  CHECK(cache.find(key(0)) == first);
  cache.clear();
  CHECK(cache.size() == 0);
}

TEST_CASE("a schedule with a kernel that fails to compile runs none of its kernels and caches no plan") {
  Tensor a = make(DType::Float32, iota(8), {8});
  auto graph = [&a] { return (a * 3 + 1) / (a * 3 + 1).sum(); };  // two kernels
  codegen_testing_break_next_kernel();
  const auto before = counters();
  CHECK_THROWS_AS(graph().realize(), Error);
  CHECK(counters().kernels_executed == before.kernels_executed);
  const auto values = graph().to_vector<float>();  // scheduled afresh: nothing half-made was cached
  CHECK(counters().schedule_cache_misses == before.schedule_cache_misses + 2);
  CHECK(values[1] == doctest::Approx(4.0 / 92));  // (3*1 + 1) / sum of 3i + 1 over i < 8
}
