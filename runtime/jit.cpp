// The process-wide LLJIT (docs/design.md §7). compile_object parses the IR text
// into a fresh context, verifies it, runs the pass pipeline for the host and
// emits an object file, all on the calling thread with a TargetMachine of its
// own. load adds an object to a JITDylib of its own (so two kernels may share a
// name, and removing the dylib frees exactly that kernel's code) and looks the
// function up, which links it.
//
// LLVM is built without exceptions: every llvm::Error/Expected is consumed here
// and turned into a loom::Error naming the kernel; nothing throws through LLVM.
// The only file of loom that includes the LLJIT and PassBuilder headers.
#include "runtime/jit.hpp"

#include "ir/log.hpp"
#include "ir/target.hpp"

#include <loom/error.hpp>

#include <fmt/format.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/ExecutionEngine/JITLink/EHFrameSupport.h>
#include <llvm/ExecutionEngine/JITLink/JITLinkMemoryManager.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/ExecutorProcessControl.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Process.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/X86TargetParser.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace loom {

namespace {

std::string message(llvm::Error error) { return llvm::toString(std::move(error)); }

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

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

// The host's features list with exactly the x86-64 level `preset`'s turned on: the host
// CPU's tuning, the level's ISA, also where the host lacks it (kernels for a preset are
// compiled anywhere; runnable_target_named guards running them).
std::vector<std::string> preset_feature_list(const std::vector<std::string>& host,
                                             const std::string& preset) {
  // The level's own features, what they imply (avx2: avx, sse4.2, ...), and 64-bit mode.
  llvm::SmallVector<llvm::StringRef, 64> own;
  llvm::X86::getFeaturesForCPU(preset, own);
  llvm::StringMap<bool> allowed;
  allowed["64bit"] = true;
  for (const llvm::StringRef f : own) {
    allowed[f] = true;
    llvm::X86::updateImpliedFeatures(f, true, allowed);
  }
  std::vector<std::string> out;
  for (const std::string& f : host) {
    const llvm::StringRef name = llvm::StringRef(f).drop_front();
    const auto it = allowed.find(name);
    const bool on = it != allowed.end() && it->second;
    out.push_back((on ? "+" : "-") + name.str());
    if (it != allowed.end()) allowed.erase(it);
  }
  for (const auto& f : allowed)  // the level's features the host's list does not name
    if (f.second) out.push_back("+" + f.first().str());
  std::sort(out.begin(), out.end());
  return out;
}

// TargetMachines are not thread-safe (they cache subtargets), so each compile
// leases one for its pass pipeline and code generator; the pool grows to the
// number of threads that compile at once.
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

// JitLevel::Light: promote the accumulators to registers, fold and hoist what
// is invariant, and stop; about a tenth of O2's time (docs/pipeline.md).
constexpr const char* kLightPipeline =
    "function(sroa,early-cse,loop-mssa(licm),instcombine<no-verify-fixpoint>,simplifycfg)";

// JitLevel::Full: the function passes of the new pass manager's O2 pipeline
// that loom's kernels need, in O2's order: its simplification (SROA, CSE,
// instcombine, reassociate, LICM, loop rotation, indvars and full unrolling,
// GVN, SCCP, DCE, DSE) and its vectorisation (the loop vectoriser with
// interleaving, instcombine, vector-combine, the runtime unroller, LICM). A
// kernel is one function that calls nothing, so O2's module and call-graph
// passes (inliner, IPSCCP, globalopt, function-attrs, ...) find nothing to do;
// without them, the SLP vectoriser (loom emits the vectors), jump threading,
// unswitching and the loop idiom and distribution passes, no reduction of
// bench_kernels or bench_matmul ran slower, and the passes take about two
// thirds of O2's time (docs/performance.md).
constexpr const char* kFullPipeline =
    "function("
    "simplifycfg,sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg,reassociate,"
    "loop-mssa(loop-instsimplify,loop-simplifycfg,licm<no-allowspeculation>,loop-rotate,"
    "licm<allowspeculation>),"
    "simplifycfg,instcombine<no-verify-fixpoint>,loop(indvars,loop-deletion,loop-unroll-full),"
    "sroa,gvn,sccp,bdce,instcombine<no-verify-fixpoint>,correlated-propagation,adce,dse,"
    "loop-mssa(licm<allowspeculation>),simplifycfg,instcombine<no-verify-fixpoint>,"
    "loop(loop-rotate,loop-deletion),loop-vectorize,infer-alignment,loop-load-elim,"
    "instcombine<no-verify-fixpoint>,simplifycfg,vector-combine,instcombine<no-verify-fixpoint>,"
    "loop-unroll<O2>,sroa,instcombine<no-verify-fixpoint>,loop-mssa(licm),alignment-from-assumptions,"
    "instsimplify,simplifycfg)";

// The new pass manager's pipeline for the host, tuned by its TargetMachine.
void optimize(llvm::Module& module, llvm::TargetMachine& tm, JitLevel level) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder passes(&tm);
  passes.registerModuleAnalyses(mam);
  passes.registerCGSCCAnalyses(cgam);
  passes.registerFunctionAnalyses(fam);
  passes.registerLoopAnalyses(lam);
  passes.crossRegisterProxies(lam, fam, cgam, mam);
  const char* pipeline = level == JitLevel::Full ? kFullPipeline : kLightPipeline;
  llvm::ModulePassManager pm;
  if (llvm::Error error = passes.parsePassPipeline(pm, pipeline))
    throw Error(fmt::format("jit: the {} pass pipeline does not parse: {}",
                            level == JitLevel::Full ? "full" : "light", message(std::move(error))));
  pm.run(module, mam);
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

// Counts the memory the linker keeps for each ResourceTracker: the standard
// (not finalize-only) segments of its link graphs, in whole pages, as the
// in-process memory manager allocates them.
std::atomic<size_t> g_live_code_bytes{0};  // every plugin's total, readable without the JIT
std::atomic<bool> g_jit_created{false};

// What the JIT keeps for one loaded kernel besides its code pages: its
// JITDylib and resource tracker, their symbol tables, the materialisation
// records, the linker's allocation records, the registered unwind frames and
// the JitCode handle. Measured with mallinfo2 (tests/runtime/test_jit.cpp,
// tests/src/test_memory.cpp; docs/performance.md, "Memory"): a fixed part, and
// a part that grows with the object's symbols, sections and relocations,
// estimated by the object file's size.
constexpr size_t kBookkeepingBytes = size_t{10} << 10;

class CodeBytesPlugin : public llvm::orc::ObjectLinkingLayer::Plugin {
 public:
  void modifyPassConfig(llvm::orc::MaterializationResponsibility& mr, llvm::jitlink::LinkGraph&,
                        llvm::jitlink::PassConfiguration& config) override {
    config.PostAllocationPasses.push_back([this, &mr](llvm::jitlink::LinkGraph& g) -> llvm::Error {
      llvm::jitlink::BasicLayout layout(g);
      auto sizes = layout.getContiguousPageBasedLayoutSizes(llvm::sys::Process::getPageSizeEstimate());
      if (!sizes) return sizes.takeError();
      const uint64_t bytes = sizes->StandardSegs;
      return mr.withResourceKeyDo([&](llvm::orc::ResourceKey key) { add(key, bytes); });
    });
  }
  llvm::Error notifyFailed(llvm::orc::MaterializationResponsibility&) override {
    return llvm::Error::success();
  }
  llvm::Error notifyRemovingResources(llvm::orc::JITDylib&, llvm::orc::ResourceKey key) override {
    std::lock_guard lock(mu_);
    if (auto it = bytes_.find(key); it != bytes_.end()) {
      total_ -= it->second;
      g_live_code_bytes.fetch_sub(it->second, std::memory_order_relaxed);
      bytes_.erase(it);
    }
    return llvm::Error::success();
  }
  void notifyTransferringResources(llvm::orc::JITDylib&, llvm::orc::ResourceKey dst,
                                   llvm::orc::ResourceKey src) override {
    std::lock_guard lock(mu_);
    if (auto it = bytes_.find(src); it != bytes_.end()) {
      bytes_[dst] += it->second;
      bytes_.erase(src);
    }
  }

