#include "fuzz/kernel_checker.hpp"

#include "fuzz/compare.hpp"
#include "fuzz/op_class.hpp"
#include "ir/pass_observer.hpp"
#include "ir/target.hpp"
#include "ir/text.hpp"
#include "support/kernel_interpreter.hpp"
#include "support/reference_scalar.hpp"
#include "support/reference_tensor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

namespace loom::fuzz {

namespace {

// Kernels whose buffers would need more elements than this are not interpreted.
constexpr int64_t kMaxSlotElements = int64_t{1} << 20;
// Random buffer sets each pass is checked on: a wrong rewrite on one side of a
// WHERE over four random Bools goes unseen by one set a third of the time.
constexpr int kTrials = 3;

struct Slot {
  DType dtype;
  int64_t size = 0;
  bool float_bits = false;  // an integer slot storing a float's bits (tanh's sign copy, abs)
};

// An integer value made from a float's bits carries the float's rounding: a pass
// that moves an approximate float by an ulp moves these bits too.
bool from_float_bits(const UOpPtr& value) {
  if (value->dtype.scalar != Scalar::Int32 && value->dtype.scalar != Scalar::Int64) return false;
  for (const auto& n : toposort(value))
    if (n->op == Op::BITCAST && !n->dtype.is_float() && n->src[0]->dtype.is_float()) return true;
  return false;
}

// The dtype a slot is compared in: its own, or the float of its width for float bits.
DType compared_dtype(const Slot& s) {
  if (!s.float_bits) return s.dtype;
  return s.dtype.itemsize() == 8 ? DType::Float64 : DType::Float32;
}

// Each slot's element type and the elements its INDEX expressions can reach
// (range analysis: vmax + 1, or + lanes for a vector access), over both kernels.
std::map<int64_t, Slot> slots_of(const UOpPtr& a, const UOpPtr& b) {
  std::map<int64_t, Slot> slots;
  for (const auto& n : toposort(std::vector<UOpPtr>{a, b})) {
    if (n->op == Op::STORE && n->src[0]->op == Op::INDEX && n->src[0]->src[0]->op == Op::DEFINE_GLOBAL &&
        from_float_bits(n->src[1]))
      slots[n->src[0]->src[0]->arg_int()].float_bits = true;
    if (n->op != Op::INDEX || n->src.size() < 2 || n->src[0]->op != Op::DEFINE_GLOBAL) continue;
    Slot& s = slots[n->src[0]->arg_int()];
    s.dtype = n->src[0]->dtype.base();
    // A vector access at a scalar index reaches that many consecutive elements.
    const int64_t reach = n->src[1]->dtype.lanes == 1 ? n->dtype.lanes : 1;
    // An index with no bound (loaded from a buffer: a gather) has vmax INT64_MAX;
    // past kMaxSlotElements the kernel is skipped anyway, so stop there (no overflow).
    const int64_t top = std::min(n->src[1]->vmax(), kMaxSlotElements);
    s.size = std::max(s.size, top + reach);
  }
  return slots;
}

std::vector<uint8_t> random_bytes(const Slot& s, std::mt19937_64& rng) {
  std::vector<double> v(static_cast<size_t>(s.size));
  for (auto& x : v) {
    const uint64_t r = rng();
    switch (s.dtype.scalar) {
      case Scalar::Float32:
      case Scalar::Float64:
      case Scalar::BFloat16:
      case Scalar::Float16: x = static_cast<double>(static_cast<int64_t>(r % 4001) - 2000) / 500; break;
      case Scalar::Bool: x = static_cast<double>(r & 1); break;
      case Scalar::UInt8: x = static_cast<double>(r & 255); break;
      default: x = static_cast<double>(static_cast<int64_t>(r % 41) - 20);
    }
  }
  ref::RefTensor t = ref::RefTensor::zeros(s.dtype, {s.size});
  if (s.dtype.is_float())
    for (size_t k = 0; k < v.size(); ++k) t.f[k] = ref::round_float(s.dtype, v[k]);
  else
    for (size_t k = 0; k < v.size(); ++k) t.i[k] = static_cast<int64_t>(v[k]);
  return t.to_bytes();
}

// What a kernel run leaves: its buffers, and the largest operand of a float sum in it.
struct Run {
  std::vector<std::vector<uint8_t>> buffers;
  double scale = 0;
  bool made_infinity = false;
  double smallest_divisor = std::numeric_limits<double>::infinity();
  std::string plain_undefined;
};

// A value for each variable of symbolic size or offset, by name.
using Binding = std::map<std::string, int64_t>;

// `kernel`'s DEFINE_VARs sorted by name (the kernel ABI's order), each at its value in `binding`.
std::vector<int64_t> vars_of(const UOpPtr& kernel, const Binding& binding) {
  std::map<std::string, int64_t> own;
  for (const auto& n : toposort(kernel))
    if (n->op == Op::DEFINE_VAR) own.emplace(n->get<VarArg>().name, binding.at(n->get<VarArg>().name));
  std::vector<int64_t> vars;
  for (const auto& [name, value] : own) vars.push_back(value);
  return vars;
}

// The bindings a pass is checked at: every variable at its lower bound, at 1 (where in
// its bounds), at the middle and at its upper bound. The buffers are sized for the upper
// bounds (slots_of's range analysis), so every binding reads and writes inside them.
std::vector<Binding> bindings_of(const UOpPtr& before, const UOpPtr& after) {
  std::map<std::string, std::pair<int64_t, int64_t>> bounds;
  for (const auto& n : toposort(std::vector<UOpPtr>{before, after}))
    if (n->op == Op::DEFINE_VAR)
      bounds.emplace(n->get<VarArg>().name, std::pair{n->get<VarArg>().min, n->get<VarArg>().max});
  std::vector<Binding> out;
  for (const int pick : {0, 1, 2, 3}) {
    Binding b;
    for (const auto& [name, range] : bounds) {
      const auto [lo, hi] = range;
      b[name] = pick == 0   ? lo
                : pick == 1 ? std::clamp<int64_t>(1, lo, hi)
                : pick == 2 ? lo + (hi - lo) / 2
                            : hi;
    }
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(std::move(b));
  }
  return out;
}

// "{T=5, n=1}".
std::string str(const Binding& binding) {
  std::string s = "{";
  for (const auto& [name, value] : binding)
    s += fmt::format("{}{}={}", s.size() > 1 ? ", " : "", name, value);
  return s + "}";
}

// Runs `kernel` on copies of `inputs`, its variables at `binding`.
Run run(const UOpPtr& kernel, const std::map<int64_t, Slot>& slots, std::vector<std::vector<uint8_t>> buffers,
        const Binding& binding, bool float_max_instruction = false) {
  const int64_t n_slots = slots.empty() ? 0 : slots.rbegin()->first + 1;
  std::vector<void*> ptrs(static_cast<size_t>(n_slots), nullptr);
  std::vector<int64_t> sizes(static_cast<size_t>(n_slots), 0);
  size_t k = 0;
  for (const auto& [slot, s] : slots) {
    ptrs[static_cast<size_t>(slot)] = buffers[k++].data();
    sizes[static_cast<size_t>(slot)] = s.size;
  }
  const KernelRunFacts facts =
      interpret_kernel_checked(kernel, ptrs.data(), sizes, vars_of(kernel, binding), float_max_instruction);
  return {std::move(buffers), facts.largest_sum_operand, facts.made_infinity, facts.smallest_divisor,
          facts.plain_undefined};
}

// Whether `kernel` sums (ADD) or multiplies (MUL) floats over an axis.
bool has_float_reduce(const UOpPtr& kernel, Op op) {
  const auto nodes = toposort(kernel);
  return std::any_of(nodes.begin(), nodes.end(), [&](const UOpPtr& n) {
    const auto* arg = std::get_if<ReduceArg>(&n->arg);
    return n->op == Op::REDUCE && n->dtype.is_float() && arg && arg->op == op;
  });
}

// The most terms one float ADD reduce of `kernel` sums (its ranges' extents multiplied;
// 2^20 where one is symbolic).
double most_terms_summed(const UOpPtr& kernel) {
  double most = 0;
  for (const auto& n : toposort(kernel)) {
    const auto* arg = std::get_if<ReduceArg>(&n->arg);
    if (n->op != Op::REDUCE || !n->dtype.is_float() || !arg || arg->op != Op::ADD) continue;
    double terms = 1;
    for (size_t i = 1; i < n->src.size(); ++i) {
      const UOpPtr& end = n->src[i]->src.at(0);
      terms *= end->op == Op::CONST ? static_cast<double>(std::max<int64_t>(end->const_int(), 1)) : 0x1p20;
    }
    most = std::max(most, terms);
  }
  return most;
}

// Whether a run divided by a sum of random values that cancelled (to below 2^-10 of its
// largest operand) so far that the rounding of a reordering, n eps of that operand,
// divided through exceeds the tolerance: both orders are right and differ by more than
// it, as with a cancellation to exactly 0 (forgive_range_limits). No evidence.
bool divided_by_cancellation(const Run& run, const UOpPtr& kernel, double scale) {
  const double terms = most_terms_summed(kernel);
  if (terms == 0 || !std::isfinite(run.smallest_divisor)) return false;
  const DType dt = tolerance_dtype(kernel);
  const double eps = dt.scalar == Scalar::Float64 ? 0x1p-53 : dt.scalar == Scalar::Float32 ? 0x1p-24 : 0x1p-8;
  const double d = run.smallest_divisor;
  return d < 0x1p-10 * scale && d * relative_tolerance(dt) < 2 * terms * eps * scale;
}

// The random buffers are not the program's data: a float sum or product of them may
// overflow or underflow in one order and not in another (72 factors e^k, k in [-20, 20],
// overflow partway in order and not as a tree, then meet inf * 0 in one order, or reach
// 0 partway in one order and stay there). Such an element, infinite on either side or
// below the smallest normal number on both (`products`: 0 on either side), is no
// evidence against a pass that reorders: it is made equal on both sides. So is NaN
// against a finite value where either run made an infinity from finite operands (inf
// * 0: a sum of random values that cancels to 0 in one order, then divided by); else
// it still counts (a wrong rewrite taking a log of a negative number).
void forgive_range_limits(ref::RefTensor& got, ref::RefTensor& want, bool products, bool made_infinity) {
  if (!want.dtype.is_float()) return;
  const double smallest_normal = want.dtype.scalar == Scalar::Float32 ? std::numeric_limits<float>::min()
                                                                      : std::numeric_limits<double>::min();
  for (size_t e = 0; e < want.f.size(); ++e) {
    double &g = got.f[e], &w = want.f[e];
    if (std::isinf(g) || std::isinf(w) || (made_infinity && (std::isnan(g) || std::isnan(w))))
      g = w = std::numeric_limits<double>::quiet_NaN();
    const bool tiny = std::abs(g) < smallest_normal && std::abs(w) < smallest_normal;
    if (tiny || (products && (g == 0 || w == 0))) g = w;
  }
}

}  // namespace

namespace {

// Both kernels on one set of random buffers, their variables at `binding`: "" if every
// buffer ends equal.
std::string compare_once(const UOpPtr& before, const UOpPtr& after, const std::map<int64_t, Slot>& slots,
                         std::mt19937_64& rng, bool plain_after, const Binding& binding) {
  std::vector<std::vector<uint8_t>> inputs;
  for (const auto& [slot, s] : slots) inputs.push_back(random_bytes(s, rng));
  Run want;
  try {
    want = run(before, slots, inputs, binding);
  } catch (const Error& e) {
    return fmt::format("skipped: the kernel before the pass does not interpret ({})", e.what());
  }
  Run got;
  try {
    got = run(after, slots, inputs, binding, plain_after && current_target().exact_float_max());
  } catch (const Error& e) {
    const std::string why = e.what();
    if (why.find("not supported") != std::string::npos) return "skipped: " + why;
    return "the kernel after the pass fails in the interpreter: " + why;
  }
  if (plain_after && !got.plain_undefined.empty())
    return "the kernel after the pass leaves an op its plain instruction is undefined for: " +
           got.plain_undefined;
  const bool products = has_float_reduce(before, Op::MUL);
  const bool reorders = products || has_float_reduce(before, Op::ADD);
  if (reorders &&
      (divided_by_cancellation(want, before, want.scale) || divided_by_cancellation(got, before, got.scale)))
    return "";
  size_t k = 0;
  for (const auto& [slot, s] : slots) {
    auto g = ref::RefTensor::from_bytes(compared_dtype(s), {s.size}, got.buffers[k].data());
    auto w = ref::RefTensor::from_bytes(compared_dtype(s), {s.size}, want.buffers[k].data());
    ++k;
    if (reorders) forgive_range_limits(g, w, products, got.made_infinity || want.made_infinity);
    // Passes may reorder a float reduction: the approximate class's tolerance, relative
    // to the largest operand of a sum (a sum that cancels keeps its operands' error).
    const double scale = std::max(magnitude(w), want.scale);
    const std::string diff = compare_values(g, w, {true, tolerance_dtype(before), scale});
    if (!diff.empty())
      return binding.empty() ? fmt::format("buffer slot {}: {}", slot, diff)
                             : fmt::format("buffer slot {} at {}: {}", slot, str(binding), diff);
  }
  return "";
}

}  // namespace

std::string compare_kernels(const UOpPtr& before, const UOpPtr& after, uint64_t seed, bool plain_after) {
  const auto slots = slots_of(before, after);
  for (const auto& [slot, s] : slots)
    if (s.size > kMaxSlotElements)
      return fmt::format("skipped: slot {} would need {} elements", slot, s.size);
  std::mt19937_64 rng(seed);
  // Every binding of the variables on fresh random buffers; the first with every trial.
  const std::vector<Binding> bindings = bindings_of(before, after);
  for (size_t b = 0; b < bindings.size(); ++b)
    for (int trial = 0; trial < (b == 0 ? kTrials : 1); ++trial)
      if (std::string diff = compare_once(before, after, slots, rng, plain_after, bindings[b]); !diff.empty())
        return diff;
  return "";
}

KernelChecker::KernelChecker(bool check, Coverage* coverage) : check_(check), coverage_(coverage) {
  token_ = add_pass_observer(
      [this](const PassEvent& e) { observe(e.level, e.pass, e.kernel, e.before, e.after); });
}

KernelChecker::~KernelChecker() { remove_pass_observer(token_); }

std::optional<Failure> KernelChecker::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

void KernelChecker::observe(PassLevel level, std::string_view pass, std::string_view kernel,
                            const UOpPtr& before, const UOpPtr& after) {
  std::lock_guard lock(mu_);
  if (coverage_) ++coverage_->stages[std::string(pass)];
  // A schedule-wide stage runs on every program: how often it changed the graph is what
  // says the programs reach it (multi_output, panel_packing).
  if (coverage_ && level == PassLevel::Graph && before != after)
    ++coverage_->stages[std::string(pass) + " changed"];
  if (level != PassLevel::Kernel || !check_ || failure_) return;
  if (before == after) {
    if (coverage_) ++coverage_->kernel_checks["unchanged"];
    return;
  }
  const std::string diff = compare_kernels(before, after, before->hash(), pass == "numeric_lowering");
  if (diff.rfind("skipped", 0) == 0) {
    if (coverage_) ++coverage_->kernel_checks["skipped"];
    return;
  }
  if (coverage_) ++coverage_->kernel_checks["checked"];
  if (!diff.empty())
    failure_ = Failure{fmt::format("kernel {}", pass),
                       fmt::format("pass '{}' changed what kernel {} computes: {}\nbefore:\n{}\nafter:\n{}",
                                   pass, kernel, diff, to_text(before), to_text(after))};
}

}  // namespace loom::fuzz
