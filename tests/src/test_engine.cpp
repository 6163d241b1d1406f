// The realize engine end to end: kernel cache, threads, errors from LLVM,
// counters, and assign's copy-on-write ordering.
#include "check.hpp"

#include "codegen/codegen.hpp"
#include "runtime/buffer.hpp"
#include "runtime/executor.hpp"
#include "schedule/schedule.hpp"
#include "support/log_capture.hpp"

#include <loom/context.hpp>

#include <cstring>
#include <string>
#include <thread>

using namespace loom;
using test::buffer_address;
using test::check_values;
using test::iota;
using test::make;

TEST_CASE("a fused expression runs as exactly one kernel") {
  Tensor a = make(DType::Float32, iota(64), {8, 8}), b = make(DType::Float32, iota(64, -1), {8, 8}),
         c = make(DType::Float32, iota(64, 0.5), {8, 8});
  const auto before = counters();
  Tensor y = ((a * b + c).relu() * 0.001f).exp();
  y.realize();
  CHECK(counters().kernels_executed - before.kernels_executed == 1);
  CHECK(counters().schedules_built - before.schedules_built == 1);
}

TEST_CASE(
    "the same computation rebuilt on fresh buffers with new data compiles nothing and gives the new values") {
  auto run = [](float shift) {
    Tensor a = make(DType::Float32, iota(12, 1, shift), {3, 4});
    Tensor b = make(DType::Float32, iota(4, 2), {4});
    return ((a * b).sum(1) + a.max()).to_vector<float>();
  };
  std::vector<float> first = run(0);
  const auto compiled = counters().kernels_compiled;
  const auto executed = counters().kernels_executed;
  std::vector<float> second = run(100);
  CHECK(counters().kernels_compiled == compiled);
  CHECK(counters().kernels_executed > executed);
  // row i: sum_j (4i+j+shift) * 2j + max; by hand for shift 100, row 0: 2*(0*100 + 1*101 + 2*102 + 3*103) +
  // 111
  CHECK(second[0] == doctest::Approx(2 * (101 + 204 + 309) + 111));
  CHECK(first[0] == doctest::Approx(2 * (1 + 4 + 9) + 11));
}

TEST_CASE("LOOM_THREADS=2 splits a kernel's range across threads; results are bitwise those of 1 thread") {
  const int saved = get_num_threads();
  Tensor x = make(DType::Float32, iota(2048 * 1024, 1e-6, -2), {2048, 1024});
  auto compute = [&] {
    return ((x.exp() * x + x.sum(1, true) / x.max()).sqrt() + x.flip(0)).to_vector<float>();
  };
  set_num_threads(1);
  const std::vector<float> one = compute();
  set_num_threads(2);
  // A sleeping TBB worker may wake only after the caller has run every slice
  // (the machine may be busy with other tests), so look over several runs; the
  // kernels are cached after the first, so each run is just the work.
  int threads_seen = 0;
  for (int attempt = 0; attempt < 50 && threads_seen < 2; ++attempt) {
    const std::vector<float> two = compute();
    threads_seen = std::max(threads_seen, last_run_distinct_threads());
    REQUIRE(one.size() == two.size());
    CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
  }
  set_num_threads(saved);
  CHECK(threads_seen == 2);
  CHECK(slice_grain(2048) < 2048);  // the 2048-row output range runs in more than one slice
}

TEST_CASE(
    "a kernel that fails LLVM verification raises loom::Error naming the kernel; the next realize works") {
  Tensor a = make(DType::Float32, {1, 2, 3}, {3});
  codegen_testing_break_next_kernel();
  std::string message;
  try {
    (a * 7.25f - 1).realize();
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message.find("kernel 'E_3'") != std::string::npos);
  check_values(a * 7.25f - 1, {6.25, 13.5, 20.75});
}

TEST_CASE("assign: a graph built before the assign sees the old value; clone keeps the old data") {
  Tensor a = make(DType::Float32, {1, 2, 3}, {3});
  Tensor doubled = a * 2;  // built before the assign, realized after it
  Tensor copy = a.clone();
  a.assign(a + 10);
  check_values(a * 1, {11, 12, 13});
  check_values(doubled, {2, 4, 6});
  check_values(copy * 1, {1, 2, 3});
  a.assign(a * 2);
  check_values(a * 1, {22, 24, 26});
}

TEST_CASE("assign writes into the tensor's own buffer when nothing else can see it") {
  Tensor w = make(DType::Float32, {1, 2, 3, 4}, {2, 2});
  Tensor g = make(DType::Float32, {1, 1, 1, 1}, {2, 2});
  const void* before = buffer_address(w);
  w.assign(w - g * 0.5f);
  w.realize();
  CHECK(buffer_address(w) == before);
  check_values(w * 1, {0.5, 1.5, 2.5, 3.5});
}

