#pragma once
// The in-memory kernel cache: kernel AST -> compiled function. UOps are
// hash-consed, so a structurally equal kernel built again is the same pointer
// and hits. Each entry holds a strong reference to its AST: were the key a bare
// address, a freed kernel's address could be reused by a different kernel, which
// would then run the wrong code.
#include "ir/opt.hpp"
#include "ir/uop.hpp"
#include "runtime/backend.hpp"

#include <atomic>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace loom {

struct CompiledKernel {
  std::string name;  // the code's symbol: the kernel's name (ir/kernel_name.hpp) when first compiled
  // The codegen choices it was compiled under (flags such as LOOM_NOOPT): part of
  // the key, so a kernel compiled one way never runs where another was asked for.
  std::string options;
  KernelFn fn = nullptr;
  bool checks_bounds = false;              // LOOM_CHECK_BOUNDS: fn is really a CheckedKernelFn
  std::shared_ptr<const KernelCode> code;  // owns fn's machine code: freed with the last holder
  UOpPtr ast;                              // the kernel as scheduled: the cache key, kept alive here
  // The optimised kernel's parallel range and variables (codegen's
  // parallel_extent_graph): the run's extent, without holding the whole kernel.
  UOpPtr extent;
  // The Opts the optimiser applied (ir/opt.hpp), in order: the heuristic's for this
  // AST and options (so the key above determines them), and part of the disk cache's key.
  std::vector<Opt> opts;
  // Texts, kept only when a dump asked for them (LOOM_DEBUG >= 3, LOOM_DUMP_DIR, loom-dump).
  std::string source;        // the backend's rendering of the kernel (LLVM IR)
  std::string optimized_ir;  // after the compiler's pipeline
  std::string linear;        // the linearized loops
  std::string assembly;      // the host assembly
  double flops = 0;          // arithmetic per run (ir/kernel_cost.hpp), for GFLOP/s
};

// The memory an entry holds: its code and the JIT's bookkeeping for it
// (KernelCode::footprint_bytes), its ASTs' nodes (graph_bytes; nodes shared with
// other entries or plans are counted in each, so this is an upper bound), its
// texts and the entry itself.
size_t footprint_bytes(const CompiledKernel& kernel);

// Thread-safe: lookups share a lock, inserts and clear take it exclusively.
//
// Bounded by the memory its entries hold (footprint_bytes), not by their
// number: past the limit, inserting evicts the least
// recently used entries (by their last find or insert) until the rest take at
// most 7/8 of it. The entry just inserted always stays, even alone above the
// limit. An evicted kernel's code is freed as soon as nothing else holds it (a
// run in progress); the engine compiles it again, or reloads it from the disk
// cache, when it is next needed. The engine sets the limit from
// LOOM_JIT_CACHE_BYTES (docs/env.md); a KernelCache starts at kDefaultLimit.
class KernelCache {
 public:
  static constexpr size_t kDefaultLimit = size_t{256} << 20;

  // The entry compiled for `ast` under `options`, or null. Marks it used.
  std::shared_ptr<const CompiledKernel> find(const UOpPtr& ast, const std::string& options = "") const;
  // Stores `kernel` under (`kernel.ast`, `kernel.options`) and returns the stored entry. If the
  // kernel is already there (another thread compiled it first), the existing
  // entry wins and is returned. Throws loom::Error if `kernel.ast` or `kernel.fn` is null.
  std::shared_ptr<const CompiledKernel> insert(CompiledKernel kernel);
  size_t size() const;
  size_t bytes() const;  // the memory the entries hold (footprint_bytes)
  size_t limit() const;
  void set_limit(size_t bytes);  // evicts at once down to the new limit
  void clear();                  // drops every entry, and with it the code nothing else holds

 private:
  // The key is the AST's address and the options; the entry's `ast` keeps that address alive.
  using Key = std::pair<const UOp*, std::string>;
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const UOp*>()(k.first) ^ (std::hash<std::string>()(k.second) * 31);
    }
  };
  struct Entry {
    std::shared_ptr<const CompiledKernel> kernel;
    size_t bytes = 0;
    mutable std::atomic<uint64_t> used{0};  // the use clock's value at its last use
  };
  using Entries = std::unordered_map<Key, std::unique_ptr<Entry>, KeyHash>;
  // Moves least recently used entries other than `keep` into `out` until the rest fit.
  void evict_locked(const Entry* keep, std::vector<std::unique_ptr<Entry>>& out);

  mutable std::shared_mutex mu_;
  mutable std::atomic<uint64_t> clock_{0};
  Entries entries_;
  size_t bytes_ = 0;
  std::atomic<size_t> limit_{kDefaultLimit};  // read without the lock by limit()
};

// The process-wide cache the engine uses.
KernelCache& kernel_cache();

}  // namespace loom
