// The emitter, end to end: kernel ASTs built by hand, compiled by emit_llvm_ir and
// the JIT, run on real 64-byte aligned buffers, checked against hand-derived values
// and, on every run, against the kernel-IR interpreter (run_kernel.hpp).
#include "codegen/codegen.hpp"
#include "codegen/opt.hpp"
#include "codegen/run_kernel.hpp"
#include "ir/target.hpp"
#include "tests/support/host_runs.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

using namespace loom;
using namespace loom::test;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min(),
                  kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min(),
                  kI64Max = std::numeric_limits<int64_t>::max();

template <class T>
DType dtype_of();
template <>
DType dtype_of<bool>() {
  return DType::Bool;
}
template <>
DType dtype_of<uint8_t>() {
  return DType::UInt8;
}
template <>
DType dtype_of<int32_t>() {
  return DType::Int32;
}
template <>
DType dtype_of<int64_t>() {
  return DType::Int64;
}
template <>
DType dtype_of<float>() {
  return DType::Float32;
}
template <>
DType dtype_of<double>() {
  return DType::Float64;
}

// out[i] = op(a[i], b[i]) for every i: slots 0 = out, 1 = a, 2 = b. R is the
// result's element type (bool for comparisons).
template <class T, class R = T>
std::vector<R> run_binary(Op op, const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  const DType dt = dtype_of<T>();
  auto out = global(0, dtype_of<R>()), ga = global(1, dt), gb = global(2, dt);
  auto i = make_range(static_cast<int64_t>(a.size()), 0);
  const auto kernel = sink({end(store(index(out, i), alu(op, {load(ga, i), load(gb, i)})), {i})});
  Aligned<R> result(a.size());
  Aligned<T> in_a(a), in_b(b);
  run_all(compile_kernel(kernel, fmt::format("binary_{}_{}", op_name(op), to_string(dt))), kernel,
          {result, in_a, in_b});
  return result.values();
}

template <class T>
std::vector<T> run_unary(Op op, const std::vector<T>& a) {
  const DType dt = dtype_of<T>();
  auto out = global(0, dt), ga = global(1, dt);
  auto i = make_range(static_cast<int64_t>(a.size()), 0);
  const auto kernel = sink({end(store(index(out, i), alu(op, {load(ga, i)})), {i})});
  Aligned<T> result(a.size()), in(a);
  run_all(compile_kernel(kernel, fmt::format("unary_{}_{}", op_name(op), to_string(dt))), kernel,
          {result, in});
  return result.values();
}

// Floats compared bit-for-bit in spirit: NaN equals NaN, and -0 differs from +0.
template <class T>
void check_same(const std::vector<T>& got, const std::vector<T>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << +got[i] << ", want " << +want[i]);
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(want[i]))
        CHECK(std::isnan(got[i]));
      else
        CHECK((got[i] == want[i] && std::signbit(got[i]) == std::signbit(want[i])));
    } else {
      CHECK(got[i] == want[i]);
    }
  }
}

