#pragma once
// Helpers for codegen tests: kernel AST builders, 64-byte aligned buffers (as
// the ABI promises), and kernels compiled by the emitter and the JIT, each run
// checked against the kernel-IR interpreter as well as the test's own values.
#include "codegen/codegen.hpp"
#include "codegen/numeric_lowering.hpp"
#include "runtime/jit.hpp"
#include "support/kernel_builders.hpp"
#include "support/kernel_interpreter.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace loom::test {

// Kernel AST builders (docs/kernel-ir.md shapes), shared with the interpreter's tests.
using namespace loom::kb;
using loom::kb::load;
inline UOpPtr load(const UOpPtr& buf, const UOpPtr& idx) { return kb::load(kb::index(buf, idx)); }

// A 64-byte aligned block of `count` elements of T (at least one cache line).
template <class T>
class Aligned {
 public:
  explicit Aligned(size_t count, T fill = T{})
      : count_(count), data_(static_cast<T*>(std::aligned_alloc(64, bytes(count))), &std::free) {
    for (size_t i = 0; i < count; ++i) data_.get()[i] = fill;
  }
  explicit Aligned(const std::vector<T>& values) : Aligned(values.size()) {
    for (size_t i = 0; i < values.size(); ++i) data_.get()[i] = values[i];  // also from vector<bool>
  }
  T* data() const { return data_.get(); }
  size_t size() const { return count_; }
  T& operator[](size_t i) const { return data_.get()[i]; }
  std::vector<T> values() const { return std::vector<T>(data_.get(), data_.get() + count_); }

 private:
  static size_t bytes(size_t count) { return (count * sizeof(T) + 63) / 64 * 64 + 64; }
  size_t count_;
  std::unique_ptr<T, decltype(&std::free)> data_;
};

// Compiles `kernel` as it stands (no optimiser: the test chose its range kinds),
// after the lowering passes (lanes, REDUCE to accumulators, wide values in register
// slices, the numeric rules as UOps).
inline KernelFn compile_kernel(const UOpPtr& kernel, const std::string& name) {
  return Jit::instance()
      .compile(emit_llvm_ir(lower_numerics(split_vectors(lower_reduce(expand_lanes(kernel)))), name), name)
      .fn;
}

// The same for the LOOM_TARGET preset `target` named explicitly (emitter, vector
// width and JIT alike), whatever the flags say; `assembly` keeps the JIT's listing.
inline JitResult compile_kernel_for(const UOpPtr& kernel, const std::string& name, const std::string& target,
                                    bool assembly = false) {
  const Target& t = target_named(target);
  const UOpPtr lowered =
      lower_numerics(split_vectors(lower_reduce(expand_lanes(kernel), t.vector_bytes), t.vector_bytes));
  return Jit::instance().compile(emit_llvm_ir(lowered, name, EmitOptions{.target = t}), name,
                                 JitOptions{.keep_assembly = assembly, .target = target});
}

// One kernel argument: a buffer's memory and its size in bytes.
struct Slot {
  void* data;
  size_t bytes;
  Slot(void* d, size_t b) : data(d), bytes(b) {}
  template <class T>
  Slot(const Aligned<T>& buffer) : data(buffer.data()), bytes(buffer.size() * sizeof(T)) {}
};

