// LLVM IR emission: walks the linearized kernel and builds one function with the
// ABI of docs/kernel-ir.md. The ALU and CAST rules of that page that LLVM's plain
// instructions do not keep (division by 0, shifts by the width, saturating casts,
// float max) are UOps by now (codegen/numeric_lowering.hpp): this file emits
// sdiv, shl, fptosi plainly and refuses an op lower_numerics should have lowered.
//
// The only file of loom that includes IRBuilder (it is slow to compile).
#include "codegen/codegen.hpp"
#include "codegen/linearizer.hpp"
#include "codegen/numeric_lowering.hpp"
#include "codegen/vector_ops.hpp"
#include "ir/target.hpp"

#include <loom/half.hpp>

#include <fmt/format.h>
#include <llvm/Analysis/VectorUtils.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <functional>
#include <map>
#include <unordered_map>

namespace loom {

namespace {

std::atomic<bool> break_next_kernel{false};  // test hook, see codegen_testing_break_next_kernel

using llvm::Value;

std::string describe(const UOp& u) { return fmt::format("{} {}", op_name(u.op), to_string(u.dtype)); }

// Sources must have the dtypes the contract gives each op; LLVM would reject
// (or worse, silently mis-handle) mixed operand types.
void check_operands(const UOp& u) {
  auto same = [&](size_t i, DType want) {
    if (!(u.src.at(i)->dtype == want))
      throw Error(fmt::format("{}: source {} is {}, expected {}", describe(u), i, to_string(u.src[i]->dtype),
                              to_string(want)));
  };
  if (u.op == Op::WHERE) {
    same(0, DType::Bool.vec(u.dtype.lanes));
    same(1, u.dtype);
    same(2, u.dtype);
    return;
  }
  if (is_comparison(u.op)) {
    if (!(u.dtype == DType::Bool.vec(u.src.at(0)->dtype.lanes)))
      throw Error(describe(u) + ": a comparison gives bool, one lane per operand lane");
    same(1, u.src.at(0)->dtype);
    return;
  }
  for (size_t i = 0; i < u.src.size(); ++i) same(i, u.dtype);
}

// An op whose plain instruction is undefined on some values it may see (a
// divisor that may be 0) is lower_numerics' to guard, never emitted as it is.
void refuse_unlowered(const UOp& u, bool float_max_instruction) {
  if (const std::string why = unlowered_numerics(u, float_max_instruction); !why.empty())
    throw Error(fmt::format("{}: {}; lower_numerics (codegen/numeric_lowering.hpp) must run first",
                            describe(u), why));
}

// The buffer behind an INDEX, through the AFTERs that order it.
const UOp& buffer_of(const UOp& index) {
  const UOp* b = index.src.at(0).get();
  while (b->op == Op::AFTER) b = b->src.at(0).get();
  return *b;
}

class Emitter {
 public:
  Emitter(llvm::Module& module, const LinearKernel& linear, const std::string& name,
          const EmitOptions& options);
  void emit(bool omit_terminator);

 private:
  llvm::LLVMContext& ctx_;
  llvm::Module& module_;
  const LinearKernel& linear_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  std::vector<UOpPtr> vars_;
  std::unordered_map<const UOp*, Value*> values_;
  std::map<int64_t, llvm::MDNode*> slot_scopes_;  // one alias scope per buffer slot
  bool check_bounds_;
  int64_t streaming_store_bytes_;
  int register_bytes_;     // one SIMD register of the target's ISA
  TargetIsa isa_;          // its instructions (the half conversions use F16C's and AVX512_BF16's)
  bool float_max_;         // Float32 MAX in instructions (Target::exact_float_max), not selects
  bool streamed_ = false;  // a non-temporal store was emitted: sfence before returning
  std::map<int64_t, llvm::BasicBlock*> out_of_bounds_;  // per slot: `ret 1 + slot`

  struct OpenLoop {
    llvm::PHINode* counter;
    llvm::BasicBlock* header;
    llvm::BasicBlock* exit;
  };
  std::vector<OpenLoop> loops_;

  // types and constants
  llvm::Type* type_of(DType dt);      // in registers: Bool is i1
  llvm::Type* memory_type(DType dt);  // in buffers: Bool is a byte
  llvm::Constant* constant(DType dt, double f, int64_t i);
  llvm::Constant* zero(DType dt) { return constant(dt, 0.0, 0); }
  Value* get(const UOpPtr& u);
  Value* to_i64(const UOpPtr& u);

  // instructions
  void inst(const LinearInst& inst);
  void begin_loop(const UOpPtr& range);
  void end_loop();
  Value* value(const UOp& u);
  Value* vectorize(const UOp& u);
  Value* lane_select(const UOp& u);
  Value* alu(const UOp& u);
  Value* dot2(const UOp& u);
  Value* binary(Op op, DType dt, Value* a, Value* b);
  Value* compare(Op op, DType dt, Value* a, Value* b);
  Value* cast(DType from, DType to, Value* v);
  Value* half_to_f32(DType from, Value* v);
  Value* f32_to_half(DType to, Value* v);
  Value* f32_to_f16_subnormal(Value* a);
  Value* f32_to_bf16_vcvtneps2bf16(Value* v, unsigned lanes);
  Value* f32_to_f16_vcvtps2ph(Value* v, unsigned lanes);
  Value* lanes_of(Value* x, unsigned first, unsigned count);
  Value* in_chunks(const std::vector<Value*>& in, unsigned lanes, unsigned width,
                   const std::function<Value*(const std::vector<Value*>&)>& op);
  Value* ldexp(DType dt, Value* x, Value* n);
  Value* maximum(DType dt, Value* a, Value* b);
  static unsigned f32_chunk_lanes(unsigned lanes);
  Value* avx512_masked(const std::array<llvm::Intrinsic::ID, 3>& by_width, unsigned width,
                       std::vector<Value*> args);
  Value* bitcast(DType from, DType to, Value* v);

  // memory
  struct Access;
  void setup_alias_scopes();
  void tag_access(llvm::Instruction* access, const UOp& index);
  Value* buffer_base(const UOp& global);
  Value* register_base(const UOp& reg);
  Value* index(const UOp& u);
  Access access(const UOp& user, const UOp& index, DType value);
  void check_bounds(const UOp& index, const Access& a);
  Value* load(const UOp& load);
  void store(const UOp& store);
  bool streams(const UOp& store, const Access& a) const;
  unsigned piece_lanes(llvm::Type* type) const;
  Value* piece_mask(Value* mask, unsigned first, unsigned n, unsigned lanes);
  Value* masked_load(const Access& a, const UOp& index);
  void masked_store(Value* v, const Access& a, const UOp& index);
  void masked_pieces(Value* v, const Access& a, const UOp& index);
  std::vector<std::pair<unsigned, unsigned>> lane_pieces(unsigned lanes) const;
  Value* gather(const Access& a, Value* mask, const UOp& index);
  void scatter(Value* v, const Access& a, Value* mask, const UOp& index);
  Value* joined(Value* a, Value* b);
  template <class F>
  Value* guarded(Value* valid, F access, Value* otherwise);
};

Emitter::Emitter(llvm::Module& module, const LinearKernel& linear, const std::string& name,
                 const EmitOptions& options)
    : ctx_(module.getContext()),
      module_(module),
      linear_(linear),
      b_(module.getContext()),
      vars_(kernel_vars(linear.kernel)),
      check_bounds_(options.check_bounds),
      // Streaming stores need x86's sfence; elsewhere every store is cached.
      streaming_store_bytes_(!llvm::Triple(llvm::sys::getProcessTriple()).isX86() ? INT64_MAX
                             : options.streaming_store_bytes >= 0 ? options.streaming_store_bytes
                                                                  : options.target.l3_complex_bytes),
      register_bytes_(options.target.vector_bytes),
      isa_(options.target.isa),
      float_max_(options.target.exact_float_max()) {
  auto* ptr = llvm::PointerType::get(ctx_, 0);
  auto* i64 = b_.getInt64Ty();
  llvm::Type* result = check_bounds_ ? b_.getInt32Ty() : b_.getVoidTy();
  auto* type = llvm::FunctionType::get(result, {ptr, ptr, i64, i64}, false);
  fn_ = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, module_);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  for (unsigned i : {0u, 1u}) {  // bufs and vars: arrays the kernel only reads
    fn_->addParamAttr(i, llvm::Attribute::ReadOnly);
    fn_->addParamAttr(i, llvm::Attribute::NoCapture);
  }
  const char* names[] = {"bufs", "vars", "begin", "end"};
  for (unsigned i = 0; i < 4; ++i) fn_->getArg(i)->setName(names[i]);
  entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry_);
  setup_alias_scopes();
}