// A page of memory between two inaccessible pages: touching memory just
// before or after it faults, so a masked access that happened would crash.
class GuardedPage {
 public:
  GuardedPage() : page_(static_cast<size_t>(::sysconf(_SC_PAGESIZE))) {
    map_ = static_cast<std::byte*>(
        ::mmap(nullptr, 3 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(map_ != MAP_FAILED);
    REQUIRE(::mprotect(map_, page_, PROT_NONE) == 0);
    REQUIRE(::mprotect(map_ + 2 * page_, page_, PROT_NONE) == 0);
  }
  ~GuardedPage() { ::munmap(map_, 3 * page_); }
  float* floats() const { return reinterpret_cast<float*>(map_ + page_); }
  size_t float_count() const { return page_ / sizeof(float); }
  Slot slot() const { return Slot(floats(), page_); }

 private:
  size_t page_;
  std::byte* map_;
};

}  // namespace

// ---- loops and memory ---------------------------------------------------------------------

TEST_CASE("emit: elementwise over two ranges with a broadcast operand") {
  const auto f32 = DType::Float32;
  auto out = global(0, f32), a = global(1, f32), b = global(2, f32), c = global(3, f32);
  auto i = make_range(2, 0), j = make_range(3, 1);
  auto value = load(a, i * 3 + j) * load(b, j) + load(c, i64(0));
  const auto kernel = optimize_kernel(sink({end(store(index(out, i * 3 + j), value), {i, j})}));
  Aligned<float> o(6), in_a(std::vector<float>{1, 2, 3, 4, 5, 6}), in_b(std::vector<float>{10, 100, 1000}),
      in_c(std::vector<float>{0.5f});
  run_all(compile_kernel(kernel, "broadcast"), kernel, {o, in_a, in_b, in_c});
  check_same(o.values(), {10.5f, 200.5f, 3000.5f, 40.5f, 500.5f, 6000.5f});
}

TEST_CASE("emit: the parallel range runs only [begin, end)") {
  auto out = global(0, DType::Int64);
  auto i = make_range(8, 0, AxisKind::Parallel);
  const auto kernel = sink({end(store(index(out, i), i * 10), {i})});
  REQUIRE(parallel_extent(kernel, {}) == 8);
  Aligned<int64_t> o(8, -1);
  run_slice(compile_kernel(kernel, "slice"), kernel, {o}, {}, 3, 6);
  check_same(o.values(), {-1, -1, -1, 30, 40, 50, -1, -1});
}

TEST_CASE("emit: a masked (padded) load never touches memory where it is invalid") {
  // out[i] = in[i - 2] where 2 <= i < n + 2, else 0: a pad of 2 on both sides.
  GuardedPage page;
  const int64_t n = static_cast<int64_t>(page.float_count());
  for (int64_t k = 0; k < n; ++k) page.floats()[k] = static_cast<float>(k + 1);
  auto out = global(0, DType::Float32), in = global(1, DType::Float32);
  auto i = make_range(n + 4, 0);
  auto valid = land(i64(1) < i, i < n + 2);  // 2 <= i < n + 2
  const auto kernel = optimize_kernel(sink({end(store(index(out, i), load(index(in, i - 2, valid))), {i})}));
  Aligned<float> o(static_cast<size_t>(n + 4), -7.0f);
  run_all(compile_kernel(kernel, "pad"), kernel, {o, page.slot()});
  CHECK(o[0] == 0.0f);
  CHECK(o[1] == 0.0f);
  CHECK(o[2] == 1.0f);
  CHECK(o[static_cast<size_t>(n) + 1] == static_cast<float>(n));
  CHECK(o[static_cast<size_t>(n) + 2] == 0.0f);
  CHECK(o[static_cast<size_t>(n) + 3] == 0.0f);
}

namespace {
// out[i - 2] = i where 2 <= i < n + 2: the invalid stores would hit the guard pages.
UOpPtr shifted_store(int64_t n) {
  auto out = global(0, DType::Float32);
  auto i = make_range(n + 4, 0);
  auto valid = land(i64(1) < i, i < n + 2);
  return sink({end(store(index(out, i - 2, valid), cast(i, DType::Float32)), {i})});
}
}  // namespace

TEST_CASE("emit: a masked store writes only where it is valid") {
  GuardedPage page;
  const int64_t n = static_cast<int64_t>(page.float_count());
  const auto kernel = shifted_store(n);
  run_all(compile_kernel(kernel, "masked_store"), kernel, {page.slot()});
  CHECK(page.floats()[0] == 2.0f);
  CHECK(page.floats()[n - 1] == static_cast<float>(n + 1));
}

TEST_CASE("emit: a store masked by lane stores plainly where every lane is valid, masked at the ends") {
  // The shifted store in vectors: the first and last vectors straddle the guard pages
  // (masked), those between are whole (plain stores: masked ones cost far more on AMD's
  // cores).
  GuardedPage page;
  const int64_t n = static_cast<int64_t>(page.float_count());
  const auto kernel = optimize_kernel(shifted_store(n));
  const std::string ir = emit_llvm_ir(lower_reduce(expand_lanes(kernel)), "lane_store");
  CHECK(ir.find("@llvm.vector.reduce.and") != std::string::npos);  // all lanes valid?
  CHECK(ir.find("@llvm.masked.store") != std::string::npos);       // no: masked
  CHECK(ir.find("store <") != std::string::npos);                  // yes: a plain vector store
  run_all(compile_kernel(kernel, "lane_store"), kernel, {page.slot()});
  for (int64_t k = 0; k < n; ++k) {
    INFO("element " << k);
    REQUIRE(page.floats()[k] == static_cast<float>(k + 2));
  }
}

TEST_CASE("emit: a masked access wider than a SIMD register goes as register-wide pieces") {
  // count(a < pad(b)) over 5x5, b 4x4 padded by one row and column of zeros: the
  // optimiser gives the 5-wide axis 8 Float64 lanes, wider than an AVX2 register.
  // LLVM 19 split such a load with the mask (i < 4) & (lane < 4) into a masked
  // half and a plain load of b's next row, so the pad's column read b, not 0.
  const auto f64 = DType::Float64;
  auto out = global(0, f64), a = global(1, f64), b = global(2, f64);
  auto i = make_range(5, 0, AxisKind::Reduce), j = make_range(5, 1, AxisKind::Reduce);
  auto valid = land(i < 4, j < 4);
  auto padded = where(valid, load(index(b, i * 4 + j, valid)), const_float(f64, 0.0));
  auto count = reduce(Op::ADD, cast(load(a, i * 5 + j) < padded, DType::Int32), {i, j});
  const auto kernel = optimize_kernel(sink({store(index(out, i64(0)), cast(count, f64))}));
  const std::string ir = emit_llvm_ir(lower_reduce(expand_lanes(kernel)), "masked_wide");
  for (int lanes = 2 * target_named(flags()->target).vector_bytes / 8; lanes <= 64; lanes *= 2)
    CHECK(ir.find(fmt::format("@llvm.masked.load.v{}f64", lanes)) == std::string::npos);
  // a = -0.5 everywhere, b = -1 (and so is what lies past it): a < b never holds,
  // a < 0 holds on the 9 padded cells.
  // The light pipeline left the mask as LLVM's backend mis-split it; O2 had folded it.
  for (const JitLevel level : {JitLevel::Full, JitLevel::Light, JitLevel::Bulk}) {
    Aligned<double> o(1, -7.0), in_a(25, -0.5), in_b(24, -1.0);
    run_all(Jit::instance().compile(ir, "masked_wide", JitOptions{.level = level}).fn, kernel,
            {o, in_a, in_b});
    CHECK(o[0] == 9.0);
  }
}

TEST_CASE("emit: a register of lanes all past a padded row loads nothing") {
  // out[r] = sum over k < 6 of x[k], guarded by k < 4 and 1 < r < 3 (a pad of x from 4 to 6,
  // rows 0 and 3 of zeros): 8 Float64 lanes on AVX2 are two registers, the second's constant
  // lanes all false. LLVM 19 made that register a plain load of x[4..7], past x (loom-fuzz,
  // program 500119 right after 500118, whose buffers left values there); each register's
  // mask is frozen now.
  const auto f64 = DType::Float64;
  auto out = global(0, f64), x = global(1, f64);
  auto r = make_range(4, 0), k = make_range(6, 1, AxisKind::Reduce);
  auto guard = land(k < 4, land(r < 3, i64(1) < r));
  const auto kernel = sink({end(store(index(out, r), reduce(Op::ADD, load(index(x, k, guard)), {k})), {r})});
  const Target& t = target_named("x86-64-v3");
  const UOpPtr opt =
      apply_opts(kernel, {{OptKind::Pad, 1, 8}, {OptKind::Upcast, 1, 4}, {OptKind::Unroll, 2, 2}}, t);
  const UOpPtr lowered =
      lower_numerics(split_vectors(lower_reduce(expand_lanes(opt), t.vector_bytes), t.vector_bytes));
  const std::string ir = emit_llvm_ir(lowered, "frozen_mask", EmitOptions{.target = t});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const JitLevel level : {JitLevel::Full, JitLevel::Light, JitLevel::Bulk}) {
    Aligned<double> o(4, -7.0), in(std::vector<double>{1, 2, 4, 8, nan, nan, nan, nan});
    run_all(Jit::instance().compile(ir, "frozen_mask", JitOptions{.level = level, .target = "x86-64-v3"}).fn,
            opt, {o, in});
    check_same(o.values(), {0.0, 0.0, 15.0, 0.0});
  }
}

