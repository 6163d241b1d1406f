#include "src/llvm_backend.hpp"

#include "codegen/codegen.hpp"
#include "ir/target.hpp"
#include "runtime/jit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdint>

#ifndef LOOM_LLVM_VERSION
#define LOOM_LLVM_VERSION "unknown"
#endif

namespace loom {

namespace {

// Which kernels get a lighter level than O2 (figures in docs/pipeline.md):
// - JitLevel::Bulk for an elementwise body that runs at most kLightWork times:
//   its code runs for about a microsecond at any level, and LLVM's O0 code
//   generator takes about half the O1 one's time for such a kernel
//   (docs/performance.md); a small kernel that accumulates gets Light, whose
//   register allocator keeps the accumulators in registers across iterations;
// - JitLevel::Light for an elementwise kernel (no accumulator, no reduce range):
//   loom's optimiser already vectorised and threaded it, and O2 adds nothing to
//   its speed but its compile time (docs/performance.md); reductions keep O2,
//   whose loop vectoriser and unroller they measurably need. O0 code ran
//   bench_kernels' exp and tanh rows slower, so larger elementwise kernels keep
//   the O1 code generator;
// - JitLevel::Bulk for LLVM IR of kLightLines lines or more: O2's time, and the
//   O1 code generator's, grow faster than the IR (seconds and half a second
//   for cat of 200 tensors) and would take thousands of runs to pay back.
// - never JitLevel::Bulk for IR with a vector of i1 whose lane count is no power of
//   two (a padded kernel's masks over unrolled odd ranges, <70 x i1>): LLVM 19's
//   x86 code generator at O0 gave such masks wrong lanes (a padded element loaded
//   where it should be the pad's value, loom-fuzz seed 735415), where O1 and O2
//   are right.
constexpr int64_t kLightWork = 512;
constexpr int64_t kLightLines = 2000;

// Whether the IR names a vector type `<n x i1>` with n no power of two.
bool has_odd_mask_vector(const std::string& llvm_ir) {
  for (size_t at = llvm_ir.find(" x i1>"); at != std::string::npos; at = llvm_ir.find(" x i1>", at + 1)) {
    size_t begin = at;
    while (begin > 0 && std::isdigit(static_cast<unsigned char>(llvm_ir[begin - 1]))) --begin;
    if (begin == at || begin == 0 || llvm_ir[begin - 1] != '<') continue;
    const uint64_t lanes = std::stoull(llvm_ir.substr(begin, at - begin));
    if (!std::has_single_bit(lanes)) return true;
  }
  return false;
}

// How many times the kernel's innermost body runs: the product of its ranges'
// extents (nested loops), or -1 when an extent is symbolic.
int64_t kernel_work(const UOpPtr& kernel) {
  int64_t work = 1;
  for (const auto& n : toposort(kernel))
    if (n->op == Op::RANGE) {
      if (n->src[0]->op != Op::CONST) return -1;
      work = n->src[0]->const_int() > 0 && work > INT64_MAX / n->src[0]->const_int()
                 ? INT64_MAX
                 : work * n->src[0]->const_int();
    }
  return work;
}

// Whether the optimised kernel accumulates: a register accumulator or a reduce range.
bool accumulates(const UOpPtr& kernel) {
  for (const auto& n : toposort(kernel))
    if (n->op == Op::DEFINE_REG || (n->op == Op::RANGE && n->get<AxisArg>().kind == AxisKind::Reduce))
      return true;
  return false;
}

JitLevel jit_level(const UOpPtr& kernel, const std::string& llvm_ir) {
  const int64_t work = kernel_work(kernel);
  const auto lines = std::count(llvm_ir.begin(), llvm_ir.end(), '\n');
  const JitLevel bulk = has_odd_mask_vector(llvm_ir) ? JitLevel::Light : JitLevel::Bulk;
  if (lines >= kLightLines) return bulk;
  const bool small = work >= 0 && work <= kLightWork;
  if (!accumulates(kernel)) return small ? bulk : JitLevel::Light;
  return small ? JitLevel::Light : JitLevel::Full;
}

std::string level_name(JitLevel level) {
  return level == JitLevel::Full ? "O2" : level == JitLevel::Light ? "light" : "bulk";
}

}  // namespace

LlvmBackend::LlvmBackend(std::string target) : target_(std::move(target)) {}

std::string LlvmBackend::render(const UOpPtr& kernel, const std::string& name,
                                const RenderOptions& options) const {
  return emit_llvm_ir(kernel, name, EmitOptions{options.check_bounds, -1, target_named(target_)});
}

CompiledObject LlvmBackend::compile(const UOpPtr& kernel, const std::string& source, const std::string& name,
                                    const CompileOptions& options) const {
  JitOptions jit_options;
  jit_options.target = target_;
  jit_options.keep_assembly = options.keep_assembly;
  jit_options.level = jit_level(kernel, source);
  JitObject object = Jit::instance().compile_object(source, name, jit_options);
  return {std::move(object.bytes), std::move(object.assembly), level_name(jit_options.level), object.timings};
}

std::shared_ptr<const KernelCode> LlvmBackend::load(const std::string& object, const std::string& name,
                                                    CompileTimings* timings) const {
  return Jit::instance().load(object, name, timings);
}

// The object is for the host's CPU (tuning) with the target's features.
std::string LlvmBackend::cache_identity() const {
  const Jit& jit = Jit::instance();
  return fmt::format("llvm {}\ncpu {}\nfeatures {}", LOOM_LLVM_VERSION, jit.host_cpu(), jit.host_features());
}

}  // namespace loom
