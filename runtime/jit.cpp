// The process-wide LLJIT (docs/design.md §7). One compile: parse the IR text
// into a fresh context, verify, run the new pass manager's O2 pipeline for the
// host, add the module to a JITDylib of its own (so two kernels may share a
// name) and look the function up, which compiles it on the calling thread.
//
// LLVM is built without exceptions: every llvm::Error/Expected is consumed here
// and turned into a loom::Error naming the kernel; nothing throws through LLVM.
// The only file of loom that includes the LLJIT and PassBuilder headers.
#include "runtime/jit.hpp"

#include "ir/log.hpp"

#include <loom/error.hpp>

#include <fmt/format.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

namespace loom {

namespace {

std::string message(llvm::Error error) { return llvm::toString(std::move(error)); }

// The host's features, sorted, as LLVM spells them: "+avx2,+avx512f,-amx-tile,...".
std::vector<std::string> host_feature_list() {
  std::vector<std::string> out;
  for (const auto& feature : llvm::sys::getHostCPUFeatures()) {
    std::string name(feature.second ? "+" : "-");
    name.append(feature.first().data(), feature.first().size());
    out.push_back(std::move(name));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// TargetMachines are not thread-safe (they cache subtargets), so each compile
// leases one for its pass pipeline; the pool grows to the number of threads
// that compile at once.
class TargetMachinePool {
 public:
  explicit TargetMachinePool(llvm::orc::JITTargetMachineBuilder builder) : builder_(std::move(builder)) {}

  std::unique_ptr<llvm::TargetMachine> take() {
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) {
        auto tm = std::move(free_.back());
        free_.pop_back();
        return tm;
      }
    }
    auto tm = builder_.createTargetMachine();
    if (!tm) throw Error("jit: cannot create a target machine for the host: " + message(tm.takeError()));
    return std::move(*tm);
  }
  void give(std::unique_ptr<llvm::TargetMachine> tm) {
    std::lock_guard lock(mu_);
    free_.push_back(std::move(tm));
  }

 private:
  llvm::orc::JITTargetMachineBuilder builder_;
  std::mutex mu_;
  std::vector<std::unique_ptr<llvm::TargetMachine>> free_;
};

struct TargetMachineLease {
  TargetMachinePool& pool;
  std::unique_ptr<llvm::TargetMachine> tm = pool.take();
  ~TargetMachineLease() { pool.give(std::move(tm)); }
};

// The new pass manager's O2 pipeline for the host, with the loop and SLP
// vectorisers on (O3 measured no better on loom's kernels).
void optimize(llvm::Module& module, llvm::TargetMachine& tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  tuning.LoopInterleaving = true;
  tuning.LoopUnrolling = true;
  llvm::PassBuilder passes(&tm, tuning);
  passes.registerModuleAnalyses(mam);
  passes.registerCGSCCAnalyses(cgam);
  passes.registerFunctionAnalyses(fam);
  passes.registerLoopAnalyses(lam);
  passes.crossRegisterProxies(lam, fam, cgam, mam);
  passes.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(module, mam);
}

// The module's assembly as `tm` (configured like the JIT's own) emits it. Code
// generation rewrites the IR it runs on, so it runs on a copy.
std::string assembly(const llvm::Module& module, llvm::TargetMachine& tm, const std::string& name) {
  std::unique_ptr<llvm::Module> copy = llvm::CloneModule(module);
  llvm::SmallString<0> text;
  llvm::raw_svector_ostream out(text);
  llvm::legacy::PassManager passes;
  if (tm.addPassesToEmitFile(passes, out, nullptr, llvm::CodeGenFileType::AssemblyFile))
    throw Error(fmt::format("jit: kernel '{}': the host target cannot print assembly", name));
  passes.run(*copy);
  return std::string(text.str());
}

}  // namespace

struct Jit::Impl {
  std::string cpu;
  std::vector<std::string> features;
  bool avx512 = false;
  std::unique_ptr<TargetMachinePool> machines;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::atomic<uint64_t> next_dylib{0};

  std::unique_ptr<llvm::Module> parse(const std::string& ir, const std::string& name, llvm::LLVMContext& ctx);
  void add_and_link(std::unique_ptr<llvm::Module> module, std::unique_ptr<llvm::LLVMContext> ctx,
                    const std::string& name, JitResult& result);
};

Jit& Jit::instance() {
  static Jit* jit = new Jit();  // never destroyed: compiled kernels stay callable until exit
  return *jit;
}

Jit::Jit() : impl_(new Impl) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::InitializeNativeTargetAsmParser();
  impl_->cpu = llvm::sys::getHostCPUName().str();
  impl_->features = host_feature_list();
  impl_->avx512 =
      std::find(impl_->features.begin(), impl_->features.end(), "+avx512f") != impl_->features.end();