TEST_CASE("emit: DEFINE_VARs come from vars[], in name order") {
  auto out = global(0, DType::Int64);
  auto n = make_var("n", 1, 8), v = make_var("v", 0, 100);
  auto i = UOp::make(Op::RANGE, DType::Int64, {n}, AxisArg{0, AxisKind::Loop});
  const auto kernel = sink({end(store(index(out, i), i * v), {i})});
  Aligned<int64_t> o(8, -1);
  run_all(compile_kernel(kernel, "vars"), kernel, {o}, {5, 3});  // n = 5, v = 3
  check_same(o.values(), {0, 3, 6, 9, 12, -1, -1, -1});
}

TEST_CASE("emit: bool buffers hold bytes 0 and 1") {
  auto out = global(0, DType::Bool), a = global(1, DType::Bool), x = global(2, DType::Float32);
  auto i = make_range(4, 0);
  auto value = alu(Op::OR, {land(load(a, i), load(a, i + 1)), load(x, i) < const_float(DType::Float32, 0)});
  const auto kernel = sink({end(store(index(out, i), value), {i})});
  Aligned<uint8_t> o(4, 7), in_a(std::vector<uint8_t>{1, 1, 0, 1, 1});
  Aligned<float> in_x(std::vector<float>{1, 1, 1, -1});
  run_all(compile_kernel(kernel, "bools"), kernel, {o, in_a, in_x});
  check_same(o.values(), {1, 0, 0, 1});
}

// ---- reductions ----------------------------------------------------------------------------

namespace {
// out[0] = REDUCE(op, in[k]) over k < n, as a scalar kernel (a bare STORE).
template <class T>
T run_reduce(Op op, const std::vector<T>& values) {
  const DType dt = dtype_of<T>();
  auto out = global(0, dt), in = global(1, dt);
  auto k = make_range(static_cast<int64_t>(values.size()), 0, AxisKind::Reduce);
  const auto kernel = sink({store(index(out, i64(0)), reduce(op, load(in, k), {k}))});
  Aligned<T> o(1, T{42}), in_buf(values.empty() ? std::vector<T>{T{}} : values);
  run_all(compile_kernel(kernel, fmt::format("reduce_{}_{}", op_name(op), to_string(dt))), kernel,
          {o, in_buf});
  return o[0];
}
}  // namespace

TEST_CASE("emit: REDUCE ADD, MUL and MAX, with NaN propagating through MAX") {
  CHECK(run_reduce<float>(Op::ADD, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) == 55.0f);
  CHECK(run_reduce<float>(Op::MUL, {1, 2, 3, 4}) == 24.0f);
  CHECK(run_reduce<float>(Op::MAX, {-5, -2, -9}) == -2.0f);
  CHECK(std::isnan(run_reduce<float>(Op::MAX, {1, static_cast<float>(kNaN), 3})));
  CHECK(std::isnan(run_reduce<double>(Op::MAX, {kNaN, 1, 3})));
  CHECK(run_reduce<int32_t>(Op::MAX, {-5, -2, -9}) == -2);       // identity is INT32_MIN, not 0
  CHECK(run_reduce<int32_t>(Op::ADD, {kI32Max, 1}) == kI32Min);  // wraps
  CHECK(run_reduce<uint8_t>(Op::MAX, {3, 250, 7}) == 250);       // unsigned
  CHECK(run_reduce<int64_t>(Op::MUL, {-3, 5}) == -15);
}

TEST_CASE("emit: REDUCE over an empty range gives the identity") {
  CHECK(run_reduce<float>(Op::ADD, {}) == 0.0f);
  CHECK(run_reduce<float>(Op::MUL, {}) == 1.0f);
  CHECK(run_reduce<float>(Op::MAX, {}) == -std::numeric_limits<float>::infinity());
  CHECK(run_reduce<int32_t>(Op::MAX, {}) == kI32Min);
}

TEST_CASE("emit: matrix-vector product, a REDUCE nested in the parallel output loop") {
  const auto f32 = DType::Float32;
  auto out = global(0, f32), a = global(1, f32), x = global(2, f32);
  auto i = make_range(3, 0), k = make_range(4, 1, AxisKind::Reduce);
  auto dot = reduce(Op::ADD, load(a, i * 4 + k) * load(x, k), {k});
  const auto kernel = optimize_kernel(sink({end(store(index(out, i), dot), {i})}));
  std::vector<float> matrix(12);
  for (size_t e = 0; e < 12; ++e) matrix[e] = static_cast<float>(e + 1);  // A[i][k] = 4i + k + 1
  Aligned<float> o(3), in_a(matrix), in_x(std::vector<float>{1, 0, -1, 2});
  run_all(compile_kernel(kernel, "matvec"), kernel, {o, in_a, in_x});
  check_same(o.values(), {6.0f, 14.0f, 22.0f});  // (4i+1) - (4i+3) + 2(4i+4) = 8i + 6
}

TEST_CASE("emit: reductions hoisted out of inner loops still give each row its value") {
  const auto f32 = DType::Float32;
  auto out = global(0, f32), a = global(1, f32), b = global(2, f32);
  auto i = make_range(2, 0), j = make_range(3, 1), k = make_range(3, 2, AxisKind::Reduce);
  auto rowsum = reduce(Op::ADD, load(a, i * 3 + k), {k});  // per row i
  auto peak = reduce(Op::MAX, load(b, k), {k});            // once
  const auto kernel = sink({end(store(index(out, i * 3 + j), rowsum * peak + load(b, j)), {i, j})});
  Aligned<float> o(6), in_a(std::vector<float>{1, 2, 3, 10, 20, 30}), in_b(std::vector<float>{1, 4, 2});
  run_all(compile_kernel(kernel, "hoisted_reduce"), kernel, {o, in_a, in_b});
  check_same(o.values(), {25.0f, 28.0f, 26.0f, 241.0f, 244.0f, 242.0f});  // rowsum 6, 60; peak 4
}

// ---- integer ALU ---------------------------------------------------------------------------