void Emitter::emit(bool omit_terminator) {
  for (const LinearInst& i : linear_.insts) inst(i);
  if (!loops_.empty()) throw Error("the linearized kernel leaves a loop open");
  if (omit_terminator) return;
  // Non-temporal stores are weakly ordered: fence them before the caller (or the
  // thread joining this slice) reads the buffer.
  if (streamed_) b_.CreateIntrinsic(llvm::Intrinsic::x86_sse_sfence, {}, {});
  if (check_bounds_)
    b_.CreateRet(b_.getInt32(0));
  else
    b_.CreateRetVoid();
}

void Emitter::inst(const LinearInst& i) {
  switch (i.kind) {
    case LinearKind::LoopBegin: return begin_loop(i.uop);
    case LinearKind::LoopEnd: return end_loop();
    case LinearKind::Store: return store(*i.uop);
    case LinearKind::Value: values_[i.uop.get()] = value(*i.uop); return;
  }
}

// ---- types and constants --------------------------------------------------------------
llvm::Type* Emitter::type_of(DType dt) {
  if (dt.ptr) return llvm::PointerType::get(ctx_, 0);
  if (dt.lanes > 1) return llvm::FixedVectorType::get(type_of(dt.base()), dt.lanes);
  switch (dt.scalar) {
    case Scalar::Bool: return b_.getInt1Ty();
    case Scalar::UInt8: return b_.getInt8Ty();
    case Scalar::Int32: return b_.getInt32Ty();
    case Scalar::Int64: return b_.getInt64Ty();
    case Scalar::Float32: return b_.getFloatTy();
    case Scalar::Float64: return b_.getDoubleTy();
    // Halves are their 16 bits: loads, stores and selects move them, and CAST
    // converts them (Emitter::half_to_f32, f32_to_half).
    case Scalar::BFloat16:
    case Scalar::Float16: return b_.getInt16Ty();
  }
  throw Error("unknown dtype " + to_string(dt));
}

// In buffers and registers a Bool is a byte (a vector of Bools, of bytes).
llvm::Type* Emitter::memory_type(DType dt) {
  const DType value = dt.deref();
  return value.is_bool() ? type_of(DType::UInt8.vec(value.lanes)) : type_of(value);
}

// A scalar constant, splat over dt's lanes.
llvm::Constant* Emitter::constant(DType dt, double f, int64_t i) {
  llvm::Type* t = type_of(dt);  // ConstantFP/ConstantInt::get splat over a vector type
  if (dt.scalar == Scalar::BFloat16) return llvm::ConstantInt::get(t, bfloat16(static_cast<float>(f)).bits);
  if (dt.scalar == Scalar::Float16) return llvm::ConstantInt::get(t, float16(static_cast<float>(f)).bits);
  if (dt.is_float()) return llvm::ConstantFP::get(t, f);
  if (dt.is_bool()) i = i != 0;
  return llvm::ConstantInt::get(t, llvm::APInt(64, static_cast<uint64_t>(i), true).trunc(dt.bits()));
}

Value* Emitter::get(const UOpPtr& u) {
  if (u->op == Op::CONST)
    return u->dtype.is_float() ? constant(u->dtype, u->const_value(), 0)
                               : constant(u->dtype, 0.0, u->const_int());
  const auto it = values_.find(u.get());
  if (it == values_.end()) throw Error(describe(*u) + " is used before it is computed");
  return it->second;
}

// Index arithmetic is i64; an index of a narrower integer type is widened by its signedness.
Value* Emitter::to_i64(const UOpPtr& u) {
  if (!u->dtype.is_int() && !u->dtype.is_bool())
    throw Error(fmt::format("an index or loop bound must be an integer, got {}", describe(*u)));
  return cast(u->dtype, DType::Int64, get(u));
}

// ---- loops and accumulators -----------------------------------------------------------
// Canonical counted loop: header { i = phi [lo, pre], [i+1, latch]; i < hi ? body : exit }.
// LLVM's loop rotation and vectoriser take it from there.
void Emitter::begin_loop(const UOpPtr& range) {
  const AxisArg& axis = range->get<AxisArg>();
  const bool parallel = axis.kind == AxisKind::Parallel;
  Value* lo = parallel ? static_cast<Value*>(fn_->getArg(2)) : b_.getInt64(0);
  Value* hi = parallel ? fn_->getArg(3) : to_i64(range->src.at(0));
  const std::string tag = fmt::format("r{}", axis.id);
  auto* header = llvm::BasicBlock::Create(ctx_, tag + ".head", fn_);
  auto* body = llvm::BasicBlock::Create(ctx_, tag + ".body", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, tag + ".exit", fn_);
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* counter = b_.CreatePHI(b_.getInt64Ty(), 2, tag);
  counter->addIncoming(lo, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(counter, hi), body, exit);
  b_.SetInsertPoint(body);
  values_[range.get()] = counter;
  loops_.push_back({counter, header, exit});
}

void Emitter::end_loop() {
  const OpenLoop loop = loops_.back();
  loops_.pop_back();
  // counter < hi <= INT64_MAX, so counter + 1 cannot overflow.
  Value* next = b_.CreateAdd(loop.counter, b_.getInt64(1), "", /*HasNUW=*/false, /*HasNSW=*/true);
  loop.counter->addIncoming(next, b_.GetInsertBlock());
  b_.CreateBr(loop.header);
  b_.SetInsertPoint(loop.exit);
}

// ---- values -------------------------------------------------------------------------------
Value* Emitter::value(const UOp& u) {
  switch (u.op) {
    case Op::DEFINE_GLOBAL: return buffer_base(u);
    case Op::DEFINE_VAR: {
      const size_t i = static_cast<size_t>(
          std::find_if(vars_.begin(), vars_.end(), [&](const UOpPtr& v) { return v.get() == &u; }) -
          vars_.begin());
      Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), fn_->getArg(1), i);
      return b_.CreateAlignedLoad(b_.getInt64Ty(), slot, llvm::Align(8), u.get<VarArg>().name);
    }
    case Op::DEFINE_REG: return register_base(u);
    case Op::AFTER: return get(u.src.at(0));  // the order is the linearizer's; the value is the source's
    case Op::INDEX: return index(u);
    case Op::LOAD: return load(u);
    case Op::VECTORIZE: return vectorize(u);
    case Op::GEP: return lane_select(u);
    case Op::CAST: refuse_unlowered(u, float_max_); return cast(u.src.at(0)->dtype, u.dtype, get(u.src[0]));
    case Op::BITCAST: return bitcast(u.src.at(0)->dtype, u.dtype, get(u.src[0]));
    case Op::DOT2: return dot2(u);
    default:
      if (is_alu(u.op)) return alu(u);
  }
  throw Error(describe(u) + " is not supported by the LLVM emitter");
}

// DOT2 (docs/kernel-ir.md): c + a[2i+1] b[2i+1], then + a[2i] b[2i], each step one fused
// multiply-add. Where a and b are bfloat16 values widened and the Target has AVX512_BF16,
// one vdpbf16ps, which adds in that order (a product of two bfloat16s is exact in float32,
// each add rounds to nearest even) and reads and writes float32 subnormals as 0.
Value* Emitter::dot2(const UOp& u) {
  const unsigned n = u.dtype.lanes;
  auto bf16_of = [](const UOpPtr& x) -> const UOpPtr* {
    return x->op == Op::CAST && x->src.at(0)->dtype.scalar == Scalar::BFloat16 ? &x->src[0] : nullptr;
  };
  const UOpPtr *a = bf16_of(u.src.at(0)), *b = bf16_of(u.src.at(1));
  const bool wide = n == 16 || (isa_.avx512vl && (n == 8 || n == 4));
  if (isa_.avx512bf16 && a && b && wide) {
    const llvm::Intrinsic::ID id = n == 16  ? llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512
                                   : n == 8 ? llvm::Intrinsic::x86_avx512bf16_dpbf16ps_256
                                            : llvm::Intrinsic::x86_avx512bf16_dpbf16ps_128;
    llvm::Type* pairs = llvm::FixedVectorType::get(b_.getBFloatTy(), 2 * n);
    return b_.CreateIntrinsic(
        id, {}, {get(u.src.at(2)), b_.CreateBitCast(get(*a), pairs), b_.CreateBitCast(get(*b), pairs)});
  }
  const PairLanes halves = pair_lanes(static_cast<int64_t>(n));
  const std::vector<int> odd(halves.odd.begin(), halves.odd.end()),
      even(halves.even.begin(), halves.even.end());
  Value* x = get(u.src.at(0));
  Value* y = get(u.src.at(1));
  auto lanes = [&](Value* v, const std::vector<int>& at) -> Value* {
    return n == 1 ? b_.CreateExtractElement(v, static_cast<uint64_t>(at[0])) : b_.CreateShuffleVector(v, at);
  };
  Value* odd_sum = b_.CreateIntrinsic(llvm::Intrinsic::fma, {get(u.src[2])->getType()},
                                      {lanes(x, odd), lanes(y, odd), get(u.src[2])});
  return b_.CreateIntrinsic(llvm::Intrinsic::fma, {odd_sum->getType()},
                            {lanes(x, even), lanes(y, even), odd_sum});
}