namespace detail {

// Element types of the kernel's slots, from its DEFINE_GLOBALs.
inline std::map<int64_t, DType> slot_dtypes(const UOpPtr& kernel) {
  std::map<int64_t, DType> out;
  for (const auto& n : toposort(kernel))
    if (n->op == Op::DEFINE_GLOBAL) out.emplace(n->arg_int(), n->dtype.base());
  return out;
}

// libm's float functions may differ from the interpreter's double ones in the
// last place, and a float MULACC may be one fused multiply-add (the interpreter's
// rounds the product first).
inline bool rounds_differently(const UOpPtr& kernel) {
  for (const auto& n : toposort(kernel)) {
    if (n->op == Op::SIN || n->op == Op::COS || n->op == Op::POW || n->op == Op::EXP || n->op == Op::EXP2 ||
        n->op == Op::LOG2 || n->op == Op::TANH || n->op == Op::SIGMOID ||
        n->op == Op::ERF)
      return true;
    if ((n->op == Op::MULACC || n->op == Op::DOT2) && n->dtype.is_float()) return true;
  }
  return false;
}

template <class F>
void check_floats(const std::byte* got, const std::byte* want, size_t count, bool approx) {
  for (size_t i = 0; i < count; ++i) {
    F g, w;
    std::memcpy(&g, got + i * sizeof(F), sizeof(F));
    std::memcpy(&w, want + i * sizeof(F), sizeof(F));
    INFO("element " << i << ": compiled " << g << ", interpreter " << w);
    const F tolerance = sizeof(F) == 4 ? F(1e-6) : F(1e-14);
    const bool exact = g == w && std::signbit(g) == std::signbit(w);
    const bool close = approx && std::isfinite(w) && std::abs(g - w) <= tolerance * std::abs(w);
    if (std::isnan(w))
      CHECK(std::isnan(g));
    else
      CHECK((exact || close));
  }
}

// Compiled and interpreted buffers agree element by element: floats exactly
// (NaN matching NaN, -0 not matching +0), other types byte for byte.
inline void check_slot_matches(int64_t slot, DType dt, const std::byte* got, const std::byte* want,
                               size_t bytes, bool approx) {
  INFO("slot " << slot << " (" << to_string(dt) << ")");
  if (dt.scalar == Scalar::Float32) return check_floats<float>(got, want, bytes / 4, approx);
  if (dt.scalar == Scalar::Float64) return check_floats<double>(got, want, bytes / 8, approx);
  for (size_t i = 0; i < bytes; ++i) {
    INFO("byte " << i);
    CHECK(std::to_integer<int>(got[i]) == std::to_integer<int>(want[i]));
  }
}

}  // namespace detail

// Runs the compiled kernel on `slots` over [begin, end) of its parallel range,
// and the kernel-IR interpreter (the oracle) on copies of the same inputs, then
// checks every buffer came out the same.
inline void run_slice(KernelFn fn, const UOpPtr& kernel, const std::vector<Slot>& slots,
                      const std::vector<int64_t>& vars, int64_t begin, int64_t end) {
  std::vector<std::vector<std::byte>> copies;
  std::vector<void*> compiled_bufs, oracle_bufs;
  for (const Slot& s : slots) {
    const auto* bytes = static_cast<const std::byte*>(s.data);
    copies.emplace_back(bytes, bytes + s.bytes);
    compiled_bufs.push_back(s.data);
  }
  for (auto& c : copies) oracle_bufs.push_back(c.data());
  fn(compiled_bufs.data(), vars.data(), begin, end);
  interpret_kernel(kernel, oracle_bufs.data(), vars, begin, end);
  const auto dtypes = detail::slot_dtypes(kernel);
  const bool approx = detail::rounds_differently(kernel);
  for (size_t i = 0; i < slots.size(); ++i) {
    const auto it = dtypes.find(static_cast<int64_t>(i));
    detail::check_slot_matches(static_cast<int64_t>(i), it == dtypes.end() ? DType::UInt8 : it->second,
                               static_cast<const std::byte*>(slots[i].data), copies[i].data(), slots[i].bytes,
                               approx);
  }
}

// A kernel pass keeps the kernel's meaning: the interpreter runs `before` and
// `after` on copies of `slots` and every buffer comes out the same (floats
// within `rel` when the pass may reorder float sums, else bitwise).
inline void check_same_results(const UOpPtr& before, const UOpPtr& after, const std::vector<Slot>& slots,
                               bool reorders_floats = false, const std::vector<int64_t>& vars = {}) {
  std::vector<std::vector<std::byte>> a, b;
  std::vector<void*> pa, pb;
  for (const Slot& s : slots) {
    const auto* bytes = static_cast<const std::byte*>(s.data);
    a.emplace_back(bytes, bytes + s.bytes);
    b.emplace_back(bytes, bytes + s.bytes);
  }
  for (size_t i = 0; i < slots.size(); ++i) pa.push_back(a[i].data()), pb.push_back(b[i].data());
  interpret_kernel(before, pa.data(), vars);
  interpret_kernel(after, pb.data(), vars);
  const auto dtypes = detail::slot_dtypes(before);
  for (size_t i = 0; i < slots.size(); ++i) {
    const auto it = dtypes.find(static_cast<int64_t>(i));
    detail::check_slot_matches(static_cast<int64_t>(i), it == dtypes.end() ? DType::UInt8 : it->second,
                               b[i].data(), a[i].data(), slots[i].bytes, reorders_floats);
  }
}

// The whole parallel range, as the executor's only task would run it.
inline void run_all(KernelFn fn, const UOpPtr& kernel, const std::vector<Slot>& slots,
                    const std::vector<int64_t>& vars = {}) {
  run_slice(fn, kernel, slots, vars, 0, parallel_extent(kernel, vars));
}

}  // namespace loom::test