TEST_CASE("emit: Int32 arithmetic wraps at 32 bits") {
  check_same(run_binary<int32_t>(Op::ADD, {kI32Max, -5}, {1, 3}), {kI32Min, -2});
  check_same(run_binary<int32_t>(Op::SUB, {kI32Min, 5}, {1, 7}), {kI32Max, -2});
  check_same(run_binary<int32_t>(Op::MUL, {65536, -3}, {65536, 7}), {0, -21});
  check_same(run_unary<int32_t>(Op::NEG, {kI32Min, 5}), {kI32Min, -5});
  check_same(run_binary<int32_t>(Op::MAX, {-3, 5}, {-7, 2}), {-3, 5});
}

TEST_CASE("emit: IDIV and MOD truncate, and give 0 (never trap) by zero and INT_MIN / -1") {
  const std::vector<int32_t> a = {7, 7, -7, -7, 5, kI32Min, kI32Min, 0, -5};
  const std::vector<int32_t> b = {2, -2, 2, -2, 0, -1, 1, 3, 0};
  check_same(run_binary<int32_t>(Op::IDIV, a, b), {3, -3, -3, 3, 0, kI32Min, kI32Min, 0, 0});
  check_same(run_binary<int32_t>(Op::MOD, a, b), {1, 1, -1, -1, 0, 0, 0, 0, 0});
  check_same(run_binary<int64_t>(Op::IDIV, {kI64Min, 9, -9}, {-1, 0, 4}), {kI64Min, 0, -2});
  check_same(run_binary<int64_t>(Op::MOD, {kI64Min, 9, -9}, {-1, 0, 4}), {0, 0, -1});
}

TEST_CASE("emit: UInt8 is unsigned: division, comparison, max and shifts") {
  check_same(run_binary<uint8_t>(Op::ADD, {250, 1}, {10, 2}), {4, 3});
  check_same(run_binary<uint8_t>(Op::IDIV, {200, 255, 7}, {3, 0, 2}), {66, 0, 3});
  check_same(run_binary<uint8_t>(Op::MOD, {200, 255, 7}, {3, 0, 2}), {2, 0, 1});
  check_same(run_binary<uint8_t, bool>(Op::CMPLT, {200, 1, 5}, {100, 2, 5}), {false, true, false});
  check_same(run_binary<uint8_t>(Op::MAX, {200, 3}, {100, 4}), {200, 4});
  check_same(run_binary<uint8_t>(Op::SHR, {200, 200, 200}, {1, 8, 255}), {100, 0, 0});  // logical
  check_same(run_binary<uint8_t>(Op::SHL, {200, 1}, {1, 8}), {144, 0});
}

TEST_CASE("emit: shifts by a count outside [0, bits) give 0, or -1 for a negative value shifted right") {
  check_same(run_binary<int32_t>(Op::SHL, {1, 1, 1, 3}, {31, 32, -1, 2}), {kI32Min, 0, 0, 12});
  check_same(run_binary<int32_t>(Op::SHR, {-8, -8, 8, -8, 64}, {1, 40, 40, -1, 3}), {-4, -1, 0, -1, 8});
  check_same(run_binary<int64_t>(Op::SHL, {1, 1}, {63, 64}), {kI64Min, 0});
}

TEST_CASE("emit: bitwise ops and comparisons on integers and bools") {
  check_same(run_binary<int32_t>(Op::AND, {12}, {10}), {8});
  check_same(run_binary<int32_t>(Op::OR, {12}, {10}), {14});
  check_same(run_binary<int32_t>(Op::XOR, {12}, {10}), {6});
  check_same(run_binary<int64_t, bool>(Op::CMPLT, {-1, 3, 3}, {0, 3, 2}), {true, false, false});
  check_same(run_binary<int32_t, bool>(Op::CMPEQ, {-1, 3}, {-1, 4}), {true, false});
  check_same(run_binary<int32_t, bool>(Op::CMPNE, {-1, 3}, {-1, 4}), {false, true});
  check_same(run_binary<bool>(Op::CMPLT, {false, true, false}, {true, false, false}), {true, false, false});
  check_same(run_binary<bool>(Op::MAX, {false, true, false}, {true, false, false}), {true, true, false});
  check_same(run_binary<bool>(Op::XOR, {true, true}, {true, false}), {false, true});
  check_same(run_binary<bool>(Op::ADD, {true, true}, {true, false}), {false, true});  // wraps at 1 bit
}

// ---- float ALU -----------------------------------------------------------------------------

TEST_CASE("emit: float MAX propagates NaN and orders -0 below +0") {
  const float nan = static_cast<float>(kNaN);
  check_same(run_binary<float>(Op::MAX, {1, nan, 2, -0.0f, 0.0f}, {nan, 1, 3, 0.0f, -0.0f}),
             {nan, nan, 3, 0.0f, 0.0f});
  check_same(run_binary<double>(Op::MAX, {kNaN, -1}, {1, -2}), {kNaN, -1});
}