Value* Emitter::alu(const UOp& u) {
  check_operands(u);
  refuse_unlowered(u, float_max_);
  auto arg = [&](size_t i) { return get(u.src.at(i)); };
  if (is_comparison(u.op)) return compare(u.op, u.src[0]->dtype, arg(0), arg(1));
  if (is_binary(u.op)) return binary(u.op, u.dtype, arg(0), arg(1));
  if (u.op == Op::WHERE) return b_.CreateSelect(arg(0), arg(1), arg(2));
  if (u.op == Op::MULACC && u.dtype.is_float())  // may fuse (docs/kernel-ir.md): one FMA where the CPU has it
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {arg(0)->getType()}, {arg(0), arg(1), arg(2)});
  if (u.op == Op::MULACC) return binary(Op::ADD, u.dtype, binary(Op::MUL, u.dtype, arg(0), arg(1)), arg(2));
  Value* x = arg(0);
  if (u.op == Op::TRUNC && !u.dtype.is_float()) return x;              // integers are whole already
  if (u.op == Op::NEG && !u.dtype.is_float()) return b_.CreateNeg(x);  // wraps
  if (!u.dtype.is_float()) throw Error(describe(u) + ": this op needs a float operand");
  switch (u.op) {
    case Op::NEG: return b_.CreateFNeg(x);
    case Op::EXP: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp, x);
    case Op::EXP2: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp2, x);
    case Op::LOG2: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::log2, x);
    case Op::SIN: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sin, x);
    case Op::COS: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::cos, x);
    case Op::SQRT: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
    case Op::RECIP: return b_.CreateFDiv(constant(u.dtype, 1.0, 1), x);
    case Op::TRUNC: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, x);
    default: break;
  }
  throw Error(describe(u) + " is not an ALU op the LLVM emitter knows");
}

Value* Emitter::binary(Op op, DType dt, Value* a, Value* b) {
  const auto unsupported = [&] {
    return Error(fmt::format("{} is not defined on {} operands", op_name(op), to_string(dt)));
  };
  if (dt.is_float()) {
    switch (op) {
      case Op::ADD: return b_.CreateFAdd(a, b);
      case Op::SUB: return b_.CreateFSub(a, b);
      case Op::MUL: return b_.CreateFMul(a, b);
      case Op::FDIV: return b_.CreateFDiv(a, b);
      case Op::POW: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, a, b);
      case Op::LDEXP: return ldexp(dt, a, b);
      case Op::MAX:
        if (float_max_ && dt.scalar == Scalar::Float32) return maximum(dt, a, b);
        throw unsupported();
      default: throw unsupported();
    }
  }
  switch (op) {
    case Op::AND: return b_.CreateAnd(a, b);
    case Op::OR: return b_.CreateOr(a, b);
    case Op::XOR: return b_.CreateXor(a, b);
    case Op::MAX:
      return b_.CreateBinaryIntrinsic(dt.is_unsigned() ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, a, b);
    default: break;
  }
  switch (op) {
    case Op::ADD: return b_.CreateAdd(a, b);  // no nsw/nuw: integers (and bools, at 1 bit) wrap
    case Op::SUB: return b_.CreateSub(a, b);
    case Op::MUL: return b_.CreateMul(a, b);
    // Defined on every value they see: lower_numerics guarded their operands.
    case Op::IDIV: return dt.is_unsigned() ? b_.CreateUDiv(a, b) : b_.CreateSDiv(a, b);
    case Op::MOD: return dt.is_unsigned() ? b_.CreateURem(a, b) : b_.CreateSRem(a, b);
    case Op::SHL: return b_.CreateShl(a, b);
    case Op::SHR: return dt.is_unsigned() ? b_.CreateLShr(a, b) : b_.CreateAShr(a, b);
    default: throw unsupported();
  }
}

// Float CMPLT/CMPEQ are ordered (false with NaN), CMPNE unordered (true with NaN);
// UInt8 and Bool compare unsigned.
Value* Emitter::compare(Op op, DType dt, Value* a, Value* b) {
  if (dt.is_float()) {
    if (op == Op::CMPLT) return b_.CreateFCmpOLT(a, b);
    return op == Op::CMPEQ ? b_.CreateFCmpOEQ(a, b) : b_.CreateFCmpUNE(a, b);
  }
  if (op == Op::CMPLT) return dt.is_unsigned() ? b_.CreateICmpULT(a, b) : b_.CreateICmpSLT(a, b);
  return op == Op::CMPEQ ? b_.CreateICmpEQ(a, b) : b_.CreateICmpNE(a, b);
}

// docs/kernel-ir.md CAST: float->int truncates (lower_numerics saturated it and sent
// NaN to 0, so the value is in range); int->int wraps when narrowing and extends by
// the source's signedness; anything->bool is != 0.
Value* Emitter::cast(DType from, DType to, Value* v) {
  llvm::Type* target = type_of(to);
  if (from == to) return v;
  // half_widening left only Float32 <-> half casts (any other goes through Float32).
  if (from.is_half() && to.base() == DType::Float32) return half_to_f32(from, v);
  if (to.is_half() && from.base() == DType::Float32) return f32_to_half(to, v);
  if (from.is_half() || to.is_half())
    throw Error(
        fmt::format("CAST {} to {}: a half converts only to and from f32 here; half_widening "
                    "(codegen/half_widening.cpp) must run first",
                    to_string(from), to_string(to)));
  if (to.is_bool()) return from.is_float() ? b_.CreateFCmpUNE(v, zero(from)) : b_.CreateICmpNE(v, zero(from));
  if (from.is_float() && to.is_float()) return b_.CreateFPCast(v, target);
  if (from.is_float()) return to.is_unsigned() ? b_.CreateFPToUI(v, target) : b_.CreateFPToSI(v, target);
  if (to.is_float()) return from.is_unsigned() ? b_.CreateUIToFP(v, target) : b_.CreateSIToFP(v, target);
  return from.is_unsigned() ? b_.CreateZExtOrTrunc(v, target) : b_.CreateSExtOrTrunc(v, target);
}

// The conversions of docs/semantics.md ("Half-precision dtypes"): by the
// Target's instructions where it has them (F16C's for float16, AVX512_BF16's
// for float32 -> bfloat16), else by integer arithmetic, lane-wise (LLVM's fptrunc
// to bfloat or half is a libm call on x86 without them). Both give the same bits
// (tests/codegen/test_half_widening.cpp checks every float32 at each preset);
// include/loom/half.hpp states the same rules in C++ for the API's values.
Value* Emitter::half_to_f32(DType from, Value* v) {
  const unsigned lanes = from.lanes;
  auto i32 = [&](uint32_t c) -> Value* {
    return constant(DType::Int32.vec(lanes), 0, static_cast<int32_t>(c));
  };
  llvm::Type* f32 = type_of(DType::Float32.vec(lanes));
  // vcvtph2ps: exact, a NaN quieted. Fenced: LLVM would narrow an op on two widened
  // halves (a compare, a select) back to half, which x86 then does lane by lane.
  if (from.scalar == Scalar::Float16 && isa_.f16c) {
    llvm::Type* half = b_.getHalfTy();
    Value* x = b_.CreateBitCast(v, lanes > 1 ? llvm::FixedVectorType::get(half, lanes) : half);
    return b_.CreateArithmeticFence(b_.CreateFPExt(x, f32), f32);
  }
  Value* h = b_.CreateZExt(v, type_of(DType::Int32.vec(lanes)));
  if (from.scalar == Scalar::BFloat16) return b_.CreateBitCast(b_.CreateShl(h, i32(16)), f32);  // exact
  Value* sign = b_.CreateShl(b_.CreateAnd(h, i32(0x8000)), i32(16));
  Value* e = b_.CreateAnd(b_.CreateLShr(h, i32(10)), i32(0x1f));
  Value* m = b_.CreateAnd(h, i32(0x3ff));
  Value* normal = b_.CreateOr(b_.CreateShl(b_.CreateAdd(e, i32(112)), i32(23)), b_.CreateShl(m, i32(13)));
  Value* quiet = b_.CreateSelect(b_.CreateICmpNE(m, i32(0)), i32(0x400000), i32(0));
  Value* special = b_.CreateOr(b_.CreateOr(i32(0x7f800000), b_.CreateShl(m, i32(13))), quiet);
  // A subnormal m 2^-24: exact in float (m < 2^10), so the conversion and the scaling do not round.
  Value* tiny = b_.CreateBitCast(b_.CreateFMul(b_.CreateUIToFP(m, f32), llvm::ConstantFP::get(f32, 0x1p-24)),
                                 type_of(DType::Int32.vec(lanes)));
  Value* mag = b_.CreateSelect(b_.CreateICmpEQ(e, i32(0)), tiny,
                               b_.CreateSelect(b_.CreateICmpEQ(e, i32(0x1f)), special, normal));
  return b_.CreateBitCast(b_.CreateOr(sign, mag), f32);
}