  size_t bytes_of(llvm::orc::ResourceKey key) const {
    std::lock_guard lock(mu_);
    auto it = bytes_.find(key);
    return it == bytes_.end() ? 0 : it->second;
  }
  size_t total() const {
    std::lock_guard lock(mu_);
    return total_;
  }

 private:
  void add(llvm::orc::ResourceKey key, uint64_t bytes) {
    std::lock_guard lock(mu_);
    bytes_[key] += bytes;
    total_ += bytes;
    g_live_code_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  mutable std::mutex mu_;
  std::unordered_map<llvm::orc::ResourceKey, size_t> bytes_;
  size_t total_ = 0;
};

}  // namespace

// What one LOOM_TARGET compiles with: its features and a pool of its TargetMachines.
struct JitTarget {
  std::vector<std::string> features;
  bool avx512 = false;
  std::unique_ptr<TargetMachinePool> machines;
};

struct Jit::Impl {
  std::string cpu;
  std::vector<std::string> features;
  std::mutex targets_mu;
  std::map<std::string, JitTarget, std::less<>> targets;  // by preset name; entries are never removed
  JitTarget& target(const std::string& name);
  std::unique_ptr<llvm::orc::LLJIT> jit;
  CodeBytesPlugin* code_bytes = nullptr;  // owned by the JIT's object linking layer
  std::atomic<uint64_t> next_dylib{0};
  std::mutex kept_mu;
  std::vector<std::shared_ptr<const JitCode>> kept;  // code from compile(): lives until exit