TEST_CASE("emit: Float32 MAX by vrangeps and vfixupimmps gives the selects' bits, at every width") {
  // Left unlowered for a Target with exact_float_max, MAX is three AVX-512 instructions.
  // Every pair of a set of specials (quiet and signalling NaNs of both signs, infinities,
  // both zeros, subnormals), both ways round, at 1 to 32 lanes: the same bits as
  // numeric_lowering's selects (b if b is NaN, else a if a is NaN, else the larger, +0
  // above -0), NaN payloads included.
  const std::vector<uint32_t> specials{0x7fc00000, 0xffc00000, 0x7fc12345, 0x7f800001, 0xff800001,
                                       0x7f800000, 0xff800000, 0x00000000, 0x80000000, 0x3f800000,
                                       0xbf800000, 0x00000001, 0x80000001, 0x7f7fffff, 0x40490fdb};
  std::vector<float> as, bs;
  for (const uint32_t a : specials)
    for (const uint32_t b : specials)
      as.push_back(std::bit_cast<float>(a)), bs.push_back(std::bit_cast<float>(b));
  auto want = [](float a, float b) {
    if (std::isnan(b)) return b;
    if (std::isnan(a)) return a;
    if (a == b) return std::signbit(a) ? b : a;
    return a < b ? b : a;
  };
  const Target& t = target_named("x86-64-v4");
  REQUIRE(t.exact_float_max());
  const auto f32 = DType::Float32;
  const auto count = static_cast<int64_t>(as.size());
  for (const int64_t lanes : {1, 2, 4, 6, 8, 16, 32}) {
    INFO(lanes << " lanes");
    const int64_t rows = (count + lanes - 1) / lanes;
    auto out = global(0, f32), a = global(1, f32), b = global(2, f32);
    auto r = make_range(rows, 0), l = make_range(lanes, 1);
    const auto at = r * i64(lanes) + l;
    const auto in = at < i64(count);
    const auto kernel = sink({end(
        store(index(out, at, in), alu(Op::MAX, {load(index(a, at, in)), load(index(b, at, in))})), {r, l})});
    const UOpPtr opt = lanes > 1 ? apply_opts(kernel, {{OptKind::Upcast, 1, lanes}}, t) : kernel;
    const UOpPtr lowered = lower_numerics(
        split_vectors(lower_reduce(expand_lanes(opt), t.vector_bytes), t.vector_bytes), t.exact_float_max());
    int maxes = 0;
    for (const auto& u : toposort(lowered)) maxes += u->op == Op::MAX;
    CHECK(maxes > 0);  // left for the emitter
    const std::string name = fmt::format("vrange_{}", lanes);
    const JitResult compiled =
        Jit::instance().compile(emit_llvm_ir(lowered, name, EmitOptions{.target = t}), name,
                                JitOptions{.keep_assembly = true, .target = "x86-64-v4"});
    CHECK(compiled.assembly.find("vrangeps") != std::string::npos);
    CHECK(compiled.assembly.find("vfixupimmps") != std::string::npos);
    if (!loom::test::host_runs(t)) continue;
    Aligned<float> got(static_cast<size_t>(rows * lanes)), in_a(as), in_b(bs);
    run_all(compiled.fn, opt, {got, in_a, in_b});
    for (size_t i = 0; i < as.size(); ++i) {
      INFO("max(" << std::hex << std::bit_cast<uint32_t>(as[i]) << ", " << std::bit_cast<uint32_t>(bs[i])
                  << ")");
      CHECK(std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want(as[i], bs[i])));
    }
  }
}

TEST_CASE("emit: float comparisons: CMPLT and CMPEQ ordered, CMPNE unordered") {
  const float nan = static_cast<float>(kNaN);
  check_same(run_binary<float, bool>(Op::CMPLT, {1, nan, 2, 1}, {2, 1, nan, 1}), {true, false, false, false});
  check_same(run_binary<float, bool>(Op::CMPEQ, {1, nan, 1}, {1, nan, 2}), {true, false, false});
  check_same(run_binary<float, bool>(Op::CMPNE, {1, nan, 1}, {1, nan, 2}), {false, true, true});
}

TEST_CASE("emit: IEEE float arithmetic and the float-only unary ops") {
  const float inf = static_cast<float>(kInf), nan = static_cast<float>(kNaN);
  check_same(run_binary<float>(Op::FDIV, {1, -1, 0, 1}, {0, 0, 0, 4}), {inf, -inf, nan, 0.25f});
  check_same(run_binary<double>(Op::SUB, {0.3}, {0.1}), {0.3 - 0.1});
  check_same(run_unary<float>(Op::SQRT, {4, -1, 2}), {2, nan, std::sqrt(2.0f)});
  check_same(run_unary<float>(Op::RECIP, {4, 0, -0.0f}), {0.25f, inf, -inf});
  check_same(run_unary<float>(Op::TRUNC, {2.7f, -2.7f, -0.5f}), {2, -2, -0.0f});
  check_same(run_unary<double>(Op::NEG, {1, 0}), {-1, -0.0});
  check_same(run_unary<float>(Op::EXP2, {3, -1, -inf}), {8, 0.5f, 0});
  check_same(run_unary<float>(Op::EXP, {0, -inf, inf}), {1, 0, inf});
  check_same(run_unary<double>(Op::EXP, {0, -kInf, 1}), {1, 0, std::exp(1.0)});
  check_same(run_unary<double>(Op::LOG2, {8, 0, -1}), {3, -kInf, kNaN});
  const auto sines = run_unary<float>(Op::SIN, {0.5f, 0});
  CHECK(sines[0] == doctest::Approx(std::sin(0.5)).epsilon(1e-6));
  CHECK(sines[1] == 0.0f);
  const auto cosines = run_unary<double>(Op::COS, {0.5, 0});  // Float64 COS is llvm.cos
  CHECK(cosines[0] == doctest::Approx(std::cos(0.5)).epsilon(1e-15));
  CHECK(cosines[1] == 1.0);
  const auto powers = run_binary<float>(Op::POW, {2, 9, 2}, {10, 0.5f, -1});
  CHECK(powers[0] == doctest::Approx(1024).epsilon(1e-6));
  CHECK(powers[1] == doctest::Approx(3).epsilon(1e-6));
  CHECK(powers[2] == doctest::Approx(0.5).epsilon(1e-6));
}

TEST_CASE("emit: LDEXP scales by 2^n rounding once, with vscalefps on AVX-512 and the same bits without") {
  // x * 2^n against std::ldexp: normal results, subnormal ones that round (n = -140 moves
  // 1.75 past the last subnormal bit), overflow to inf, zeros, inf and NaN through; over
  // lane counts that fill a register, part of one, and more than one.
  const float inf = static_cast<float>(kInf), nan = static_cast<float>(kNaN);
  std::vector<float> xs, ns;
  for (const float x : {1.0f, -1.5f, 1.75f, 0.7071f, 1.4142135f, 0.0f, -0.0f, 3.0e-39f, inf, -inf, nan})
    for (const float n : {0.0f, 1.0f, -1.0f, 127.0f, 128.0f, -126.0f, -127.0f, -140.0f, -149.0f, -150.0f,
                          -152.0f, 129.0f, 200.0f, -252.0f, 254.0f}) {
      xs.push_back(x);
      ns.push_back(n);
    }
  const auto count = static_cast<int64_t>(xs.size());  // 165: no lane count divides it
  const auto f32 = DType::Float32;
  auto out = global(0, f32), x = global(1, f32), n = global(2, f32);
  for (const int64_t lanes : {1, 4, 6, 8, 16, 32}) {
    const int64_t rows = (count + lanes - 1) / lanes;
    auto r = make_range(rows, 0), l = make_range(lanes, 1);
    const auto at = r * i64(lanes) + l;
    const auto in = at < i64(count);
    const auto kernel =
        sink({end(store(index(out, at, in), alu(Op::LDEXP, {load(index(x, at, in)), load(index(n, at, in))})),
                  {r, l})});
    for (const std::string target : {"x86-64-v3", "x86-64-v4"}) {
      INFO(lanes << " lanes, " << target);
      const Target& t = target_named(target);
      const UOpPtr opt = lanes > 1 ? apply_opts(kernel, {{OptKind::Upcast, 1, lanes}}, t) : kernel;
      const JitResult compiled = compile_kernel_for(opt, fmt::format("ldexp_{}", lanes), target, true);
      CHECK((compiled.assembly.find("vscalefps") != std::string::npos) == (target == "x86-64-v4"));
      if (!loom::test::host_runs(t)) continue;
      Aligned<float> got(static_cast<size_t>(rows * lanes)), in_x(xs), in_n(ns);
      run_all(compiled.fn, opt, {got, in_x, in_n});
      for (size_t i = 0; i < xs.size(); ++i) {
        const float want = std::ldexp(xs[i], static_cast<int>(ns[i]));
        INFO("ldexp(" << xs[i] << ", " << ns[i] << ") = " << want << ", got " << got[i]);
        if (std::isnan(want))
          CHECK(std::isnan(got[i]));
        else
          CHECK(std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want));
      }
    }
  }
}

