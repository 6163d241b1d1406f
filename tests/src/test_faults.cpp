// The fault cases, one by one, each with its outcome: overflowing shapes are
// errors at creation by every route; a tensor larger than physical memory is an
// error at realize before anything is allocated; malformed UOps are errors
// naming the op; a compile failure leaves no half-written tensor; bad input a
// new user tried is an error naming the op they called; and after each, the
// process goes on; a 100,000-op chain compiles in seconds under the
// kernel-size cap; threads realizing at once all get right answers; with
// LOOM_CHECK_BOUNDS a kernel indexing outside a buffer is an error.
#include "check.hpp"
#include "support/error_message.hpp"

#include "ir/pass_observer.hpp"
#include "ir/planted_fault.hpp"
#include "runtime/buffer.hpp"
#include "src/schedule_cache.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

using namespace loom;
using test::check_values;
using test::error_of;
using test::make;

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

bool mentions(const std::string& message, std::initializer_list<const char*> words) {
  for (const char* w : words)
    if (message.find(w) == std::string::npos) return false;
  return true;
}

// The process goes on: a small computation still works.
void still_works() { check_values(make(DType::Float32, {1, 2}, {2}) * 3, {3, 6}); }
}  // namespace

TEST_CASE("a shape whose element count or byte size overflows int64 is an error at creation, by any route") {
  const int64_t big = int64_t{1} << 40;
  CHECK(mentions(error_of([&] { Tensor::zeros({big, big}); }), {"zeros", "more elements than int64"}));
  CHECK(mentions(error_of([&] {
                   Tensor::ones({3, int64_t{1} << 62});
                 }),
                 {"ones", "more elements than int64"}));
  CHECK(mentions(error_of([&] { Tensor::ones({3, int64_t{1} << 61}); }), {"ones", "2^63 bytes"}));
  CHECK(mentions(error_of([&] { Tensor::ones({int64_t{1} << 32, int64_t{1} << 32}).sum(); }), {"ones"}));
  CHECK(mentions(error_of([&] { Tensor::full({big, big, big}, 1.0); }), {"full"}));
  CHECK(mentions(error_of([&] { Tensor::rand({big, big}); }), {"rand"}));
  CHECK(mentions(error_of([&] { Tensor::eye(int64_t{1} << 33); }), {"eye", "more elements"}));
  Tensor x = Tensor::ones({2, 1});
  CHECK(mentions(error_of([&] { x.pad({{0, kMax}, {0, 0}}); }), {"pad", "more elements than int64"}));
  CHECK(mentions(error_of([&] { x.pad({{0, big}, {0, big}}); }), {"pad", "more elements than int64"}));
  CHECK(mentions(error_of([&] { x.expand({2, kMax}); }), {"expand", "more elements than int64"}));
  CHECK(mentions(error_of([&] { x.expand({2, int64_t{1} << 61}); }), {"expand", "2^63 bytes"}));
  CHECK(mentions(error_of([&] { x.reshape({-1, big, big}); }), {"reshape"}));
  CHECK(mentions(error_of([&] { Tensor::arange(0, 10).reshape({big, big, 0}); }), {"reshape"}));
  // Below the API, UOp::make refuses such a node whatever builds it.
  const UOpPtr c = UOp::make(Op::RESHAPE, DType::Float32, {const_float(DType::Float32, 1)}, Shape{1, 1});
  CHECK(mentions(error_of([&] {
                   UOp::make(Op::EXPAND, DType::Float32, {c}, Shape{big, big});
                 }),
                 {"EXPAND", "more elements than int64"}));
  // A huge but countable lazy tensor is fine as long as nothing realizes it.
  CHECK(Tensor::ones({int64_t{1} << 30, int64_t{1} << 30}).numel() == int64_t{1} << 60);
  still_works();
}

TEST_CASE("a tensor larger than physical memory is an error at realize, before anything is allocated") {
  const size_t live = live_buffer_bytes();
  Tensor huge = Tensor::ones({10'000'000'000'000});  // 4e13 bytes as Float32
  const std::string message = error_of([&] { (huge * 2).realize(); });
  CHECK(mentions(message, {"realize", "physical memory"}));
  CHECK(live_buffer_bytes() == live);
  // A failed allocation below the engine is an error too; the process goes on.
  CHECK(mentions(error_of([] { Buffer::allocate(physical_memory_bytes() + 1); }), {"physical memory"}));
  CHECK(mentions(error_of([] { Buffer::allocate(size_t{1} << 62); }), {"Buffer::allocate"}));
  still_works();
  check_values((Tensor::ones({4}) * 2).sum(), {8});
}