// |f| < 2^-14 (bits `a`) as a Float16 subnormal: the count of 2^-24, rounded to nearest even.
Value* Emitter::f32_to_f16_subnormal(Value* a) {
  const unsigned lanes = llvm::isa<llvm::VectorType>(a->getType())
                             ? llvm::cast<llvm::FixedVectorType>(a->getType())->getNumElements()
                             : 1;
  auto i32 = [&](uint32_t c) -> Value* {
    return constant(DType::Int32.vec(lanes), 0, static_cast<int32_t>(c));
  };
  Value* is_normal32 = b_.CreateICmpUGE(a, i32(0x800000));
  Value* m = b_.CreateOr(b_.CreateAnd(a, i32(0x7fffff)), b_.CreateSelect(is_normal32, i32(0x800000), i32(0)));
  Value* e = b_.CreateSelect(is_normal32, b_.CreateLShr(a, i32(23)), i32(1));
  Value* s = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, b_.CreateSub(i32(126), e), i32(31));
  Value* q = b_.CreateLShr(m, s);
  Value* rem = b_.CreateAnd(m, b_.CreateSub(b_.CreateShl(i32(1), s), i32(1)));
  Value* half = b_.CreateShl(i32(1), b_.CreateSub(s, i32(1)));
  Value* up =
      b_.CreateOr(b_.CreateICmpUGT(rem, half),
                  b_.CreateAnd(b_.CreateICmpEQ(rem, half), b_.CreateICmpNE(b_.CreateAnd(q, i32(1)), i32(0))));
  return b_.CreateAdd(q, b_.CreateZExt(up, q->getType()));
}

// vcvtneps2bf16 rounds to nearest even and quiets a NaN as the integer formula
// does, but reads a float32 subnormal as 0. With the exponent's lowest bit set,
// such a value rounds exactly as the formula rounds it (the same low 16 bits),
// 0x80 (that bit) higher.
Value* Emitter::f32_to_bf16_vcvtneps2bf16(Value* v, unsigned lanes) {
  auto i32 = [&](uint32_t c) -> Value* {
    return constant(DType::Int32.vec(lanes), 0, static_cast<int32_t>(c));
  };
  auto i16 = [&](uint16_t c) -> Value* {
    return llvm::ConstantInt::get(type_of(DType::BFloat16.vec(lanes)), c);
  };
  Value* w = b_.CreateBitCast(v, type_of(DType::Int32.vec(lanes)));
  Value* tiny = b_.CreateICmpEQ(b_.CreateAnd(w, i32(0x7f800000)), i32(0));
  Value* in = b_.CreateBitCast(b_.CreateSelect(tiny, b_.CreateOr(w, i32(0x800000)), w), v->getType());
  llvm::Type* bf16 = b_.getBFloatTy();
  Value* r =
      b_.CreateBitCast(b_.CreateFPTrunc(in, lanes > 1 ? llvm::FixedVectorType::get(bf16, lanes) : bf16),
                       type_of(DType::BFloat16.vec(lanes)));
  return b_.CreateSub(r, b_.CreateSelect(tiny, i16(0x80), i16(0)));
}

// vcvtps2ph with its rounding in the immediate (0: to nearest even, whatever
// MXCSR says), 16, 8 or 4 lanes an instruction. The intrinsic rather than
// fptrunc: LLVM folds fptrunc(fpext x) to x, which would keep a signalling NaN
// that the conversion quiets.
Value* Emitter::f32_to_f16_vcvtps2ph(Value* v, unsigned lanes) {
  const unsigned width = isa_.avx512f && lanes >= 16 ? 16 : lanes >= 8 ? 8 : 4;
  const llvm::Intrinsic::ID id = width == 16  ? llvm::Intrinsic::x86_avx512_mask_vcvtps2ph_512
                                 : width == 8 ? llvm::Intrinsic::x86_vcvtps2ph_256
                                              : llvm::Intrinsic::x86_vcvtps2ph_128;
  return in_chunks({v}, lanes, width, [&](const std::vector<Value*>& chunk) {
    std::vector<Value*> args{chunk[0], b_.getInt32(0)};
    if (width == 16)
      args.insert(args.end(),
                  {llvm::ConstantAggregateZero::get(type_of(DType::Float16.vec(16))), b_.getInt16(0xffff)});
    Value* bits = b_.CreateIntrinsic(id, {}, args);
    return width == 4 ? lanes_of(bits, 0, 4) : bits;  // the 128-bit form zeroes lanes 4 to 7
  });
}

// Lanes [first, first + count) of x; lanes past x's own read zeros.
Value* Emitter::lanes_of(Value* x, unsigned first, unsigned count) {
  llvm::SmallVector<int, 16> idx;
  for (unsigned k = 0; k < count; ++k) idx.push_back(static_cast<int>(first + k));
  return b_.CreateShuffleVector(x, llvm::ConstantAggregateZero::get(x->getType()), idx);
}

// `op` applied to chunks of `width` lanes of the `lanes`-lane values `in` (a scalar is
// lane 0 of a chunk; past the values' lanes the chunks read zeros), its results joined
// back into `lanes` lanes: an instruction of one register width over a value of any width.
Value* Emitter::in_chunks(const std::vector<Value*>& in, unsigned lanes, unsigned width,
                          const std::function<Value*(const std::vector<Value*>&)>& op) {
  std::vector<Value*> values = in;
  if (lanes == 1)
    for (Value*& v : values)
      v = b_.CreateInsertElement(
          llvm::ConstantAggregateZero::get(llvm::FixedVectorType::get(v->getType(), width)), v, uint64_t{0});
  const unsigned padded = (lanes + width - 1) / width * width;
  std::vector<Value*> parts;
  for (unsigned first = 0; first < padded; first += width) {
    std::vector<Value*> chunk;
    for (Value* v : values) chunk.push_back(lanes_of(v, first, width));
    parts.push_back(op(chunk));
  }
  while (parts.size() > 1) {  // concatenated pairwise
    if (parts.size() % 2) parts.push_back(llvm::ConstantAggregateZero::get(parts.back()->getType()));
    std::vector<Value*> joined;
    for (size_t k = 0; k < parts.size(); k += 2) {
      const auto n = llvm::cast<llvm::FixedVectorType>(parts[k]->getType())->getNumElements();
      llvm::SmallVector<int, 64> idx;
      for (unsigned e = 0; e < 2 * n; ++e) idx.push_back(static_cast<int>(e));
      joined.push_back(b_.CreateShuffleVector(parts[k], parts[k + 1], idx));
    }
    parts = std::move(joined);
  }
  return lanes == 1 ? b_.CreateExtractElement(parts[0], uint64_t{0}) : lanes_of(parts[0], 0, lanes);
}