  std::unique_ptr<llvm::Module> parse(const std::string& ir, const std::string& name, llvm::LLVMContext& ctx);
  void remove(llvm::orc::JITDylib& dylib);
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

  llvm::orc::JITTargetMachineBuilder host{llvm::Triple(llvm::sys::getProcessTriple())};
  host.setCPU(impl_->cpu);
  for (const std::string& f : impl_->features) host.getFeatures().AddFeature(f);
  host.setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);

  // JITLink, with EH frames registered as LLJIT would, and the code-bytes count.
  auto linking_layer = [impl = impl_](
                           llvm::orc::ExecutionSession& session,
                           const llvm::Triple&) -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
    auto layer = std::make_unique<llvm::orc::ObjectLinkingLayer>(session);
    layer->addPlugin(std::make_unique<llvm::orc::EHFrameRegistrationPlugin>(
        session, std::make_unique<llvm::jitlink::InProcessEHFrameRegistrar>()));
    auto plugin = std::make_unique<CodeBytesPlugin>();
    impl->code_bytes = plugin.get();
    layer->addPlugin(std::move(plugin));
    return layer;
  };
  // No platform support: LLJIT's default (the generic IR platform, for static
  // constructors and atexit in JIT'd code, which kernels never have) gives
  // every JITDylib an IR module of its own, compiled at its first lookup.
  // Linking runs on the thread that asks for the kernel (loom's compile tasks
  // already run on the arena's threads): LLJIT's concurrent default, a thread
  // pool that starts a thread per materialisation, started two threads per
  // kernel and left every link waiting for them to be scheduled.
  auto process = llvm::orc::SelfExecutorProcessControl::Create(
      nullptr, std::make_unique<llvm::orc::InPlaceTaskDispatcher>());
  if (!process) throw Error("jit: cannot set up the host process: " + message(process.takeError()));
  auto jit = llvm::orc::LLJITBuilder()
                 .setExecutorProcessControl(std::move(*process))
                 .setJITTargetMachineBuilder(host)
                 .setPlatformSetUp(llvm::orc::setUpInactivePlatform)
                 .setObjectLinkingLayerCreator(linking_layer)
                 .setSupportConcurrentCompilation(true)
                 .create();
  if (!jit) throw Error("jit: cannot create the LLJIT for the host: " + message(jit.takeError()));
  impl_->jit = std::move(*jit);
  g_jit_created.store(true, std::memory_order_release);
  // Failures also reach the caller of lookup (as a loom::Error); the session's
  // own report would go to stderr, so it goes to the debug log instead.
  impl_->jit->getExecutionSession().setErrorReporter(
      [](llvm::Error error) { log().debug("jit: {}", message(std::move(error))); });
}

JitTarget& Jit::Impl::target(const std::string& name) {
  std::lock_guard lock(targets_mu);
  auto it = targets.find(name);
  if (it != targets.end()) return it->second;
  target_named(name);  // an unknown preset is a loom::Error here
  JitTarget t;
  const std::string_view level = preset_level(name);
  t.features = level == "native" ? features : preset_feature_list(features, std::string(level));
  t.avx512 = std::find(t.features.begin(), t.features.end(), "+avx512f") != t.features.end();
  llvm::orc::JITTargetMachineBuilder builder{llvm::Triple(llvm::sys::getProcessTriple())};
  builder.setCPU(cpu);
  for (const std::string& f : t.features) builder.getFeatures().AddFeature(f);
  builder.setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);
  t.machines = std::make_unique<TargetMachinePool>(builder);
  return targets.emplace(name, std::move(t)).first->second;
}

std::string Jit::host_cpu() const { return impl_->cpu; }

std::string Jit::target_features(const std::string& target) const {
  std::string out;
  for (const std::string& f : impl_->target(target).features) out += (out.empty() ? "" : ",") + f;
  return out;
}

std::string Jit::host_features() const {
  std::string out;
  for (const std::string& f : impl_->features) out += (out.empty() ? "" : ",") + f;
  return out;
}

size_t Jit::live_code_bytes() const { return impl_->code_bytes->total(); }
size_t Jit::live_code_bytes_if_any() { return g_live_code_bytes.load(std::memory_order_relaxed); }

// The session interns every symbol name it sees and keeps a name its last user
// dropped until told to sweep: a process compiling new kernels for hours
// would keep each one's name.
void Jit::release_unused() {
  if (g_jit_created.load(std::memory_order_acquire))
    instance().impl_->jit->getExecutionSession().getSymbolStringPool()->clearDeadEntries();
}