TEST_CASE("a malformed UOp is an error naming the op, where it is built") {
  const UOpPtr f = const_float(DType::Float32, 1), i = const_int(DType::Int32, 1),
               b = const_int(DType::Bool, 1);
  const UOpPtr v = UOp::make(Op::RESHAPE, DType::Float32, {f}, Shape{1});
  CHECK(error_of([&] { UOp::make(Op::ADD, DType::Float32, {f}); }) ==
        "UOp::make: ADD f32: 1 source, expected 2");
  CHECK(error_of([&] {
          UOp::make(Op::ADD, DType::Float32, {f, i});
        }) == "UOp::make: ADD f32: source 1 is i32, expected Float32");
  CHECK(error_of([&] {
          UOp::make(Op::CMPLT, DType::Int32, {i, i});
        }) == "UOp::make: CMPLT i32: a comparison gives bool");
  CHECK(error_of([&] {
          UOp::make(Op::WHERE, DType::Float32, {i, f, f});
        }) == "UOp::make: WHERE f32: condition is i32, expected bool");
  CHECK(error_of([&] { UOp::make(Op::CONST, DType::Float32, {}, int64_t{1}); }) ==
        "UOp::make: CONST f32: a float constant holds a double");
  CHECK(error_of([&] { UOp::make(Op::NEG, DType::Float32, {f}, int64_t{3}); }) ==
        "UOp::make: NEG f32: takes no arg");
  CHECK(mentions(error_of([&] {
                   UOp::make(Op::PERMUTE, DType::Float32, {v}, Shape{1, 0});
                 }),
                 {"PERMUTE", "not a permutation"}));
  CHECK(mentions(error_of([&] { UOp::make(Op::RESHAPE, DType::Float32, {v}, Shape{2}); }),
                 {"RESHAPE", "cannot view"}));
  CHECK(mentions(error_of([&] {
                   UOp::make(Op::REDUCE_AXIS, DType::Float32, {v}, ReduceArg{Op::SUB, {0}});
                 }),
                 {"REDUCE_AXIS", "cannot reduce by SUB"}));
  CHECK(
      mentions(error_of([&] { UOp::make(Op::BITCAST, DType::Float64, {f}); }), {"BITCAST", "sizes differ"}));
  CHECK(mentions(error_of([&] {
                   UOp::make(Op::RANGE, DType::Int64, {f}, AxisArg{0, AxisKind::Loop});
                 }),
                 {"RANGE", "integer"}));
  CHECK(mentions(error_of([&] { UOp::make(Op::BUFFER, DType::Float32, {}, std::vector<int64_t>{1}); }),
                 {"BUFFER", "(id size)"}));
  CHECK(mentions(error_of([&] { UOp::make(Op::DEFINE_GLOBAL, DType::Float32, {}, int64_t{0}); }),
                 {"DEFINE_GLOBAL", "pointer"}));
  (void)b;
  still_works();
}

TEST_CASE(
    "a schedule compiles every kernel before running any: a compile failure leaves no half-written tensor") {
  Tensor a = make(DType::Float32, {1, 2, 3}, {3});
  Tensor b = make(DType::Float32, {4, 5, 6}, {3});
  const UOpPtr& view = a.node()->uop;
  const float* memory =
      static_cast<const float*>(detail::buffer_data(view->op == Op::RESHAPE ? view->src[0] : view));
  a.assign(a + 1.03125f);  // written in place, by the schedule's first kernel
  Tensor c = (b * 3.40625f).sum();
  int optimized = 0;
  const uint64_t token = add_pass_observer([&](const PassEvent& e) {
    if (e.level == PassLevel::Kernel && e.pass == "optimizer" && ++optimized == 2)
      throw Error("planted compile failure of the second kernel");
  });
  const std::string message = error_of([&] { realize({a, c}); });
  remove_pass_observer(token);
  CHECK(optimized == 2);
  CHECK(message == "planted compile failure of the second kernel");
  CHECK(memory[0] == 1.0f);  // the in-place assign never ran
  CHECK(memory[2] == 3.0f);
  realize({a, c});  // the same schedule now compiles and runs whole
  check_values(a * 1, {2.03125, 3.03125, 4.03125});
  check_values(c * 1, {51.09375});
}

TEST_CASE("bad input a new user tried is an error naming the op they called") {
  Tensor x = Tensor::ones({2, 3});
  CHECK(error_of([&] { x.flip({0, -2}); }) == "flip: axis 0 appears twice in [0, -2] (as 0 and -2)");
  CHECK(error_of([&] { x.flip({1, 1}); }) == "flip: axis 1 appears twice in [1, 1] (as 1 and 1)");
  // arange's Int32 values may not wrap: the error names the overload that fits.
  CHECK(error_of([] { Tensor::arange(0, int64_t{3} << 31, int64_t{1} << 31); }) ==
        "arange: the values 0 to 4294967296 leave the Int32 range of arange(start, stop, step); use "
        "arange(0, 6442450944, 2147483648, DType::Int64)");
  Tensor wide = Tensor::arange(0, int64_t{3} << 31, int64_t{1} << 31, DType::Int64);
  CHECK(wide.to_vector<int64_t>() == std::vector<int64_t>{0, int64_t{1} << 31, int64_t{1} << 32});
  CHECK(Tensor::arange(-3, 3, 2, DType::Float64).to_vector<double>() == std::vector<double>{-3, -1, 1});
  CHECK(Tensor::arange(kMax - 2, kMax, 1, DType::Int64).to_vector<int64_t>() ==
        std::vector<int64_t>{kMax - 2, kMax - 1});
  CHECK(Tensor::arange(5, 0, -2, DType::UInt8).to_vector<uint8_t>() == std::vector<uint8_t>{5, 3, 1});
  CHECK(error_of([] { Tensor::arange(0, 300, 1, DType::UInt8); }) ==
        "arange: the values 0 to 299 leave the UInt8 range [0, 255]");
  CHECK(mentions(error_of([] { Tensor::arange(std::numeric_limits<int64_t>::min(), kMax, 1, DType::Int64); }),
                 {"arange", "more elements than int64"}));
  // A step past the axis selects its first element, as in PyTorch.
  Tensor y = Tensor::arange(0, 12).reshape({3, 4});
  Tensor s = y.slice(1, 0, 3, kMax);
  CHECK(s.shape() == Shape{3, 1});
  CHECK(s.to_vector<int32_t>() == std::vector<int32_t>{0, 4, 8});
  CHECK(y.slice(1, 1, kMax, kMax).to_vector<int32_t>() == std::vector<int32_t>{1, 5, 9});
  still_works();
}