// LDEXP (docs/kernel-ir.md): x * 2^n for a whole n, rounded once. AVX-512's vscalefps
// is that in one instruction; elsewhere 2^n is made in the exponent bits as two normal
// halves, so a result near overflow or in the subnormal range still rounds once (n in
// [-252, 254]; every n exp's forms make is).
Value* Emitter::ldexp(DType dt, Value* x, Value* n) {
  const unsigned lanes = dt.lanes;
  if (dt.scalar != Scalar::Float32)
    throw Error(fmt::format("LDEXP is defined on f32 operands, not {}", to_string(dt)));
  const unsigned width = f32_chunk_lanes(lanes);
  if (isa_.avx512f && (width == 16 || isa_.avx512vl))
    return in_chunks({x, n}, lanes, width, [&](const std::vector<Value*>& chunk) {
      return avx512_masked(
          {llvm::Intrinsic::x86_avx512_mask_scalef_ps_512, llvm::Intrinsic::x86_avx512_mask_scalef_ps_256,
           llvm::Intrinsic::x86_avx512_mask_scalef_ps_128},
          width, {chunk[0], chunk[1], llvm::ConstantAggregateZero::get(chunk[0]->getType())});
    });
  const DType int_dt = DType::Int32.vec(lanes);
  auto i32 = [&](int32_t c) -> Value* { return constant(int_dt, 0, c); };
  auto pow2 = [&](Value* k) {  // 2^k for k in [-126, 127]: the biased exponent in place
    return b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(k, i32(127)), i32(23)), x->getType());
  };
  // n to an integer by the bits of n + 1.5 * 2^23 (exact for whole |n| < 2^22): unlike
  // fptosi, defined for a NaN n, whose x is NaN too.
  Value* shifted = b_.CreateFAdd(n, llvm::ConstantFP::get(x->getType(), 0x1.8p23));
  Value* k = b_.CreateSub(b_.CreateBitCast(shifted, type_of(int_dt)), i32(0x4B400000));
  Value* half = b_.CreateAShr(k, i32(1));
  return b_.CreateFMul(b_.CreateFMul(x, pow2(half)), pow2(b_.CreateSub(k, half)));
}

// Float32 MAX (docs/kernel-ir.md: NaN propagates, -0 below +0) where the Target has
// exact_float_max, with numeric_lowering's bits: vrangeps with imm 0b0101 (the larger, its
// sign from the comparison) orders the zeros but passes over a NaN, so two vfixupimmps put
// a's NaN and then b's in its place (their table answers "the operand itself" for a quiet
// or signalling NaN, "keep" otherwise). Three instructions where the selects are six.
Value* Emitter::maximum(DType dt, Value* a, Value* b) {
  const unsigned lanes = dt.lanes, width = f32_chunk_lanes(lanes);
  Value* nan_is_itself = constant(DType::Int32.vec(static_cast<int>(width)), 0, 0x11);
  return in_chunks({a, b}, lanes, width, [&](const std::vector<Value*>& x) {
    Value* larger = avx512_masked(
        {llvm::Intrinsic::x86_avx512_mask_range_ps_512, llvm::Intrinsic::x86_avx512_mask_range_ps_256,
         llvm::Intrinsic::x86_avx512_mask_range_ps_128},
        width, {x[0], x[1], b_.getInt32(0b0101), llvm::ConstantAggregateZero::get(x[0]->getType())});
    for (Value* operand : {x[0], x[1]})
      larger = avx512_masked(
          {llvm::Intrinsic::x86_avx512_mask_fixupimm_ps_512, llvm::Intrinsic::x86_avx512_mask_fixupimm_ps_256,
           llvm::Intrinsic::x86_avx512_mask_fixupimm_ps_128},
          width, {larger, operand, nan_is_itself, b_.getInt32(0)});
    return larger;
  });
}

// A chunk of Float32 lanes for one AVX-512 instruction: a zmm, ymm or xmm register.
unsigned Emitter::f32_chunk_lanes(unsigned lanes) { return lanes >= 16 ? 16 : lanes > 4 ? 8 : 4; }

// An AVX-512 "mask" intrinsic over `width` Float32 lanes, picked from its 512-, 256- and
// 128-bit forms, with `args` then every lane enabled and, at 512 bits, the current rounding.
Value* Emitter::avx512_masked(const std::array<llvm::Intrinsic::ID, 3>& by_width, unsigned width,
                              std::vector<Value*> args) {
  args.push_back(b_.getIntN(width == 16 ? 16 : 8, (1u << width) - 1));
  if (width == 16) args.push_back(b_.getInt32(4));
  return b_.CreateIntrinsic(by_width[width == 16 ? 0 : width == 8 ? 1 : 2], {}, args);
}

Value* Emitter::f32_to_half(DType to, Value* v) {
  const unsigned lanes = to.lanes;
  if (to.scalar == Scalar::Float16 && isa_.f16c) return f32_to_f16_vcvtps2ph(v, lanes);
  if (to.scalar == Scalar::BFloat16 && isa_.avx512bf16 && isa_.avx512vl)
    return f32_to_bf16_vcvtneps2bf16(v, lanes);
  auto i32 = [&](uint32_t c) -> Value* {
    return constant(DType::Int32.vec(lanes), 0, static_cast<int32_t>(c));
  };
  llvm::Type* i16 = type_of(to);
  Value* w = b_.CreateBitCast(v, type_of(DType::Int32.vec(lanes)));
  Value* a = b_.CreateAnd(w, i32(0x7fffffff));
  Value* nan = b_.CreateICmpUGT(a, i32(0x7f800000));
  if (to.scalar == Scalar::BFloat16) {
    // Add just under half the dropped bits' weight, plus 1 when the kept part is odd.
    Value* odd = b_.CreateAnd(b_.CreateLShr(w, i32(16)), i32(1));
    Value* rounded = b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(w, i32(0x7fff)), odd), i32(16));
    Value* quiet = b_.CreateOr(b_.CreateLShr(w, i32(16)), i32(0x40));
    return b_.CreateTrunc(b_.CreateSelect(nan, quiet, rounded), i16);
  }
  Value* sign = b_.CreateAnd(b_.CreateLShr(w, i32(16)), i32(0x8000));
  Value* quiet = b_.CreateOr(i32(0x7e00), b_.CreateAnd(b_.CreateLShr(a, i32(13)), i32(0x3ff)));
  Value* odd = b_.CreateAnd(b_.CreateLShr(a, i32(13)), i32(1));
  Value* normal = b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(a, i32(0xfff - 0x38000000)), odd), i32(13));
  Value* mag = b_.CreateSelect(
      nan, quiet,
      b_.CreateSelect(
          b_.CreateICmpUGE(a, i32(0x477ff000)), i32(0x7c00),  // 65520 and up: inf
          b_.CreateSelect(b_.CreateICmpUGE(a, i32(0x38800000)), normal, f32_to_f16_subnormal(a))));
  return b_.CreateTrunc(b_.CreateOr(sign, mag), i16);
}

Value* Emitter::bitcast(DType from, DType to, Value* v) {
  if (from == to) return v;
  if (from.itemsize() != to.itemsize())
    throw Error(fmt::format("BITCAST {} to {}: sizes differ", to_string(from), to_string(to)));
  // A bool is a byte whose low bit is the value (as when loaded from memory).
  if (from.is_bool() || to.is_bool()) return b_.CreateZExtOrTrunc(v, type_of(to));
  return b_.CreateBitCast(v, type_of(to));
}

// ---- memory ---------------------------------------------------------------------------------
// Each slot is a distinct buffer (the engine guarantees it), so accesses to
// different slots never alias; telling LLVM lets it vectorise without run-time
// overlap checks. Accesses to one slot share a scope and stay ordered.
void Emitter::setup_alias_scopes() {
  std::vector<int64_t> slots;
  for (const auto& n : toposort(linear_.kernel))
    if (n->op == Op::DEFINE_GLOBAL) slots.push_back(n->arg_int());
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  if (slots.size() < 2) return;
  llvm::MDBuilder md(ctx_);
  llvm::MDNode* domain = md.createAnonymousAliasScopeDomain("loom.slots");
  for (int64_t s : slots) slot_scopes_[s] = md.createAnonymousAliasScope(domain, fmt::format("slot {}", s));
}

void Emitter::tag_access(llvm::Instruction* access, const UOp& index) {
  const UOp& buffer = buffer_of(index);
  if (slot_scopes_.empty() || buffer.op != Op::DEFINE_GLOBAL) return;
  const int64_t slot = buffer.arg_int();
  std::vector<llvm::Metadata*> others;
  for (const auto& [s, scope] : slot_scopes_)
    if (s != slot) others.push_back(scope);
  access->setMetadata(llvm::LLVMContext::MD_alias_scope, llvm::MDNode::get(ctx_, {slot_scopes_.at(slot)}));
  access->setMetadata(llvm::LLVMContext::MD_noalias, llvm::MDNode::get(ctx_, others));
}

