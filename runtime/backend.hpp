#pragma once
// The back half's one interface (docs/design.md): a kernel as the kernel passes
// left it, in; callable code, out. Three steps, so the engine can keep what is
// between them: render (the kernel's source text: a dump shows it), compile
// (source -> an object, stored in the disk cache), load (object -> code). The
// engine gets its backend from kernel_backend (src/engine.hpp) and names no
// compiler; src/llvm_backend.hpp is the one there is (codegen/'s LLVM IR and
// runtime/jit.hpp's LLJIT).
#include "ir/uop.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace loom {

// The function ABI of docs/kernel-ir.md.
using KernelFn = void (*)(void* const* bufs, const int64_t* vars, int64_t begin, int64_t end);
// A kernel compiled with LOOM_CHECK_BOUNDS returns 0, or 1 + the slot of the
// buffer it found an index outside of (docs/kernel-ir.md); its address is kept
// as a KernelFn and cast back to this type to be called.
using CheckedKernelFn = int32_t (*)(void* const* bufs, const int64_t* vars, int64_t begin, int64_t end);
inline CheckedKernelFn as_checked(KernelFn fn) {
  return reinterpret_cast<CheckedKernelFn>(
      reinterpret_cast<void (*)()>(fn));  // void(): no -Wcast-function-type
}

// One kernel's machine code: `fn` may run while a handle is held, and the code
// is freed with the last one.
class KernelCode {
 public:
  virtual ~KernelCode() = default;
  virtual KernelFn fn() const = 0;
  virtual size_t code_bytes() const = 0;  // the code's own memory
  // All the memory it holds: its code and the loader's bookkeeping for it.
  virtual size_t footprint_bytes() const = 0;
};

// Where one compile's time went, in milliseconds.
struct CompileTimings {
  double parse = 0;     // source text -> the compiler's form, verified
  double optimize = 0;  // the compiler's optimisation passes
  double codegen = 0;   // -> an object file
  double link = 0;      // object -> code in memory, symbol looked up
};

struct RenderOptions {
  // LOOM_CHECK_BOUNDS: every access checks its index and the function returns a
  // status (docs/kernel-ir.md).
  bool check_bounds = false;
};

struct CompileOptions {
  bool keep_assembly = false;  // the object's assembly into CompiledObject::assembly (dumps)
};

struct CompiledObject {
  std::string bytes;     // a relocatable object for this host: what load takes and the disk cache keeps
  std::string assembly;  // if asked for
  std::string effort;    // how hard the compiler worked on it, for LOOM_DEBUG=2 ("O2")
  CompileTimings timings;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // The source of `kernel` (lower_kernel's output) as one function `name`.
  // Throws loom::Error naming the kernel if it cannot be rendered.
  virtual std::string render(const UOpPtr& kernel, const std::string& name,
                             const RenderOptions& options) const = 0;
  // What dumps call the source (LOOM_DUMP_DIR's stage name and file extension).
  virtual std::string source_stage() const = 0;
  virtual std::string source_extension() const = 0;
  // `source` (rendered from `kernel`, which may size the compiler's effort) -> an object.
  virtual CompiledObject compile(const UOpPtr& kernel, const std::string& source, const std::string& name,
                                 const CompileOptions& options) const = 0;
  // An object from compile (this process's, or the disk cache's) -> callable code.
  virtual std::shared_ptr<const KernelCode> load(const std::string& object, const std::string& name,
                                                 CompileTimings* timings = nullptr) const = 0;
  // Everything an object depends on besides the kernel and the engine's codegen
  // options: the compiler and its version, the CPU and features it compiled for.
  // Part of the disk cache's key, so an object of another backend never loads.
  virtual std::string cache_identity() const = 0;
};

}  // namespace loom