TEST_CASE("emit: WHERE and MULACC") {
  const auto f32 = DType::Float32;
  auto out = global(0, f32), a = global(1, f32), b = global(2, f32), c = global(3, f32);
  auto i = make_range(3, 0);
  auto x = load(a, i), y = load(b, i), z = load(c, i);
  auto value = where(x < y, alu(Op::MULACC, {x, y, z}), z);
  const auto kernel = sink({end(store(index(out, i), value), {i})});
  Aligned<float> o(3), in_a(std::vector<float>{2, 5, 1}), in_b(std::vector<float>{3, 4, 1}),
      in_c(std::vector<float>{4, -1, 7});
  run_all(compile_kernel(kernel, "where_mulacc"), kernel, {o, in_a, in_b, in_c});
  check_same(o.values(), {10.0f, -1.0f, 7.0f});
}

// ---- casts ---------------------------------------------------------------------------------

namespace {

// One element of any dtype: integers and bools in `i`, floats in `f`.
struct Val {
  int64_t i = 0;
  double f = 0;
};
Val I(int64_t v) { return {v, 0}; }
Val F(double v) { return {0, v}; }

void put(DType dt, std::byte* p, Val v) {
  switch (dt.scalar) {
    case Scalar::Bool: *reinterpret_cast<uint8_t*>(p) = v.i != 0; break;
    case Scalar::UInt8: *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(v.i); break;
    case Scalar::Int32: *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(v.i); break;
    case Scalar::Int64: *reinterpret_cast<int64_t*>(p) = v.i; break;
    case Scalar::Float32: *reinterpret_cast<float*>(p) = static_cast<float>(v.f); break;
    case Scalar::Float64: *reinterpret_cast<double*>(p) = v.f; break;
  }
}

Val get(DType dt, const std::byte* p) {
  switch (dt.scalar) {
    case Scalar::Bool:
    case Scalar::UInt8: return I(*reinterpret_cast<const uint8_t*>(p));
    case Scalar::Int32: return I(*reinterpret_cast<const int32_t*>(p));
    case Scalar::Int64: return I(*reinterpret_cast<const int64_t*>(p));
    case Scalar::Float32: return F(*reinterpret_cast<const float*>(p));
    case Scalar::Float64: return F(*reinterpret_cast<const double*>(p));
  }
  return {};
}

// out[i] = op(in[i]) (op = CAST or BITCAST) for each (input, expected) pair.
void check_conversion(Op op, DType from, DType to, const std::vector<std::pair<Val, Val>>& cases) {
  auto out = global(0, to), in = global(1, from);
  auto i = make_range(static_cast<int64_t>(cases.size()), 0);
  const auto kernel = sink({end(store(index(out, i), UOp::make(op, to, {load(in, i)})), {i})});
  Aligned<int64_t> o(cases.size()), src(cases.size());  // 8 bytes per element is room for any dtype
  auto* out_bytes = reinterpret_cast<std::byte*>(o.data());
  auto* in_bytes = reinterpret_cast<std::byte*>(src.data());
  for (size_t k = 0; k < cases.size(); ++k) put(from, in_bytes + k * from.itemsize(), cases[k].first);
  run_all(compile_kernel(kernel, fmt::format("{}_{}_{}", op_name(op), to_string(from), to_string(to))),
          kernel, {o, src});
  for (size_t k = 0; k < cases.size(); ++k) {
    const Val got = get(to, out_bytes + k * to.itemsize()), want = cases[k].second;
    INFO(op_name(op) << " " << to_string(from) << " -> " << to_string(to) << ", case " << k << ": got "
                     << (to.is_float() ? got.f : static_cast<double>(got.i)));
    if (!to.is_float())
      CHECK(got.i == want.i);
    else if (std::isnan(want.f))
      CHECK(std::isnan(got.f));
    else
      CHECK((got.f == want.f && std::signbit(got.f) == std::signbit(want.f)));
  }
}

}  // namespace

