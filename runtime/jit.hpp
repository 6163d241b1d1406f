#pragma once
// The process-wide LLJIT for the host CPU. Takes LLVM IR text (codegen's output),
// verifies it, runs the O2 pipeline tuned for the host, compiles, and returns the
// entry point. No LLVM types here; everything LLVM stays in runtime/jit.cpp.
#include <cstdint>
#include <string>

namespace loom {

using KernelFn = void (*)(void* const* bufs, const int64_t* vars, int64_t begin, int64_t end);

struct JitResult {
  KernelFn fn = nullptr;
  std::string optimized_ir;  // after the pipeline, for LOOM_DEBUG dumps (if asked for)
  std::string assembly;      // the host assembly of the optimised module (if asked for)
};

struct JitOptions {
  bool keep_optimized_ir = false;  // print the optimised module into JitResult::optimized_ir
  bool keep_assembly = false;      // print its assembly into JitResult::assembly (LOOM_DEBUG=6)
};

class Jit {
 public:
  static Jit& instance();  // thread-safe; created on first use
  // Throws loom::Error naming `name` if the IR does not parse or verify or the
  // symbol cannot be found; never aborts.
  // Thread-safe: several threads may compile at once. Each call adds a new
  // function, even for a name compiled before.
  JitResult compile(const std::string& llvm_ir, const std::string& name);
  JitResult compile(const std::string& llvm_ir, const std::string& name, const JitOptions& options);
  std::string host_cpu() const;
  std::string host_features() const;

 private:
  Jit();
  struct Impl;
  Impl* impl_;
};

}  // namespace loom