TEST_CASE("assign of a permuted self is computed out of place, and still right") {
  Tensor w = make(DType::Int32, {1, 2, 3, 4}, {2, 2});
  const void* before = buffer_address(w);
  w.assign(w.permute({1, 0}) + 0);
  w.realize();
  CHECK(buffer_address(w) != before);
  check_values(w * 1, {1, 3, 2, 4});
}

TEST_CASE("two assigns realized together each read the other's old value") {
  Tensor a = make(DType::Float32, {1, 2}, {2}), b = make(DType::Float32, {10, 20}, {2});
  Tensor na = a - b, nb = b + a;
  a.assign(na);
  b.assign(nb);
  loom::realize({a, b});
  check_values(a * 1, {-9, -18});
  check_values(b * 1, {11, 22});
}

TEST_CASE("assign is PyTorch's copy_: the value broadcasts to the tensor's shape and casts to its dtype") {
  Tensor a = make(DType::Float32, {1, 2}, {2});
  CHECK_THROWS_WITH_AS(
      a.assign(make(DType::Float32, {1, 2, 3}, {3})),
      doctest::Contains("assign: a value of shape [3] cannot be written into a tensor of shape [2]"), Error);
  CHECK_THROWS_WITH_AS(a.assign(Tensor::zeros({2, 2})), doctest::Contains("shape [2, 2]"),
                       Error);  // never a to b
  a.assign(make(DType::Int32, {7, -3}, {2}));
  CHECK(a.dtype() == DType::Float32);
  check_values(a * 1, {7, -3});
  Tensor m = Tensor::zeros({2, 3}, DType::Int32).realize();
  m.assign(make(DType::Float32, {1.9, -2.9, 3.5}, {3}));  // a row broadcast over both rows, truncated
  check_values(m * 1, {1, -2, 3, 1, -2, 3});
  m.assign(5);  // a number fills, as fill_
  check_values(m * 1, {5, 5, 5, 5, 5, 5});
  m.slice(1, 1, 2).assign(make(DType::Float32, {-1}, {1}));
  check_values(m * 1, {5, -1, 5, 5, -1, 5});
}

TEST_CASE("memory is returned when tensors die") {
  const auto start = live_buffer_bytes();
  {
    Tensor x = make(DType::Float32, iota(4096), {4096});
    Tensor y = (x * 2).realize();
    CHECK(live_buffer_bytes() > start);
  }
  CHECK(live_buffer_bytes() == start);
}

TEST_CASE("different tensors realized from several threads at once give the right values") {
  std::vector<std::vector<float>> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &results] {
      for (int round = 0; round < 5; ++round) {
        Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}) * static_cast<float>(t + 1);
        results[t] = (x / x.sum(1, true) + x.max()).to_vector<float>();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    const float k = static_cast<float>(t + 1);
    // row 0 sums to 6k, row 1 to 15k; the max is 6k
    CHECK(results[t][0] == doctest::Approx(1.0 / 6 + 6 * k));
    CHECK(results[t][5] == doctest::Approx(6.0 / 15 + 6 * k));
  }
}

TEST_CASE("the live counts in Counters follow tensors, buffers and cached kernels") {
  const auto before = counters();
  {
    Tensor a = make(DType::Float32, iota(1000), {1000});
    Tensor y = (a * 3 - 1).realize();
    const auto during = counters();
    CHECK(during.live_buffers >= before.live_buffers + 2);
    CHECK(during.live_buffer_bytes >= before.live_buffer_bytes + 8000);
    CHECK(during.live_uops > 0);
    CHECK(during.kernel_cache_entries >= 1);
  }
  CHECK(counters().live_buffers == before.live_buffers);
  CHECK(counters().live_buffer_bytes == before.live_buffer_bytes);
}

TEST_CASE("schedule_of lists the kernels a realize would run and the buffers they bind, running nothing") {
  Tensor x = make(DType::Float32, iota(12), {3, 4});
  Tensor y = x.softmax(1);
  const Counters before = counters();
  const std::vector<ScheduledKernelInfo> kernels = schedule_of({y});
  CHECK(counters().kernels_compiled == before.kernels_compiled);
  CHECK(counters().kernels_executed == before.kernels_executed);
  CHECK(!is_buffer_view(y.node()->uop));  // still lazy
  REQUIRE(kernels.size() == 2);           // the row max and exps, then the row sum and division
  const ScheduledKernelInfo& last = kernels.back();
  CHECK(last.buffers.at(0).numel == 12);  // the result
  CHECK(last.buffers.at(0).dtype == DType::Float32);
  bool reads_x = false;
  for (const auto& k : kernels) {
    CHECK(!k.name.empty());
    for (size_t slot = 1; slot < k.buffers.size(); ++slot) reads_x |= k.buffers[slot].numel == 12;
  }
  CHECK(reads_x);
  y.realize();
  CHECK(counters().kernels_executed - before.kernels_executed == kernels.size());
  CHECK(schedule_of({y}).empty());  // realized: nothing left to run
}