// bufs[slot], aligned to kKernelAbiAlignment (64 bytes) by the ABI.
Value* Emitter::buffer_base(const UOp& global) {
  const int64_t slot = global.arg_int();
  if (slot < 0) throw Error(fmt::format("{}: negative buffer slot {}", describe(global), slot));
  auto* ptr = llvm::PointerType::get(ctx_, 0);
  Value* at = b_.CreateConstInBoundsGEP1_64(ptr, fn_->getArg(0), static_cast<uint64_t>(slot));
  llvm::LoadInst* base = b_.CreateAlignedLoad(ptr, at, llvm::Align(8), fmt::format("buf{}", slot));
  base->setMetadata(
      llvm::LLVMContext::MD_align,
      llvm::MDNode::get(ctx_, {llvm::ConstantAsMetadata::get(b_.getInt64(kKernelAbiAlignment))}));
  base->setMetadata(llvm::LLVMContext::MD_noundef, llvm::MDNode::get(ctx_, {}));
  return base;
}

// An accumulator register: stack memory in the entry block (mem2reg keeps it in registers).
Value* Emitter::register_base(const UOp& reg) {
  const auto& arg = reg.get<std::vector<int64_t>>();
  if (arg.size() != 2 || arg[1] < 1 || !reg.dtype.ptr)
    throw Error(fmt::format("{}: arg must be (id size) with size >= 1", describe(reg)));
  llvm::IRBuilder<> at_entry(entry_, entry_->begin());
  return at_entry.CreateAlloca(memory_type(reg.dtype), b_.getInt64(static_cast<uint64_t>(arg[1])),
                               fmt::format("reg{}", arg[0]));
}

// `access` runs only where `valid` holds (a branch, so an invalid index never
// touches memory); elsewhere the result is `otherwise` (nullptr for stores).
template <class F>
Value* Emitter::guarded(Value* valid, F access, Value* otherwise) {
  if (!valid) return access();
  llvm::BasicBlock* from = b_.GetInsertBlock();
  auto* then = llvm::BasicBlock::Create(ctx_, "valid", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "valid.done", fn_);
  b_.CreateCondBr(valid, then, done);
  b_.SetInsertPoint(then);
  Value* result = access();
  llvm::BasicBlock* then_end = b_.GetInsertBlock();
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  if (!otherwise) return nullptr;
  llvm::PHINode* phi = b_.CreatePHI(otherwise->getType(), 2);
  phi->addIncoming(result, then_end);
  phi->addIncoming(otherwise, from);
  return phi;
}

// ---- loads and stores: every access of the kernel goes through access() --------------
// What an INDEX addresses, for a value of `value`'s dtype: one element, `lanes`
// consecutive elements from `ptr`, or a gather/scatter through a vector of
// pointers; `mask` is the per-lane validity (null: all valid), `guard` a
// whole-access one (null: none).
struct Emitter::Access {
  enum Kind { Element, Contiguous, Lanes } kind;
  Value* ptr;
  Value* guard;
  Value* mask;
  llvm::Type* type;  // the value's type in memory
  llvm::Align align;
};

Value* Emitter::index(const UOp& u) {
  const UOp& buffer = buffer_of(u);
  if ((buffer.op != Op::DEFINE_GLOBAL && buffer.op != Op::DEFINE_REG) || !u.dtype.ptr ||
      buffer.dtype.scalar != u.dtype.scalar || u.dtype.lanes % buffer.dtype.lanes != 0)
    throw Error(fmt::format("{} must index a DEFINE_GLOBAL or DEFINE_REG of its element type, got {}",
                            describe(u), describe(buffer)));
  const bool masked = u.src.size() > 2;
  const DType idx = u.src.at(1)->dtype;
  if (masked && !(u.src[2]->dtype.base() == DType::Bool &&
                  (u.src[2]->dtype.lanes == 1 || u.src[2]->dtype.lanes == u.dtype.lanes)))
    throw Error(fmt::format("{}: validity must be bool or one bool per lane, got {}", describe(u),
                            to_string(u.src[2]->dtype)));
  if (idx.lanes != 1 && (idx.lanes != u.dtype.lanes || buffer.dtype.lanes != 1))
    throw Error(fmt::format("{}: a vector index needs one lane per lane accessed, got {}", describe(u),
                            to_string(idx)));
  Value* base = get(u.src[0]);
  Value* at = cast(idx, DType::Int64.vec(idx.lanes), get(u.src[1]));
  llvm::Type* element = memory_type(buffer.dtype);
  // An invalid (masked) index may point anywhere; it is never dereferenced.
  return masked ? b_.CreateGEP(element, base, at) : b_.CreateInBoundsGEP(element, base, at);
}

// `user` is the LOAD or STORE, for the error messages.
Emitter::Access Emitter::access(const UOp& user, const UOp& index, DType value) {
  if (index.op != Op::INDEX || !(index.dtype.deref() == value))
    throw Error(fmt::format("{} of a {} value needs an INDEX of that dtype, got {}", describe(user),
                            to_string(value), describe(index)));
  const UOp& buffer = buffer_of(index);
  const bool gather = index.src.at(1)->dtype.lanes > 1;
  const bool element = index.dtype.lanes == buffer.dtype.lanes;
  const UOp* valid = index.src.size() > 2 ? index.src[2].get() : nullptr;
  const bool per_lane = valid && valid->dtype.lanes > 1;
  const auto it = values_.find(&index);
  if (it == values_.end()) throw Error(describe(index) + " is used before it is computed");
  Access a{element  ? Access::Element
           : gather ? Access::Lanes
                    : Access::Contiguous,
           it->second,
           valid && !per_lane ? get(index.src[2]) : nullptr,
           per_lane ? get(index.src[2]) : nullptr,
           memory_type(value),
           llvm::Align(static_cast<uint64_t>(buffer.dtype.itemsize()))};
  if (a.kind == Access::Element && buffer.op == Op::DEFINE_REG)
    a.align = module_.getDataLayout().getPrefTypeAlign(a.type);
  if (a.mask && a.kind == Access::Element)
    throw Error(describe(index) + ": a per-lane validity needs a vector access");
  return a;
}

// LOOM_CHECK_BOUNDS (docs/kernel-ir.md, "The function ABI"): unless every lane
// the access touches (each lane of a gather, idx .. idx + lanes - 1 of a
// contiguous vector, masked-off lanes excepted) lies in [0, vars[variables +
// slot]), the buffer's element count, the kernel returns 1 + slot before
// touching memory. Called where the access runs, so a guarded-off index is never
// checked. Accumulator registers are the kernel's own and are not checked.
void Emitter::check_bounds(const UOp& index, const Access& a) {
  const UOp& buffer = buffer_of(index);
  if (!check_bounds_ || buffer.op != Op::DEFINE_GLOBAL) return;
  const int64_t slot = buffer.arg_int();
  auto* i64 = b_.getInt64Ty();
  Value* at = b_.CreateConstInBoundsGEP1_64(i64, fn_->getArg(1), vars_.size() + static_cast<uint64_t>(slot));
  Value* size = b_.CreateAlignedLoad(i64, at, llvm::Align(8), fmt::format("size{}", slot));
  const DType idx = index.src.at(1)->dtype;
  const unsigned lanes = a.kind == Access::Element ? 1 : index.dtype.lanes;
  Value* element = cast(idx, DType::Int64.vec(idx.lanes), get(index.src[1]));
  if (lanes > 1) {
    if (idx.lanes == 1) {  // contiguous: idx + 0, idx + 1, ...
      std::vector<llvm::Constant*> step;
      for (unsigned l = 0; l < lanes; ++l) step.push_back(b_.getInt64(l));
      element = b_.CreateAdd(b_.CreateVectorSplat(lanes, element), llvm::ConstantVector::get(step));
    }
    size = b_.CreateVectorSplat(lanes, size);
  }
  Value* inside = b_.CreateICmpULT(element, size);  // unsigned: a negative index is huge
  if (a.mask) inside = b_.CreateOr(inside, b_.CreateNot(a.mask));
  if (lanes > 1) inside = b_.CreateAndReduce(inside);
  llvm::BasicBlock*& fail = out_of_bounds_[slot];
  if (!fail) {
    fail = llvm::BasicBlock::Create(ctx_, fmt::format("out_of_bounds{}", slot), fn_);
    llvm::IRBuilder<>(fail).CreateRet(b_.getInt32(static_cast<uint32_t>(slot + 1)));
  }
  auto* ok = llvm::BasicBlock::Create(ctx_, "in_bounds", fn_);
  b_.CreateCondBr(inside, ok, fail);
  b_.SetInsertPoint(ok);
}