TEST_CASE("a 100,000-op chain over a real buffer realizes as several kernels with the exact result") {
  constexpr int kSteps = 50'000;  // two ops a step: * and +
  std::vector<float> data(256);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) / 256.0f;
  Tensor x = Tensor::from_vector(data, {16, 16});
  Tensor y = x;
  for (int i = 0; i < kSteps; ++i) y = y * 0.99999f + 0.0001f;
  const auto before = counters();
  y.realize();
  const auto kernels = counters().kernels_executed - before.kernels_executed;
  CHECK(kernels >= 25);  // cut at 4,000 ops a kernel
  CHECK(kernels <= 27);
  // IEEE float arithmetic in the same order: bit for bit what a plain loop gives.
  std::vector<float> want = data;
  for (int i = 0; i < kSteps; ++i)
    for (float& v : want) v = v * 0.99999f + 0.0001f;
  CHECK(y.to_vector<float>() == want);
}

TEST_CASE("8 threads realizing independent graphs for a few seconds all get the reference's answers") {
  // Covers interning (shared constants, equal graphs built at once), the
  // schedule and kernel caches (repeated and new structures), the JIT and the
  // buffer pool. Failures are counted, not asserted, inside the threads.
  constexpr int kThreads = 8;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::atomic<int64_t> realizes{0}, wrong{0}, errors{0};
  auto work = [&](int id) {
    for (int iter = 0; std::chrono::steady_clock::now() < until || iter < 4; ++iter) {
      try {
        const int64_t n = 1 + (id + iter) % 7, m = 1 + iter % 5;
        std::vector<float> v(static_cast<size_t>(n * m));
        for (size_t k = 0; k < v.size(); ++k)
          v[k] = static_cast<float>((k * 7 + static_cast<size_t>(id)) % 11) - 5;
        Tensor x = Tensor::from_vector(v, {n, m});
        // Shapes and a constant that repeat across threads and iterations, and a few new ones.
        Tensor y = ((x * static_cast<float>(iter % 3 + 1) + 0.5f).relu().sum(1) - x.max(1)).exp2() / 4.0f;
        Tensor z = x.cast(DType::Int32) % 3 + static_cast<int>(id);
        const ref::RefTensor want_y = test::reference(y), want_z = test::reference(z);
        realize({y, z});
        ++realizes;
        if (test::values(y) != want_y.as_doubles() || test::values(z) != want_z.as_doubles()) ++wrong;
      } catch (const Error&) {
        ++errors;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  for (auto& t : threads) t.join();
  CHECK(wrong == 0);
  CHECK(errors == 0);
  CHECK(realizes >= kThreads * 4);
  MESSAGE(realizes.load() << " realizes from " << kThreads << " threads");
  still_works();
}

TEST_CASE(
    "LOOM_CHECK_BOUNDS: a kernel indexing past its buffer is an error naming the kernel and the buffer") {
  // A planted scheduler bug reads each input one element further on: at the
  // last element, one past the end of the buffer.
  const std::vector<float> data{1, 2, 3, 4, 5, 6, 7};
  const auto caches_cleared = [] { detail::schedule_cache().clear(); };  // no schedule outlives the fault
  {
    set_planted_fault(PlantedFault::LoadPastEnd);
    Context bounds{{"CHECK_BOUNDS", true}};
    caches_cleared();
    Tensor y = Tensor::from_vector(data, {7}) * 2.5f;
    const std::string message = error_of([&] { y.realize(); });
    set_planted_fault(PlantedFault::None);
    caches_cleared();
    MESSAGE(message);
    CHECK(mentions(message, {"kernel '", "buffer slot 1", "(buffer ", "7 f32 elements", "out of bounds"}));
  }
  // The same program without the fault, checked and unchecked, gives the right answer.
  {
    Context bounds{{"CHECK_BOUNDS", true}};
    check_values(Tensor::from_vector(data, {7}) * 2.5f, {2.5, 5, 7.5, 10, 12.5, 15, 17.5});
  }
  check_values(Tensor::from_vector(data, {7}) * 2.5f, {2.5, 5, 7.5, 10, 12.5, 15, 17.5});
  still_works();
}
