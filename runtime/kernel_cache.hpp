#pragma once
// The in-memory kernel cache: kernel AST -> compiled function. UOps are
// hash-consed, so a structurally equal kernel built again is the same pointer
// and hits. Each entry holds a strong reference to its AST: were the key a bare
// address, a freed kernel's address could be reused by a different kernel, which
// would then run the wrong code.
#include "ir/uop.hpp"
#include "runtime/jit.hpp"

#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace loom {

struct CompiledKernel {
  std::string name;  // the JIT symbol: the kernel's name (ir/kernel_name.hpp) when first compiled
  // The codegen choices it was compiled under (flags such as LOOM_NOOPT): part of
  // the key, so a kernel compiled one way never runs where another was asked for.
  std::string options;
  KernelFn fn = nullptr;
  std::shared_ptr<const JitCode> code;  // owns fn's machine code: freed with the last holder
  UOpPtr ast;                           // the kernel as scheduled: the cache key, kept alive here
  UOpPtr optimized_ast;                 // after the optimiser: its parallel range gives the run's extent
  std::string llvm_ir;                  // codegen's output
  std::string optimized_ir;             // after the JIT's pipeline, for LOOM_DEBUG dumps
  std::string linear;                   // the linearized loops, when a dump asked for them
  std::string assembly;                 // the host assembly, when a dump asked for it
  double flops = 0;                     // arithmetic per run (ir/kernel_cost.hpp), for GFLOP/s
};

// Thread-safe: lookups share a lock, inserts and clear take it exclusively.
class KernelCache {
 public:
  // The entry compiled for `ast` under `options`, or null.
  std::shared_ptr<const CompiledKernel> find(const UOpPtr& ast, const std::string& options = "") const;
  // Stores `kernel` under (`kernel.ast`, `kernel.options`) and returns the stored entry. If the
  // kernel is already there (another thread compiled it first), the existing
  // entry wins and is returned. Throws loom::Error if `kernel.ast` or `kernel.fn` is null.
  std::shared_ptr<const CompiledKernel> insert(CompiledKernel kernel);
  size_t size() const;
  void clear();  // drops the entries (and their ASTs); the JIT keeps the code

 private:
  mutable std::shared_mutex mu_;
  // The key is the AST's address and the options; the entry's `ast` keeps that address alive.
  using Key = std::pair<const UOp*, std::string>;
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const UOp*>()(k.first) ^ (std::hash<std::string>()(k.second) * 31);
    }
  };
  std::unordered_map<Key, std::shared_ptr<const CompiledKernel>, KeyHash> entries_;
};

// The process-wide cache the engine uses.
KernelCache& kernel_cache();

}  // namespace loom