Value* Emitter::load(const UOp& u) {
  const Access a = access(u, *u.src.at(0), u.dtype);
  Value* zero_value = llvm::Constant::getNullValue(a.type);
  auto emit = [&]() -> Value* {
    check_bounds(*u.src[0], a);
    llvm::Instruction* loaded = nullptr;
    if (a.kind == Access::Lanes) {
      return gather(a, a.mask ? a.mask : b_.getAllOnesMask(llvm::ElementCount::getFixed(u.dtype.lanes)),
                    *u.src[0]);
    } else if (a.mask) {
      return masked_load(a, *u.src[0]);
    } else {
      loaded = b_.CreateAlignedLoad(a.type, a.ptr, a.align);
    }
    tag_access(loaded, *u.src[0]);
    return loaded;
  };
  Value* v = guarded(a.guard, emit, zero_value);
  return u.dtype.is_bool() ? b_.CreateTrunc(v, type_of(u.dtype)) : v;  // bool bytes are 0 or 1
}

void Emitter::store(const UOp& u) {
  const DType dt = u.src.at(1)->dtype;
  const Access a = access(u, *u.src.at(0), dt);
  Value* v = get(u.src[1]);
  if (dt.is_bool()) v = b_.CreateZExt(v, a.type);
  guarded(
      a.guard,
      [&]() -> Value* {
        check_bounds(*u.src[0], a);
        llvm::Instruction* stored = nullptr;
        if (a.kind == Access::Lanes) {
          scatter(v, a, a.mask ? a.mask : b_.getAllOnesMask(llvm::ElementCount::getFixed(dt.lanes)),
                  *u.src[0]);
          return nullptr;
        } else if (a.mask) {
          masked_store(v, a, *u.src[0]);
          return nullptr;
        } else if (streams(u, a)) {
          // Whole vectors from an ABI-aligned base: aligned to the vector, up to kKernelAbiAlignment.
          const uint64_t bytes = a.type->getPrimitiveSizeInBits() / 8;
          stored = b_.CreateAlignedStore(
              v, a.ptr, llvm::Align(std::min<uint64_t>(bytes, static_cast<uint64_t>(kKernelAbiAlignment))));
          stored->setMetadata(llvm::LLVMContext::MD_nontemporal,
                              llvm::MDNode::get(ctx_, {llvm::ConstantAsMetadata::get(b_.getInt32(1))}));
          streamed_ = true;
        } else {
          stored = b_.CreateAlignedStore(v, a.ptr, a.align);
        }
        tag_access(stored, *u.src[0]);
        return nullptr;
      },
      nullptr);
}

// ---- streaming stores ---------------------------------------------------------------------
// A store that writes more than the L3 holds leaves nothing in cache for the next
// kernel to read, and a cached store first reads each line it writes
// (write-allocate): a fifth of relu(a*b+c).exp()'s traffic. A non-temporal store
// writes the line without reading it. So a contiguous vector store of whole,
// aligned vectors to a buffer, at an index of ranges only (written once, never a
// scatter), that writes at least streaming_store_bytes_ in all, streams.

// Is every value of the index expression `u` a multiple of `n`?
bool multiple_of(const UOp& u, int64_t n) {
  switch (u.op) {
    case Op::CONST: return u.const_int() % n == 0;
    case Op::MUL: return multiple_of(*u.src[0], n) || multiple_of(*u.src[1], n);
    case Op::ADD: return multiple_of(*u.src[0], n) && multiple_of(*u.src[1], n);
    default: return false;
  }
}

// Elements the index expression `u` reaches: the product of its ranges' constant
// trip counts, or 0 where it is not made of ranges, constants, + and *.
int64_t elements_reached(const UOp& u) {
  int64_t n = 1;
  for (const auto& r : u.ranges()) {
    if (r->src.at(0)->op != Op::CONST) return 0;
    n *= r->src[0]->const_int();
  }
  std::vector<const UOp*> todo{&u};
  while (!todo.empty()) {
    const UOp* e = todo.back();
    todo.pop_back();
    if (e->op == Op::ADD || e->op == Op::MUL)
      for (const auto& s : e->src) todo.push_back(s.get());
    else if (e->op != Op::RANGE && e->op != Op::CONST)
      return 0;
  }
  return n;
}

bool Emitter::streams(const UOp& store, const Access& a) const {
  const UOp& index = *store.src.at(0);
  const int64_t lanes = index.dtype.lanes;
  const int64_t bytes = static_cast<int64_t>(a.type->getPrimitiveSizeInBits() / 8);
  // The store claims the alignment of its bytes, up to the ABI's (a vector wider than a
  // register is stored a register at a time): the index is a multiple of that many elements.
  const int64_t aligned =
      std::min<int64_t>(bytes, kKernelAbiAlignment) / (bytes / std::max<int64_t>(lanes, 1));
  if (a.kind != Access::Contiguous || a.mask || buffer_of(index).op != Op::DEFINE_GLOBAL || lanes < 2 ||
      bytes % 16 != 0 || !multiple_of(*index.src.at(1), aligned))
    return false;
  return elements_reached(*index.src[1]) * bytes >= streaming_store_bytes_;
}

// LLVM 19's x86 backend splits a masked load wider than a SIMD register wrongly
// when its mask is a splat ANDed with constants: a half whose constant lanes are
// all false becomes a plain load, which ignores the mask and reads past the
// buffer (tests/fuzz/regressions/masked-load-wider-than-register.loom). So LLVM
// never splits one: loom emits a contiguous masked access wider than the target's
// register as register-wide pieces itself, loads and stores alike.
unsigned Emitter::piece_lanes(llvm::Type* type) const {
  auto* vector = llvm::cast<llvm::FixedVectorType>(type);
  const unsigned bytes = std::max(1u, static_cast<unsigned>(vector->getScalarSizeInBits() / 8));
  const unsigned lanes = std::max(1u, static_cast<unsigned>(register_bytes_) / bytes);
  return std::min(lanes, vector->getNumElements());
}

// The same backend turns a register-wide masked access whose mask is a splat ANDed with
// constants into a plain one when the constant lanes are all false (a padded product's
// second register of lanes, all past the row, read a row's length past the buffer:
// tests/codegen/test_llvm_emit.cpp). A piece's mask is frozen, so the backend sees a
// mask, not its constants; a mask constant as a whole stays so (all true: a plain access,
// all false: none, which LLVM folds right).
Value* Emitter::piece_mask(Value* mask, unsigned first, unsigned n, unsigned lanes) {
  Value* piece = n == lanes ? mask : b_.CreateShuffleVector(mask, llvm::createSequentialMask(first, n, 0));
  return llvm::isa<llvm::Constant>(piece) ? piece : b_.CreateFreeze(piece);
}

Value* Emitter::masked_load(const Access& a, const UOp& index) {
  auto* vector = llvm::cast<llvm::FixedVectorType>(a.type);
  const unsigned lanes = vector->getNumElements(), width = piece_lanes(vector);
  std::vector<Value*> pieces;
  for (unsigned first = 0; first < lanes; first += width) {
    const unsigned n = std::min(width, lanes - first);
    auto* type = llvm::FixedVectorType::get(vector->getElementType(), n);
    Value* ptr = first ? b_.CreateConstGEP1_64(vector->getElementType(), a.ptr, first) : a.ptr;
    Value* mask = piece_mask(a.mask, first, n, lanes);
    llvm::Instruction* piece =
        b_.CreateMaskedLoad(type, ptr, a.align, mask, llvm::Constant::getNullValue(type));
    tag_access(piece, index);
    pieces.push_back(piece);
  }
  return pieces.size() == 1 ? pieces[0] : llvm::concatenateVectors(b_, pieces);
}

void Emitter::masked_store(Value* v, const Access& a, const UOp& index) {
  // Every lane valid (all but a tail's vectors): a plain store. A masked store costs
  // far more than a plain one on AMD's cores, and a padded product's epilogue stores
  // each row of its tiles under a mask that is all true except in the last panel.
  auto* whole = llvm::BasicBlock::Create(ctx_, "all_lanes", fn_);
  auto* some = llvm::BasicBlock::Create(ctx_, "some_lanes", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "store.done", fn_);
  b_.CreateCondBr(b_.CreateAndReduce(a.mask), whole, some);
  b_.SetInsertPoint(whole);
  tag_access(b_.CreateAlignedStore(v, a.ptr, a.align), index);
  b_.CreateBr(done);
  b_.SetInsertPoint(some);
  masked_pieces(v, a, index);
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
}