size_t JitCode::footprint_bytes() const { return bytes_ + bookkeeping_; }

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

JitObject Jit::compile_object(const std::string& llvm_ir, const std::string& name,
                              const JitOptions& options) const {
  JitObject out;
  out.name = name;
  auto t0 = Clock::now();
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> module = impl_->parse(llvm_ir, name, ctx);
  out.timings.parse = ms_since(t0);
  JitTarget& target = impl_->target(options.target);
  TargetMachineLease lease{*target.machines};
  const bool full = options.level == JitLevel::Full;
  lease.tm->setOptLevel(full                               ? llvm::CodeGenOptLevel::Default
                        : options.level == JitLevel::Light ? llvm::CodeGenOptLevel::Less
                                                           : llvm::CodeGenOptLevel::None);
  // The O0 code generator turns FastISel on in the machine's options and nothing
  // turns it off again: a leased machine would keep it for the next O1 or O2 kernel.
  lease.tm->setFastISel(false);
  module->setDataLayout(lease.tm->createDataLayout());
  module->setTargetTriple(lease.tm->getTargetTriple().str());
  // LLVM prefers 256-bit vectors on AVX-512 server parts; loom's kernels want
  // the 16 float lanes (docs/design.md §6).
  if (target.avx512)
    for (llvm::Function& fn : *module)
      if (!fn.isDeclaration()) fn.addFnAttr("prefer-vector-width", "512");
  t0 = Clock::now();
  optimize(*module, *lease.tm, options.level);
  out.timings.optimize = ms_since(t0);
  if (options.keep_optimized_ir) {
    llvm::raw_string_ostream ir_out(out.optimized_ir);
    module->print(ir_out, nullptr);
  }
  if (options.keep_assembly) out.assembly = assembly(*module, *lease.tm, name);
  t0 = Clock::now();
  auto object = llvm::orc::SimpleCompiler(*lease.tm)(*module);
  if (!object)
    throw Error(
        fmt::format("jit: kernel '{}': code generation failed: {}", name, message(object.takeError())));
  out.bytes.assign((*object)->getBufferStart(), (*object)->getBufferSize());
  out.timings.codegen = ms_since(t0);
  return out;
}

void Jit::Impl::remove(llvm::orc::JITDylib& dylib) {
  if (llvm::Error error = jit->getExecutionSession().removeJITDylib(dylib))
    log().warn("jit: freeing a kernel's code failed: {}", message(std::move(error)));
}

JitCode::~JitCode() {
  if (dylib_) Jit::instance().impl_->remove(*static_cast<llvm::orc::JITDylib*>(dylib_));
}

// A JITDylib per kernel: names never clash, removing it frees exactly this
// code, and the default link order gives it the process's symbols (libm for
// sin, pow, exp2 and log2).
std::shared_ptr<const JitCode> Jit::load(const std::string& object, const std::string& name,
                                         JitTimings* timings) {
  const auto t0 = Clock::now();
  auto dylib = impl_->jit->createJITDylib(fmt::format("loom.kernel.{}", impl_->next_dylib.fetch_add(1)));
  if (!dylib) throw Error(fmt::format("jit: kernel '{}': {}", name, message(dylib.takeError())));
  std::shared_ptr<JitCode> code(new JitCode());
  code->dylib_ = &*dylib;  // from here on, the handle removes the dylib, also on the errors below
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(object, name);
  if (llvm::Error error = impl_->jit->addObjectFile(*dylib, std::move(buffer)))
    throw Error(fmt::format("jit: kernel '{}': cannot add the object: {}", name, message(std::move(error))));
  auto address = impl_->jit->lookup(*dylib, name);  // links here
  if (!address)
    throw Error(
        fmt::format("jit: kernel '{}': compiling or linking failed: {}", name, message(address.takeError())));
  code->fn_ = address->toPtr<KernelFn>();
  code->bytes_ = impl_->code_bytes->bytes_of(dylib->getDefaultResourceTracker()->getKeyUnsafe());
  code->bookkeeping_ = kBookkeepingBytes + object.size();
  if (timings) timings->link = ms_since(t0);
  return code;
}

JitResult Jit::compile(const std::string& llvm_ir, const std::string& name) {
  return compile(llvm_ir, name, JitOptions{});
}

JitResult Jit::compile(const std::string& llvm_ir, const std::string& name, const JitOptions& options) {
  JitObject object = compile_object(llvm_ir, name, options);
  JitResult result{nullptr, std::move(object.optimized_ir), std::move(object.assembly), object.timings};
  auto code = load(object.bytes, name, &result.timings);
  result.fn = code->fn();
  std::lock_guard lock(impl_->kept_mu);
  impl_->kept.push_back(std::move(code));
  return result;
}

}  // namespace loom
