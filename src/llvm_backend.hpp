#pragma once
// The LLVM backend (runtime/backend.hpp): codegen/'s emitter renders LLVM IR,
// runtime/jit.hpp's LLJIT compiles it to an object at an effort sized by the
// kernel, and loads objects as code. The only file of src/ that names them.
#include "runtime/backend.hpp"

#include <string>

namespace loom {

class LlvmBackend final : public Backend {
 public:
  // `target`: the LOOM_TARGET preset the code is for (ir/target.hpp; "native": the host).
  explicit LlvmBackend(std::string target);
  std::string render(const UOpPtr& kernel, const std::string& name,
                     const RenderOptions& options) const override;
  std::string source_stage() const override { return "llvm"; }
  std::string source_extension() const override { return "ll"; }
  CompiledObject compile(const UOpPtr& kernel, const std::string& source, const std::string& name,
                         const CompileOptions& options) const override;
  std::shared_ptr<const KernelCode> load(const std::string& object, const std::string& name,
                                         CompileTimings* timings = nullptr) const override;
  std::string cache_identity() const override;

 private:
  std::string target_;
};

}  // namespace loom
