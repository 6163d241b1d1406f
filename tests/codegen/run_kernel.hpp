#pragma once
// Helpers for codegen tests: 64-byte aligned buffers (as the ABI promises) and
// a kernel AST compiled by the emitter and the JIT.
#include "codegen/codegen.hpp"
#include "runtime/jit.hpp"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace loom::test {

// ---- kernel AST builders (docs/kernel-ir.md shapes) ----
inline UOpPtr global(int64_t slot, DType elem) {
  return UOp::make(Op::DEFINE_GLOBAL, elem.ptr_to(), {}, slot);
}
inline UOpPtr index(const UOpPtr& buf, const UOpPtr& idx) {
  return UOp::make(Op::INDEX, buf->dtype, {buf, idx});
}
inline UOpPtr index(const UOpPtr& buf, const UOpPtr& idx, const UOpPtr& valid) {
  return UOp::make(Op::INDEX, buf->dtype, {buf, idx, valid});
}
inline UOpPtr load(const UOpPtr& idx) { return UOp::make(Op::LOAD, idx->dtype.base(), {idx}); }
inline UOpPtr load(const UOpPtr& buf, const UOpPtr& idx) { return load(index(buf, idx)); }
inline UOpPtr store(const UOpPtr& idx, const UOpPtr& value) {
  return UOp::make(Op::STORE, value->dtype, {idx, value});
}
inline UOpPtr end(const UOpPtr& value, std::vector<UOpPtr> ranges) {
  ranges.insert(ranges.begin(), value);
  return UOp::make(Op::END, value->dtype, std::move(ranges));
}
inline UOpPtr reduce(Op op, const UOpPtr& value, std::vector<UOpPtr> ranges) {
  ranges.insert(ranges.begin(), value);
  return UOp::make(Op::REDUCE, value->dtype, std::move(ranges), ReduceArg{op, {}});
}
inline UOpPtr sink(std::vector<UOpPtr> effects) {
  return UOp::make(Op::SINK, DType::Int64, std::move(effects));
}
inline UOpPtr i64(int64_t v) { return const_int(DType::Int64, v); }

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
  T& operator[](size_t i) const { return data_.get()[i]; }
  std::vector<T> values() const { return std::vector<T>(data_.get(), data_.get() + count_); }

 private:
  static size_t bytes(size_t count) { return (count * sizeof(T) + 63) / 64 * 64 + 64; }
  size_t count_;
  std::unique_ptr<T, decltype(&std::free)> data_;
};

inline KernelFn compile_kernel(const UOpPtr& kernel, const std::string& name) {
  return Jit::instance().compile(emit_llvm_ir(kernel, name), name).fn;
}

// Runs a kernel on whole buffers: [0, parallel extent), as the executor's one task would.
inline void run_all(KernelFn fn, const UOpPtr& kernel, std::vector<void*> bufs,
                    std::vector<int64_t> vars = {}) {
  fn(bufs.data(), vars.data(), 0, parallel_extent(kernel, vars));
}

}  // namespace loom::test
