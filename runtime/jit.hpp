#pragma once
// The process-wide LLJIT for the host CPU. Two steps, so objects can be cached
// on disk and kernels compiled on several threads at once:
//   compile_object: LLVM IR text (codegen's output) -> verified, optimised,
//                   an object file in memory. Touches no JIT state.
//   load:           object file -> callable code in a JITDylib and
//                   ResourceTracker of its own, freed when the last JitCode
//                   handle goes.
// No LLVM types here; everything LLVM stays in runtime/jit.cpp. The engine reaches
// it through the LLVM backend (src/llvm_backend.hpp, runtime/backend.hpp).
#include "runtime/backend.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace loom {

// How hard LLVM works on one module. Full: the function passes of the new pass
// manager's O2 pipeline that kernels need (the loop vectoriser among them; no
// module or call-graph passes), and the O2 code generator. Light: O1 and
// the O1 code generator, for kernels O2 makes no faster. Bulk: Light's passes
// and LLVM's O0 code generator (FastISel, the fast register allocator), for
// kernels whose code generation would cost more than it buys: so large that
// the O1 code generator's time grows faster than their IR, or so small that
// they run for a microsecond (docs/pipeline.md says where the lines are).
enum class JitLevel { Full, Light, Bulk };

struct JitOptions {
  bool keep_optimized_ir = false;  // print the optimised module into JitObject::optimized_ir
  bool keep_assembly = false;      // print its assembly into JitObject::assembly (LOOM_DEBUG=6)
  JitLevel level = JitLevel::Full;
  // The LOOM_TARGET preset to generate code for (ir/target.hpp): "native" is the
  // host's CPU and features; a preset keeps the host's CPU for tuning and turns
  // off every feature its x86-64 level does not have.
  std::string target = "native";
};

// Where one compile's time went: parse is IR text -> module, optimize the IR pass
// pipeline, codegen module -> object file, link object -> code in memory.
using JitTimings = CompileTimings;

struct JitObject {
  std::string name;          // the function's symbol
  std::string bytes;         // a relocatable object file for the host
  std::string optimized_ir;  // after the pipeline, if asked for
  std::string assembly;      // the host assembly of the optimised module, if asked for
  JitTimings timings;
};

// One kernel's machine code. Destroying the last handle removes its JITDylib,
// which frees the code. Run `fn` only while holding the handle.
class JitCode final : public KernelCode {
 public:
  KernelFn fn() const override { return fn_; }
  size_t code_bytes() const override { return bytes_; }  // memory the linker allocated for it (whole pages)
  // All the memory it holds: its code pages and the JIT's bookkeeping for it
  // (its JITDylib, resource tracker, symbol tables and registered unwind
  // frames, a measured constant: docs/performance.md).
  size_t footprint_bytes() const override;
  ~JitCode() override;
  JitCode(const JitCode&) = delete;
  JitCode& operator=(const JitCode&) = delete;

 private:
  friend class Jit;
  JitCode() = default;
  KernelFn fn_ = nullptr;
  size_t bytes_ = 0;
  size_t bookkeeping_ = 0;  // the JIT's estimated bookkeeping for it (footprint_bytes)
  void* dylib_ = nullptr;   // the llvm::orc::JITDylib it lives in
};

struct JitResult {
  KernelFn fn = nullptr;
  std::string optimized_ir;  // after the pipeline, for LOOM_DEBUG dumps (if asked for)
  std::string assembly;      // the host assembly of the optimised module (if asked for)
  JitTimings timings;
};

class Jit {
 public:
  static Jit& instance();  // thread-safe; created on first use
  // Every call below is thread-safe, and throws loom::Error naming `name` if the
  // IR does not parse or verify, the object does not link, or the symbol cannot
  // be found; never aborts.
  JitObject compile_object(const std::string& llvm_ir, const std::string& name,
                           const JitOptions& options = {}) const;
  // A second load of one object is another copy of the code.
  std::shared_ptr<const JitCode> load(const std::string& object, const std::string& name,
                                      JitTimings* timings = nullptr);
  // compile_object + load, for tools and tests: the code stays until the process exits.
  JitResult compile(const std::string& llvm_ir, const std::string& name);
  JitResult compile(const std::string& llvm_ir, const std::string& name, const JitOptions& options);

  // Bytes of machine code currently loaded through `load` and not yet freed.
  size_t live_code_bytes() const;
  // The same, without creating the JIT if nothing was compiled yet.
  static size_t live_code_bytes_if_any();
  // Drops what the JIT keeps after freed kernels (the names of their symbols),
  // without creating the JIT if nothing was compiled yet. Thread-safe.
  static void release_unused();
  std::string host_cpu() const;
  std::string host_features() const;
  // The features LLVM compiles for under the preset `target`, as host_features() spells them.
  std::string target_features(const std::string& target) const;

 private:
  Jit();
  friend class JitCode;
  struct Impl;
  Impl* impl_;
};

}  // namespace loom