TEST_CASE("emit: CAST from floats truncates toward zero, saturates, and sends NaN to 0 (bool: true)") {
  const auto f32 = DType::Float32, f64 = DType::Float64;
  check_conversion(Op::CAST, f32, DType::Int32,
                   {{F(2.9), I(2)},
                    {F(-2.9), I(-2)},
                    {F(3e9), I(kI32Max)},
                    {F(-3e9), I(kI32Min)},
                    {F(kNaN), I(0)},
                    {F(kInf), I(kI32Max)}});
  check_conversion(Op::CAST, f32, DType::Int64,
                   {{F(1e19), I(kI64Max)}, {F(-1e19), I(kI64Min)}, {F(kNaN), I(0)}, {F(-7.5), I(-7)}});
  check_conversion(Op::CAST, f32, DType::UInt8,
                   {{F(300.7), I(255)}, {F(-1.5), I(0)}, {F(200.9), I(200)}, {F(kNaN), I(0)}});
  check_conversion(Op::CAST, f32, DType::Bool,
                   {{F(0), I(0)}, {F(-0.0), I(0)}, {F(kNaN), I(1)}, {F(0.5), I(1)}});
  check_conversion(Op::CAST, f32, f64, {{F(0.1), F(static_cast<double>(0.1f))}, {F(-kInf), F(-kInf)}});
  check_conversion(Op::CAST, f64, f32,
                   {{F(0.1), F(static_cast<double>(0.1f))}, {F(1e300), F(kInf)}, {F(kNaN), F(kNaN)}});
  check_conversion(Op::CAST, f64, DType::Int32,
                   {{F(2147483647.9), I(kI32Max)}, {F(-2147483648.9), I(kI32Min)}, {F(1e300), I(kI32Max)}});
  check_conversion(Op::CAST, f64, DType::Int64,
                   {{F(9.3e18), I(kI64Max)}, {F(-9.3e18), I(kI64Min)}, {F(123.99), I(123)}, {F(kNaN), I(0)}});
  check_conversion(Op::CAST, f64, DType::UInt8, {{F(255.5), I(255)}, {F(256), I(255)}, {F(-0.5), I(0)}});
  check_conversion(Op::CAST, f64, DType::Bool, {{F(kNaN), I(1)}, {F(0), I(0)}, {F(-3), I(1)}});
}

TEST_CASE("emit: CAST between integers wraps when narrowing and extends by the source's signedness") {
  check_conversion(Op::CAST, DType::Int32, DType::Int64, {{I(-1), I(-1)}, {I(kI32Min), I(kI32Min)}});
  check_conversion(Op::CAST, DType::Int32, DType::UInt8, {{I(-1), I(255)}, {I(256), I(0)}, {I(300), I(44)}});
  check_conversion(Op::CAST, DType::Int32, DType::Bool, {{I(0), I(0)}, {I(-5), I(1)}, {I(256), I(1)}});
  check_conversion(Op::CAST, DType::Int64, DType::Int32,
                   {{I(0x100000005), I(5)}, {I(-1), I(-1)}, {I(0x80000000), I(kI32Min)}});
  check_conversion(Op::CAST, DType::Int64, DType::UInt8, {{I(511), I(255)}, {I(-256), I(0)}});
  check_conversion(Op::CAST, DType::Int64, DType::Bool,
                   {{I(0x100000000), I(1)}, {I(0), I(0)}});  // != 0, not a truncation
  check_conversion(Op::CAST, DType::UInt8, DType::Int32, {{I(255), I(255)}, {I(128), I(128)}});
  check_conversion(Op::CAST, DType::UInt8, DType::Int64, {{I(200), I(200)}});
  check_conversion(Op::CAST, DType::UInt8, DType::Bool, {{I(0), I(0)}, {I(2), I(1)}});
  check_conversion(Op::CAST, DType::Bool, DType::Int32, {{I(1), I(1)}, {I(0), I(0)}});
  check_conversion(Op::CAST, DType::Bool, DType::Int64, {{I(1), I(1)}});
  check_conversion(Op::CAST, DType::Bool, DType::UInt8, {{I(1), I(1)}, {I(0), I(0)}});
}

TEST_CASE("emit: CAST from integers to floats rounds once to nearest") {
  const auto f32 = DType::Float32, f64 = DType::Float64;
  const int64_t two53 = int64_t{1} << 53;
  check_conversion(Op::CAST, DType::Int32, f32, {{I(16777217), F(16777216)}, {I(-3), F(-3)}});
  check_conversion(Op::CAST, DType::Int32, f64, {{I(kI32Min), F(-2147483648.0)}});
  check_conversion(Op::CAST, DType::Int64, f32,
                   {{I(two53 + 1), F(static_cast<double>(two53))}, {I(-5), F(-5)}});
  check_conversion(Op::CAST, DType::Int64, f64,
                   {{I(two53 + 1), F(static_cast<double>(two53))}, {I(kI64Min), F(-9223372036854775808.0)}});
  check_conversion(Op::CAST, DType::UInt8, f32, {{I(255), F(255)}});
  check_conversion(Op::CAST, DType::UInt8, f64, {{I(128), F(128)}});
  check_conversion(Op::CAST, DType::Bool, f32, {{I(1), F(1)}, {I(0), F(0)}});
  check_conversion(Op::CAST, DType::Bool, f64, {{I(0), F(0)}});
}

TEST_CASE("emit: BITCAST reinterprets the bits") {
  check_conversion(Op::BITCAST, DType::Float32, DType::Int32,
                   {{F(1.0), I(0x3f800000)}, {F(-0.0), I(kI32Min)}});
  check_conversion(Op::BITCAST, DType::Int32, DType::Float32,
                   {{I(0x40490fdb), F(static_cast<double>(3.14159274101257324f))}});
  check_conversion(Op::BITCAST, DType::Float64, DType::Int64, {{F(1.0), I(0x3ff0000000000000)}});
  check_conversion(Op::BITCAST, DType::Int64, DType::Float64, {{I(0x4000000000000000), F(2.0)}});
}

// ---- what LLVM makes of it, and errors --------------------------------------------------------

TEST_CASE("emit: an elementwise loop vectorises with no run-time overlap check") {
  const auto f32 = DType::Float32;
  auto out = global(0, f32), a = global(1, f32), b = global(2, f32);
  auto i = make_range(1024, 0);
  const auto kernel = optimize_kernel(sink({end(store(index(out, i), load(a, i) + load(b, i)), {i})}));
  const std::string ir = emit_llvm_ir(kernel, "vector_add");
  CHECK(ir.find("define void @vector_add(ptr") != std::string::npos);
  CHECK(ir.find("!alias.scope") != std::string::npos);  // distinct slots are distinct buffers
  const auto compiled = Jit::instance().compile(ir, "vector_add", JitOptions{.keep_optimized_ir = true});
  CHECK(compiled.optimized_ir.find(" x float>") != std::string::npos);
  CHECK(compiled.optimized_ir.find("vector.memcheck") == std::string::npos);
  std::vector<float> xs(1024), ys(1024), sums(1024);
  for (size_t k = 0; k < 1024; ++k)
    xs[k] = static_cast<float>(k), ys[k] = 0.5f, sums[k] = static_cast<float>(k) + 0.5f;
  Aligned<float> o(1024), in_a(xs), in_b(ys);
  run_all(compiled.fn, kernel, {o, in_a, in_b});
  check_same(o.values(), sums);
}