void Emitter::masked_pieces(Value* v, const Access& a, const UOp& index) {
  auto* vector = llvm::cast<llvm::FixedVectorType>(a.type);
  const unsigned lanes = vector->getNumElements(), width = piece_lanes(vector);
  for (unsigned first = 0; first < lanes; first += width) {
    const unsigned n = std::min(width, lanes - first);
    const llvm::SmallVector<int, 16> part = llvm::createSequentialMask(first, n, 0);
    Value* ptr = first ? b_.CreateConstGEP1_64(vector->getElementType(), a.ptr, first) : a.ptr;
    Value* value = n == lanes ? v : b_.CreateShuffleVector(v, part);
    Value* mask = piece_mask(a.mask, first, n, lanes);
    tag_access(b_.CreateMaskedStore(value, ptr, a.align, mask), index);
  }
}

// LLVM 19's x86 legalizer widens a gather or scatter whose lane count is no power of two
// with lanes of undefined address, and its register allocator may then give such a gather
// its destination's register as index: an invalid instruction, SIGILL at run time (a
// <40 x float> gather, tests/fuzz/regressions/gather-of-forty-lanes.loom). So loom emits
// one as pieces of power-of-two lanes, at most a register of pointers each, which LLVM
// takes as they are; a power-of-two access stays whole.
std::vector<std::pair<unsigned, unsigned>> Emitter::lane_pieces(unsigned lanes) const {
  if (std::has_single_bit(lanes)) return {{0, lanes}};
  const unsigned pointers = std::max(1u, static_cast<unsigned>(register_bytes_) / 8);
  std::vector<std::pair<unsigned, unsigned>> pieces;
  for (unsigned first = 0; first < lanes;) {
    const unsigned n = std::min(pointers, std::bit_floor(lanes - first));
    pieces.emplace_back(first, n);
    first += n;
  }
  return pieces;
}

// Two vectors of one element type end to end.
Value* Emitter::joined(Value* a, Value* b) {
  const unsigned na = llvm::cast<llvm::FixedVectorType>(a->getType())->getNumElements();
  const unsigned nb = llvm::cast<llvm::FixedVectorType>(b->getType())->getNumElements();
  const unsigned wide = std::max(na, nb);
  auto widened = [&](Value* v, unsigned n) {
    return n == wide ? v : b_.CreateShuffleVector(v, llvm::createSequentialMask(0, n, wide - n));
  };
  llvm::SmallVector<int, 64> order = llvm::createSequentialMask(0, na, 0);
  for (unsigned i = 0; i < nb; ++i) order.push_back(static_cast<int>(wide + i));
  return b_.CreateShuffleVector(widened(a, na), widened(b, nb), order);
}

Value* Emitter::gather(const Access& a, Value* mask, const UOp& index) {
  auto* vector = llvm::cast<llvm::FixedVectorType>(a.type);
  const unsigned lanes = vector->getNumElements();
  Value* result = nullptr;
  for (const auto& [first, n] : lane_pieces(lanes)) {
    auto* type = llvm::FixedVectorType::get(vector->getElementType(), n);
    const llvm::SmallVector<int, 16> part = llvm::createSequentialMask(first, n, 0);
    Value* ptrs = n == lanes ? a.ptr : b_.CreateShuffleVector(a.ptr, part);
    Value* piece_of_mask = n == lanes ? mask : piece_mask(mask, first, n, lanes);
    llvm::Instruction* piece =
        b_.CreateMaskedGather(type, ptrs, a.align, piece_of_mask, llvm::Constant::getNullValue(type));
    tag_access(piece, index);
    result = result ? joined(result, piece) : piece;
  }
  return result;
}

void Emitter::scatter(Value* v, const Access& a, Value* mask, const UOp& index) {
  const unsigned lanes = llvm::cast<llvm::FixedVectorType>(a.type)->getNumElements();
  for (const auto& [first, n] : lane_pieces(lanes)) {  // in lane order: a later lane's write wins
    const llvm::SmallVector<int, 16> part = llvm::createSequentialMask(first, n, 0);
    Value* ptrs = n == lanes ? a.ptr : b_.CreateShuffleVector(a.ptr, part);
    Value* value = n == lanes ? v : b_.CreateShuffleVector(v, part);
    Value* piece_of_mask = n == lanes ? mask : piece_mask(mask, first, n, lanes);
    tag_access(b_.CreateMaskedScatter(value, ptrs, a.align, piece_of_mask), index);
  }
}

// ---- vectors ------------------------------------------------------------------------
// Scalars make a vector; vectors are concatenated.
Value* Emitter::vectorize(const UOp& u) {
  unsigned lanes = 0;
  for (const auto& src : u.src) {
    if (!(src->dtype.base() == u.dtype.base()))
      throw Error(fmt::format("{}: a {} source", describe(u), to_string(src->dtype)));
    lanes += src->dtype.lanes;
  }
  if (lanes != u.dtype.lanes)
    throw Error(fmt::format("{}: its sources have {} lanes in all", describe(u), lanes));
  const bool scalars =
      std::all_of(u.src.begin(), u.src.end(), [](const UOpPtr& s) { return s->dtype.lanes == 1; });
  if (scalars && std::all_of(u.src.begin(), u.src.end(), [&](const UOpPtr& s) { return s == u.src[0]; }))
    return b_.CreateVectorSplat(u.dtype.lanes, get(u.src[0]));
  const bool halves = u.src.size() == 2 && u.src[0]->dtype.lanes == u.src[1]->dtype.lanes && !scalars;
  if (halves) {
    std::vector<int> mask(lanes);
    for (unsigned i = 0; i < lanes; ++i) mask[i] = static_cast<int>(i);
    return b_.CreateShuffleVector(get(u.src[0]), get(u.src[1]), mask);
  }
  Value* v = llvm::PoisonValue::get(type_of(u.dtype));
  uint64_t at = 0;
  for (const auto& src : u.src) {
    Value* x = get(src);
    if (src->dtype.lanes == 1) {
      v = b_.CreateInsertElement(v, x, at++);
      continue;
    }
    for (uint64_t l = 0; l < src->dtype.lanes; ++l)
      v = b_.CreateInsertElement(v, b_.CreateExtractElement(x, l), at++);
  }
  return v;
}

Value* Emitter::lane_select(const UOp& u) {
  const auto& lanes = u.get<std::vector<int64_t>>();
  const UOp& from = *u.src.at(0);
  if (lanes.size() != u.dtype.lanes || !(u.dtype.base() == from.dtype.base()))
    throw Error(fmt::format("{}: {} lanes of a {}", describe(u), lanes.size(), to_string(from.dtype)));
  for (int64_t l : lanes)
    if (l < 0 || l >= from.dtype.lanes)
      throw Error(fmt::format("{}: lane {} of a {}", describe(u), l, to_string(from.dtype)));
  Value* v = get(u.src[0]);
  if (lanes.size() == 1) return b_.CreateExtractElement(v, static_cast<uint64_t>(lanes[0]));
  const std::vector<int> mask(lanes.begin(), lanes.end());
  return b_.CreateShuffleVector(v, mask);
}

}  // namespace

void codegen_testing_break_next_kernel() { break_next_kernel.store(true); }

std::string emit_llvm_ir(const UOpPtr& kernel, const std::string& name, const EmitOptions& options) {
  if (name.empty()) throw Error("emit_llvm_ir: a kernel needs a non-empty function name");
  llvm::LLVMContext ctx;
  llvm::Module module(name, ctx);
  try {
    const LinearKernel linear = linearize(kernel);
    Emitter emitter(module, linear, name, options);
    emitter.emit(/*omit_terminator=*/break_next_kernel.exchange(false));
  } catch (const Error& e) {
    throw Error(fmt::format("emit_llvm_ir: kernel '{}': {}", name, e.what()));
  }
  std::string problems;
  llvm::raw_string_ostream problems_out(problems);
  if (llvm::verifyModule(module, &problems_out))
    throw Error(fmt::format("emit_llvm_ir: kernel '{}': LLVM rejected the emitted function: {}", name,
                            problems_out.str()));
  std::string text;
  llvm::raw_string_ostream out(text);
  module.print(out, nullptr);
  return out.str();
}

}  // namespace loom