TEST_CASE(
    "a kernel evicted from the bounded kernel cache is compiled again when needed, or reloaded from disk") {
  auto run = [](float c) { return (make(DType::Float32, iota(16), {16}) * c + 1).to_vector<float>(); };
  const std::vector<float> expected = run(3.25f);
  Context tiny{{"JIT_CACHE_BYTES", 0}};  // from here on the cache keeps only the kernel inserted last
  run(4.5f);                             // evicts the first kernel
  for (const bool disk : {false, true}) {
    CAPTURE(disk);
    Context ctx{{"CACHE_DIR", disk ? std::getenv("LOOM_CACHE_DIR") : "off"}};
    run(disk ? 6.5f : 5.5f);  // another kernel: the 3.25 one is out again
    const auto before = counters();
    CHECK(run(3.25f) == expected);  // its plan is cached, its kernel is not
    CHECK(counters().schedule_cache_hits == before.schedule_cache_hits + 1);
    CHECK(counters().kernels_compiled == before.kernels_compiled + (disk ? 0 : 1));
    CHECK(counters().kernels_loaded == before.kernels_loaded + (disk ? 1 : 0));
    CHECK(counters().kernel_cache_entries == 1);
  }
}

TEST_CASE("over 1,000 distinct compiled kernels, the live JIT code stays under LOOM_JIT_CACHE_BYTES") {
  constexpr uint64_t kLimit = 64 << 10;
  Context ctx{{"JIT_CACHE_BYTES", "64K"}, {"CACHE_DIR", "off"}};
  const Tensor x = make(DType::Float32, iota(8), {8});
  auto run = [&](int i) { return (x * static_cast<float>(i) + 0.5f).to_vector<float>(); };
  uint64_t most = 0;
  const auto before = counters();
  for (int i = 0; i < 1000; ++i) {
    const std::vector<float> got = run(i);
    CHECK(got[7] == 7.0f * static_cast<float>(i) + 0.5f);
    most = std::max(most, counters().jit_code_bytes);
  }
  CHECK(counters().kernels_compiled - before.kernels_compiled == 1000);
  CHECK(most <= kLimit);  // the JIT's count of loaded code, not the number of cache entries
  CHECK(counters().kernel_cache_bytes <= kLimit);
  CHECK(counters().kernel_cache_entries < 1000);
  const auto again = counters();
  CHECK(run(0)[7] == 0.5f);  // long evicted: compiled once more
  CHECK(counters().kernels_compiled == again.kernels_compiled + 1);
}

TEST_CASE("a LOOM_DISABLE name that is no stage warns once, listing the stages; a real one does not") {
  Tensor a = make(DType::Float32, iota(48), {6, 8});
  test::LogCapture capture;
  {
    Context ctx{{"DISABLE", "range_merge,offset_vars,simplfy"}};
    Tensor y = (a * 2.5f + 1).sum(1);
    y.realize();
    Tensor z = (a * 3.5f + 1).sum(0);  // a second schedule: the name was already warned of
    z.realize();
  }
  const std::string text = capture.text();
  const std::string warning =
      "LOOM_DISABLE names 'simplfy', which is no stage or pass; ignored. The stages are "
      "split_reduceop, reduce_collapse, reduce_unparented, dead_axis, narrow_buffers, online_softmax, "
      "buffer_removal, "
      "panel_packing, multi_output, elementwise_outputs, row_padding, masked_reads, scatter_reduce, "
      "load_collapse, "
      "guard_narrowing, "
      "valid_index, "
      "range_split, "
      "range_flatten, range_merge; the kernel passes are optimizer";
  CHECK(text.find(warning) != std::string::npos);
  CHECK(text.find("simplfy") == text.rfind("simplfy"));  // once
  CHECK(text.find("'range_merge'") == std::string::npos);
  CHECK(text.find("'offset_vars'") == std::string::npos);
  CHECK(text.find("the plan pass is offset_vars") != std::string::npos);
}

TEST_CASE(
    "a LOOM_ENABLE name that is no stage off by default warns once, listing them; a real one does not") {
  Tensor a = make(DType::Float32, iota(48), {6, 8});
  test::LogCapture capture;
  {
    Context ctx{{"ENABLE", "online_softmax,buffer_removal"}};
    Tensor y = (a * 4.5f + 1).sum(1);
    y.realize();
    Tensor z = (a * 5.5f + 1).sum(0);
    z.realize();
  }
  const std::string text = capture.text();
  CHECK(text.find("LOOM_ENABLE names 'buffer_removal', which is no stage that is off by default; ignored. "
                  "Those stages are online_softmax") != std::string::npos);
  CHECK(text.find("'buffer_removal'") == text.rfind("'buffer_removal'"));  // once
  CHECK(text.find("'online_softmax'") == std::string::npos);
}