TEST_CASE("emit: an emitted function LLVM rejects is an error naming the kernel; the next one works") {
  auto out = global(0, DType::Int32);
  const auto kernel = sink({store(index(out, i64(0)), const_int(DType::Int32, 5))});
  codegen_testing_break_next_kernel();
  CHECK_THROWS_WITH_AS(emit_llvm_ir(kernel, "broken_kernel"),
                       doctest::Contains("kernel 'broken_kernel': LLVM rejected the emitted function"),
                       Error);
  Aligned<int32_t> o(1);
  run_all(compile_kernel(kernel, "after_broken"), kernel, {o});
  CHECK(o[0] == 5);
}

TEST_CASE("emit: ops outside the contract are errors naming the kernel, the op and the dtypes") {
  auto out = global(0, DType::Int32), in = global(1, DType::Int32);
  auto i = make_range(4, 0);
  auto x = load(in, i);
  SUBCASE("FDIV on integers") {
    const auto kernel = sink({end(store(index(out, i), alu(Op::FDIV, {x, x})), {i})});
    CHECK_THROWS_WITH_AS(emit_llvm_ir(kernel, "k_fdiv"),
                         doctest::Contains("kernel 'k_fdiv': FDIV is not defined on i32 operands"), Error);
  }
  SUBCASE("mixed operand dtypes cannot even be built: UOp::make refuses them") {
    CHECK_THROWS_WITH_AS(UOp::make(Op::ADD, DType::Int32, {x, const_int(DType::Int64, 1)}),
                         "UOp::make: ADD i32: source 1 is i64, expected Int32", Error);
  }
  SUBCASE("a float-only op on integers") {
    const auto kernel = sink({end(store(index(out, i), alu(Op::SQRT, {x})), {i})});
    CHECK_THROWS_WITH_AS(emit_llvm_ir(kernel, "k_sqrt"), doctest::Contains("SQRT i32: this op needs a float"),
                         Error);
  }
  SUBCASE("a store of the wrong dtype") {
    const auto kernel = sink({end(store(index(out, i), cast(x, DType::Float32)), {i})});
    CHECK_THROWS_WITH_AS(emit_llvm_ir(kernel, "k_store"), doctest::Contains("kernel 'k_store': STORE f32"),
                         Error);
  }
}

// ---- LOOM_CHECK_BOUNDS ---------------------------------------------------------------------

namespace {
// out[store_at] = LOAD(load_from) over `range`, both buffers of 4 Int32 elements (in
// is slot 1), compiled with bounds checks; returns the kernel's status and what it
// wrote (out starts at -1).
std::pair<int32_t, std::vector<int32_t>> run_checked(const std::string& name, const UOpPtr& store_at,
                                                     const UOpPtr& load_from, const UOpPtr& range) {
  auto out = global(0, DType::Int32);
  const auto kernel = sink({end(store(index(out, store_at), kb::load(load_from)), {range})});
  const std::string ir = emit_llvm_ir(kernel, name, EmitOptions{.check_bounds = true});
  CHECK(ir.find(fmt::format("define i32 @{}(", name)) != std::string::npos);
  const auto fn = as_checked(Jit::instance().compile(ir, name).fn);
  Aligned<int32_t> o(4, -1), input(std::vector<int32_t>{10, 11, 12, 13});
  void* const bufs[] = {o.data(), input.data()};
  const int64_t sizes[] = {4, 4};  // no variables: vars holds the slots' element counts
  const int32_t status = fn(bufs, sizes, 0, 1);
  return {status, o.values()};
}
}  // namespace

TEST_CASE("emit: LOOM_CHECK_BOUNDS stops at the first index outside its buffer and returns 1 + its slot") {
  auto i = make_range(4, 0);
  auto in = global(1, DType::Int32);
  using V = std::vector<int32_t>;
  SUBCASE("every index inside: status 0 and the copy") {
    CHECK(run_checked("inside", i, index(in, i), i) == std::pair{0, V{10, 11, 12, 13}});
  }
  SUBCASE("a load one past the end: stopped at i = 3, before its load and store") {
    CHECK(run_checked("load_past_end", i, index(in, i + 1), i) == std::pair{2, V{11, 12, 13, -1}});
  }
  SUBCASE("a negative load index: stopped at once") {
    CHECK(run_checked("load_negative", i, index(in, i - 1), i) == std::pair{2, V{-1, -1, -1, -1}});
  }
  SUBCASE("a store past the end: slot 0") {
    CHECK(run_checked("store_past_end", i + 1, index(in, i), i) == std::pair{1, V{-1, 10, 11, 12}});
  }
  SUBCASE("a masked-off index is never checked: it is never accessed") {
    CHECK(run_checked("masked", i, index(in, i + 1, i + 1 < 4), i) == std::pair{0, V{11, 12, 13, 0}});
  }
}

TEST_CASE("emit: a store of a vector wider than a register streams where each register's piece is aligned") {
  // Rows 1040 floats apart (row_padding's layout): a row starts 64-byte aligned but not at a
  // multiple of 64 floats. An f32x64 store (4 zmm) claims 64-byte alignment, which holds, so
  // it streams past the threshold like a store into rows 1024 apart; rows 1028 apart would not.
  const auto f32 = DType::Float32;
  const Target& t = target_named("x86-64-v4");
  for (const int64_t row : {1024, 1040, 1028}) {
    INFO("row stride " << row);
    auto out = global(0, f32), a = global(1, f32);
    auto i = make_range(8, 0), j = make_range(16, 1), l = make_range(64, 2);
    const UOpPtr at = i * row + j * 64 + l;
    const auto kernel = sink({end(store(index(out, at), load(a, at) * 2.0f), {i, j, l})});
    const UOpPtr opt = apply_opts(kernel, {{OptKind::Upcast, 2, 64}}, t);
    const UOpPtr lowered =
        lower_numerics(split_vectors(lower_reduce(expand_lanes(opt), t.vector_bytes), t.vector_bytes));
    const std::string ir =
        emit_llvm_ir(lowered, "wide_store", EmitOptions{.streaming_store_bytes = 1, .target = t});
    CHECK((ir.find("!nontemporal") != std::string::npos) == (row % 16 == 0));
  }
}