  llvm::orc::JITTargetMachineBuilder host{llvm::Triple(llvm::sys::getProcessTriple())};
  host.setCPU(impl_->cpu);
  for (const std::string& f : impl_->features) host.getFeatures().AddFeature(f);
  host.setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);
  impl_->machines = std::make_unique<TargetMachinePool>(host);

  // Concurrent compilation: each compile gets its own TargetMachine, so threads
  // may compile kernels at the same time (each on its own thread).
  auto jit = llvm::orc::LLJITBuilder()
                 .setJITTargetMachineBuilder(host)
                 .setSupportConcurrentCompilation(true)
                 .create();
  if (!jit) throw Error("jit: cannot create the LLJIT for the host: " + message(jit.takeError()));
  impl_->jit = std::move(*jit);
  // Failures also reach the caller of lookup (as a loom::Error); the session's
  // own report would go to stderr, so it goes to the debug log instead.
  impl_->jit->getExecutionSession().setErrorReporter(
      [](llvm::Error error) { log().debug("jit: {}", message(std::move(error))); });
}

std::string Jit::host_cpu() const { return impl_->cpu; }

std::string Jit::host_features() const {
  std::string out;
  for (const std::string& f : impl_->features) out += (out.empty() ? "" : ",") + f;
  return out;
}

std::unique_ptr<llvm::Module> Jit::Impl::parse(const std::string& ir, const std::string& name,
                                               llvm::LLVMContext& ctx) {
  llvm::SMDiagnostic diag;
  std::unique_ptr<llvm::Module> module = llvm::parseIR(llvm::MemoryBufferRef(ir, name), diag, ctx);
  if (!module)
    throw Error(fmt::format("jit: kernel '{}': the LLVM IR does not parse: line {}, column {}: {}", name,
                            diag.getLineNo(), diag.getColumnNo(), diag.getMessage().str()));
  std::string problems;
  llvm::raw_string_ostream out(problems);
  if (llvm::verifyModule(*module, &out))
    throw Error(fmt::format("jit: kernel '{}': the LLVM IR does not verify: {}", name, out.str()));
  const llvm::Function* fn = module->getFunction(name);
  if (!fn || fn->isDeclaration())
    throw Error(fmt::format("jit: kernel '{}': the LLVM IR defines no function of that name", name));
  return module;
}

JitResult Jit::compile(const std::string& llvm_ir, const std::string& name) {
  return compile(llvm_ir, name, JitOptions{});
}

JitResult Jit::compile(const std::string& llvm_ir, const std::string& name, const JitOptions& options) {
  auto ctx = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> module = impl_->parse(llvm_ir, name, *ctx);
  JitResult result;
  {
    TargetMachineLease lease{*impl_->machines};
    module->setDataLayout(lease.tm->createDataLayout());
    module->setTargetTriple(lease.tm->getTargetTriple().str());
    // LLVM prefers 256-bit vectors on AVX-512 server parts; loom's kernels want
    // the 16 float lanes (docs/design.md §6).
    if (impl_->avx512)
      for (llvm::Function& fn : *module)
        if (!fn.isDeclaration()) fn.addFnAttr("prefer-vector-width", "512");
    optimize(*module, *lease.tm);
    if (options.keep_assembly) result.assembly = assembly(*module, *lease.tm, name);
  }
  if (options.keep_optimized_ir) {
    llvm::raw_string_ostream out(result.optimized_ir);
    module->print(out, nullptr);
  }
  impl_->add_and_link(std::move(module), std::move(ctx), name, result);
  return result;
}

// A JITDylib per kernel: names never clash, and the default link order gives
// it the process's symbols (libm for sin, pow, exp2 and log2).
void Jit::Impl::add_and_link(std::unique_ptr<llvm::Module> module, std::unique_ptr<llvm::LLVMContext> ctx,
                             const std::string& name, JitResult& result) {
  auto dylib = jit->createJITDylib(fmt::format("loom.kernel.{}", next_dylib.fetch_add(1)));
  if (!dylib) throw Error(fmt::format("jit: kernel '{}': {}", name, message(dylib.takeError())));
  if (llvm::Error error =
          jit->addIRModule(*dylib, llvm::orc::ThreadSafeModule(std::move(module), std::move(ctx))))
    throw Error(fmt::format("jit: kernel '{}': cannot add the module: {}", name, message(std::move(error))));
  auto address = jit->lookup(*dylib, name);  // compiles and links here
  if (!address)
    throw Error(
        fmt::format("jit: kernel '{}': compiling or linking failed: {}", name, message(address.takeError())));
  result.fn = address->toPtr<KernelFn>();
}

}  // namespace loom
