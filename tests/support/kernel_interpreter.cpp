#include "support/kernel_interpreter.hpp"

#include "support/kernel_scalar.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace loom {

namespace {
namespace ks = kernel_scalar;
using Scalar1 = ks::Value;

// A list of trivially copyable values kept inline up to N of them: the interpreter
// builds and copies one per node per iteration, and std::vector's heap traffic
// was most of its time. Copies move only the elements in use.
template <class T, size_t N>
class SmallList {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  SmallList() {}  // user-provided: `{}` must not zero the inline storage
  SmallList(std::initializer_list<T> values) {
    for (const T& v : values) push_back(v);
  }
  SmallList(size_t count, const T& v) {
    for (size_t k = 0; k < count; ++k) push_back(v);
  }
  SmallList(const SmallList& other) { *this = other; }
  SmallList& operator=(const SmallList& other) {
    if (this == &other) return *this;
    size_ = other.size_;
    if (size_ > N) {
      heap_ = other.heap_;
      return *this;
    }
    // Element by element: a value is mostly one lane, for which memcpy's set-up costs more.
    const T* from = reinterpret_cast<const T*>(other.inline_);
    T* to = reinterpret_cast<T*>(inline_);
    for (size_t k = 0; k < size_; ++k) to[k] = from[k];
    return *this;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* begin() { return size_ <= N ? reinterpret_cast<T*>(inline_) : heap_.data(); }
  T* end() { return begin() + size_; }
  const T* begin() const { return size_ <= N ? reinterpret_cast<const T*>(inline_) : heap_.data(); }
  const T* end() const { return begin() + size_; }
  T& operator[](size_t k) { return begin()[k]; }
  const T& operator[](size_t k) const { return begin()[k]; }
  void push_back(const T& v) {
    if (size_ < N) {
      reinterpret_cast<T*>(inline_)[size_++] = v;
      return;
    }
    if (size_ == N) heap_.assign(begin(), end());
    heap_.push_back(v);
    ++size_;
  }
  friend bool operator==(const SmallList& a, const SmallList& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const T& x, const T& y) { return std::memcmp(&x, &y, sizeof(T)) == 0; });
  }

 private:
  alignas(T) unsigned char inline_[N * sizeof(T)];
  size_t size_ = 0;
  std::vector<T> heap_;  // all the elements, once there are more than N
};

// A value of any lane count: one scalar per lane, all of the vector's base dtype.
struct Lanes {
  DType dtype;
  SmallList<Scalar1, 16> lane;
};

struct Memo {
  uint64_t epoch = 0;  // valid while it equals the interpreter's current epoch
  Lanes value;
};

// Node -> its memo, by open addressing on the node's address: std::unordered_map's
// bucket division and node allocations cost more than evaluating most nodes.
class MemoTable {
 public:
  const Memo* find(const UOp* u) const {
    if (keys_.empty()) return nullptr;
    for (size_t at = start(u);; at = (at + 1) & (keys_.size() - 1)) {
      if (keys_[at] == u) return &memos_[at];
      if (!keys_[at]) return nullptr;
    }
  }
  Memo& slot(const UOp* u) {
    if (2 * (used_ + 1) > keys_.size()) grow();
    size_t at = start(u);
    while (keys_[at] && keys_[at] != u) at = (at + 1) & (keys_.size() - 1);
    if (!keys_[at]) keys_[at] = u, ++used_;
    return memos_[at];
  }

 private:
  size_t start(const UOp* u) const {
    return (reinterpret_cast<uintptr_t>(u) >> 4) * 0x9E3779B97F4A7C15ull >> (64 - bits_);
  }
  void grow() {
    std::vector<const UOp*> keys = std::move(keys_);
    std::vector<Memo> memos = std::move(memos_);
    bits_ = std::max(bits_ + 1, 6);
    keys_.assign(size_t{1} << bits_, nullptr);
    memos_.assign(keys_.size(), Memo{});
    used_ = 0;
    for (size_t k = 0; k < keys.size(); ++k)
      if (keys[k]) slot(keys[k]) = std::move(memos[k]);
  }

  std::vector<const UOp*> keys_;
  std::vector<Memo> memos_;
  size_t used_ = 0;
  int bits_ = 5;
};
// An ALU node's operands: at most three (WHERE, MULACC).
struct Sources {
  std::array<Lanes, 3> at;
  size_t size = 0;
  const Lanes& operator[](size_t k) const { return at[k]; }
};
using Addresses = SmallList<char*, 16>;
using Iterations = SmallList<uint64_t, 8>;  // of the loops an effect needs open

[[noreturn]] void fail(const UOp& at, const std::string& what) {
  throw Error("kernel interpreter: " + std::string(op_name(at.op)) + " " + to_string(at.dtype) + ": " + what);
}

void need_src(const UOp& u, size_t lo, size_t hi) {
  if (u.src.size() < lo || u.src.size() > hi)
    fail(u, "has " + std::to_string(u.src.size()) + " sources, expected " + std::to_string(lo) +
                (hi == lo ? "" : " to " + std::to_string(hi)));
}

Lanes scalar(const Scalar1& v) { return Lanes{v.dtype, {v}}; }

// The ranges a node needs open (those it depends on, minus the ones an END or
// REDUCE under it closes): an effect something waits for runs once per
// iteration of exactly these loops, as docs/kernel-ir.md says.
std::unordered_map<const UOp*, std::vector<const UOp*>> open_ranges(const UOpPtr& kernel) {
  std::unordered_map<const UOp*, std::vector<const UOp*>> open;
  for (const auto& n : toposort(kernel)) {
    std::vector<const UOp*> set;
    for (const auto& s : n->src) {
      const auto& more = open.at(s.get());
      std::vector<const UOp*> merged;
      std::set_union(set.begin(), set.end(), more.begin(), more.end(), std::back_inserter(merged));
      set = std::move(merged);
    }
    if (n->op == Op::RANGE) set.insert(std::lower_bound(set.begin(), set.end(), n.get()), n.get());
    if (n->op == Op::END || n->op == Op::REDUCE)
      for (size_t i = 1; i < n->src.size(); ++i) std::erase(set, n->src[i].get());
    open.emplace(n.get(), std::move(set));
  }
  return open;
}

// Plain recursive evaluation. Loop variables live in `ranges_`; `memo_` keeps
// values computed since the last change of any loop variable or memory, so a
// node shared by many users is evaluated once per iteration, never stale.
class Interpreter {
  struct Loop {
    int64_t value;
    uint64_t iteration;  // a number no other iteration of any loop has
  };

 public:
  Interpreter(const UOpPtr& kernel, void* const* bufs, const std::vector<int64_t>& vars, int64_t begin,
              int64_t end, const std::vector<int64_t>* sizes = nullptr)
      : bufs_(bufs), sizes_(sizes), begin_(begin), end_(end), open_(open_ranges(kernel)) {
    bind_vars(kernel, vars);
  }

  void run(const UOp& effect) {
    switch (effect.op) {
      case Op::SINK:
        for (const auto& s : effect.src) run(*s);
        return;
      case Op::END:
        need_src(effect, 1, effect.src.size());
        for (const UOp* e : hoisted(effect))
          if (all_open(*e)) run_once(*e);
        return loops(effect.src, 1, [&] { run(*effect.src[0]); });
      case Op::STORE: return store(effect);
      default: fail(effect, "is not an effect: expected SINK, END or STORE");
    }
  }

  bool float_max_instruction = false;  // a Float32 MAX has instructions (Target::exact_float_max)

  KernelRunFacts facts() const {
    return {largest_sum_operand_, made_infinity_, smallest_divisor_, plain_undefined_};
  }

 private:
  void bind_vars(const UOpPtr& kernel, const std::vector<int64_t>& vars) {
    std::vector<std::string> names;
    for (const auto& u : toposort(kernel))
      if (u->op == Op::DEFINE_VAR) names.push_back(u->get<VarArg>().name);
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    if (names.size() != vars.size())
      fail(*kernel, "the kernel has " + std::to_string(names.size()) + " variables, given " +
                        std::to_string(vars.size()) + " values");
    for (size_t i = 0; i < names.size(); ++i) var_values_[names[i]] = vars[i];
  }

  // Runs `body` inside the loops of src[first...], the first outermost.
  void loops(const std::vector<UOpPtr>& src, size_t first, const std::function<void()>& body,
             bool reduce = false) {
    if (first == src.size()) return body();
    const UOp& r = *src[first];
    if (r.op != Op::RANGE) fail(r, "found where a loop RANGE was expected");
    // A REDUCE nested in a reduce over its own range (a running max, docs/kernel-ir.md)
    // runs the whole loop again inside; the outer iteration resumes after it.
    const std::optional<int64_t> outer = open_loop(r) ? std::optional(range_value(r).i) : std::nullopt;
    if (outer && !reduce) fail(r, "is already an open loop");
    const auto [lo, hi] = iterations(r);
    // A pair range adds its later iteration first, as DOT2 adds its odd lane first (docs/kernel-ir.md).
    const bool pair = r.get<AxisArg>().kind == AxisKind::Pair;
    for (int64_t n = lo; n < hi; ++n) {
      set_range(r, pair ? hi - 1 - (n - lo) : n);
      loops(src, first + 1, body, reduce);
    }
    if (outer)
      set_range(r, *outer);
    else
      std::erase_if(ranges_, [&](const auto& open) { return open.first == &r; });
    forget_values();
  }

  std::pair<int64_t, int64_t> iterations(const UOp& r) {
    need_src(r, 1, 1);
    const Scalar1 extent = eval1(*r.src[0]);
    if (!extent.dtype.is_int()) fail(r, "its end must be an integer, got " + to_string(extent.dtype));
    const bool sliced = r.get<AxisArg>().kind == AxisKind::Parallel && end_ >= 0;
    if (!sliced) return {0, extent.i};
    return {std::max<int64_t>(begin_, 0), std::min(end_, extent.i)};
  }

  void forget_values() { ++memo_epoch_; }

  Loop* open_loop(const UOp& r) {
    for (auto& [range, loop] : ranges_)
      if (range == &r) return &loop;
    return nullptr;
  }
  const Loop* open_loop(const UOp& r) const { return const_cast<Interpreter*>(this)->open_loop(r); }

  void set_range(const UOp& r, int64_t i) {
    if (Loop* open = open_loop(r))
      *open = {i, ++iteration_};
    else
      ranges_.emplace_back(&r, Loop{i, ++iteration_});
    forget_values();
  }

  // By value: evaluating one source may run a store, which clears the memo.
  Lanes eval(const UOp& u) {
    if (const Memo* m = memo_.find(&u); m && m->epoch == memo_epoch_) return m->value;
    Lanes v = compute(u);
    if (v.dtype != u.dtype) fail(u, "computes a " + to_string(v.dtype) + " value from its sources");
    if (!u.dtype.ptr && v.lane.size() != u.dtype.lanes)
      fail(u, "computes " + std::to_string(v.lane.size()) + " lanes");
    Memo& slot = memo_.slot(&u);
    slot.epoch = memo_epoch_;
    slot.value = v;
    return v;
  }
  Scalar1 eval1(const UOp& u) {
    const Lanes v = eval(u);
    if (v.lane.size() != 1) fail(u, "is a vector where a scalar was expected");
    return v.lane[0];
  }

  Lanes compute(const UOp& u) {
    switch (u.op) {
      case Op::CONST:
        if (u.dtype.lanes != 1) fail(u, "a constant is a scalar (VECTORIZE makes vectors)");
        return scalar(ks::of_const(u));
      case Op::RANGE: return scalar(range_value(u));
      case Op::DEFINE_VAR: return scalar(ks::of_int(DType::Int64, var_values_.at(u.get<VarArg>().name)));
      case Op::LOAD: return load(u);
      case Op::REDUCE: return reduce(u);
      case Op::AFTER: return after(u);
      case Op::VECTORIZE: return vectorize(u);
      case Op::GEP: return lanes_of(u);
      case Op::DOT2: return dot2(u);
      case Op::CAST:
      case Op::BITCAST:
        need_src(u, 1, 1);
        return per_lane(u, [&](const Sources& x, size_t l) {
          if (u.op == Op::CAST) note_plain_undefined(u, x, l);
          return u.op == Op::CAST ? ks::cast(x[0].lane[l], u.dtype.base())
                                  : ks::bitcast(x[0].lane[l], u.dtype.base());
        });
      case Op::WHERE:
        need_src(u, 3, 3);
        return per_lane(u, [&](const Sources& x, size_t l) {
          return ks::truthy(x[0].lane[l]) ? x[1].lane[l] : x[2].lane[l];
        });
      case Op::MULACC:
        need_src(u, 3, 3);
        return per_lane(u, [&](const Sources& x, size_t l) {
          if (!is_constant(*u.src[2]))
            note_sum_operands({ks::binary(Op::MUL, x[0].lane[l], x[1].lane[l]), x[2].lane[l]});
          return ks::mulacc(x[0].lane[l], x[1].lane[l], x[2].lane[l]);
        });
      default: return alu(u);
    }
  }

  // f(sources, lane) for each lane; every source has as many lanes as `u`
  // (comparisons: as many as their result).
  template <class F>
  Lanes per_lane(const UOp& u, F f) {
    Sources x;
    for (const auto& s : u.src) {
      if (s->dtype.lanes != u.dtype.lanes)
        fail(u, "a source has " + std::to_string(s->dtype.lanes) + " lanes, expected " +
                    std::to_string(u.dtype.lanes));
      if (x.size == x.at.size()) fail(u, "has more than " + std::to_string(x.at.size()) + " sources");
      x.at[x.size++] = eval(*s);
    }
    Lanes out{u.dtype, {}};
    for (size_t l = 0; l < u.dtype.lanes; ++l) {
      out.lane.push_back(f(x, l));
      if (std::isinf(out.lane[l].f) && u.dtype.is_float()) note_infinity(x, l);
    }
    return out;
  }

  // An infinity made from finite operands (an overflow, a division by 0): what is
  // computed from it (inf * 0 = NaN) says nothing of a pass that reorders floats.
  void note_infinity(const Sources& x, size_t l) {
    for (size_t k = 0; k < x.size; ++k)
      if (x[k].dtype.is_float() && !std::isfinite(x[k].lane[l].f)) return;
    made_infinity_ = true;
  }

  Lanes alu(const UOp& u) {
    if (is_unary(u.op)) {
      need_src(u, 1, 1);
      return per_lane(u, [&](const Sources& x, size_t l) {
        if (u.op == Op::RECIP) note_divisor(x[0].lane[l]);
        return ks::unary(u.op, x[0].lane[l]);
      });
    }
    if (is_binary(u.op)) {
      need_src(u, 2, 2);
      // A constant added is a form's step (exp's rounding adds and takes away 1.5 * 2^23,
      // ir/float_math.hpp), not a sum whose order a pass may change: it sets no error scale.
      const bool sum =
          (u.op == Op::ADD || u.op == Op::SUB) && !is_constant(*u.src[0]) && !is_constant(*u.src[1]);
      return per_lane(u, [&](const Sources& x, size_t l) {
        if (sum) note_sum_operands({x[0].lane[l], x[1].lane[l]});
        if (u.op == Op::FDIV) note_divisor(x[1].lane[l]);
        note_plain_undefined(u, x, l);
        return ks::binary(u.op, x[0].lane[l], x[1].lane[l]);
      });
    }
    fail(u, "is not a value the kernel IR defines");
  }

  // Records the first op whose plain instruction would be undefined on lane l of
  // its sources (KernelRunFacts::plain_undefined).
  void note_plain_undefined(const UOp& u, const Sources& x, size_t l) {
    if (!plain_undefined_.empty()) return;
    const std::string why =
        plain_undefined(u, x[0].lane[l], x.size > 1 ? x[1].lane[l] : x[0].lane[l], float_max_instruction);
    if (!why.empty()) plain_undefined_ = std::string(op_name(u.op)) + " " + to_string(u.dtype) + " " + why;
  }

  static std::string plain_undefined(const UOp& u, const Scalar1& a, const Scalar1& b, bool float_max) {
    const DType dt = u.dtype.base();
    const bool ints = !dt.is_float();
    const int64_t lowest = dt.scalar == Scalar::Int32   ? std::numeric_limits<int32_t>::min()
                           : dt.scalar == Scalar::Int64 ? std::numeric_limits<int64_t>::min()
                                                        : 0;
    switch (u.op) {
      case Op::IDIV:
      case Op::MOD:
        if (ints && b.i == 0) return "divides by 0";
        if (ints && !dt.is_unsigned() && a.i == lowest && b.i == -1) return "divides INT_MIN by -1";
        return "";
      case Op::SHL:
      case Op::SHR: return ints && (b.i < 0 || b.i >= dt.bits()) ? "shifts by " + std::to_string(b.i) : "";
      case Op::MAX:
        return dt.is_float() && !(float_max && dt.scalar == Scalar::Float32) ? "is a float MAX" : "";
      case Op::CAST: {
        if (!a.dtype.is_float() || dt.is_float() || dt.is_bool()) return "";
        const double t = std::trunc(a.f);
        const double highest = dt.scalar == Scalar::UInt8 ? 255.0 : -static_cast<double>(lowest) - 1;
        // -lowest - 1 rounds up to 2^63 for Int64: the first value out of range
        const bool above = dt.scalar == Scalar::Int64 ? t >= 0x1p63 : t > highest;
        return std::isnan(a.f) || t < static_cast<double>(lowest) || above
                   ? "converts " + std::to_string(a.f) + ", outside its range"
                   : "";
      }
      default: return "";
    }
  }

  static bool is_constant(const UOp& u) {
    return u.op == Op::CONST ||
           (u.op == Op::VECTORIZE &&
            std::all_of(u.src.begin(), u.src.end(), [](const UOpPtr& s) { return s->op == Op::CONST; }));
  }

  // A float divisor: the least finite non-zero one is a run fact (KernelRunFacts).
  void note_divisor(const Scalar1& d) {
    if (d.dtype.is_float() && std::isfinite(d.f) && d.f != 0)
      smallest_divisor_ = std::min(smallest_divisor_, std::abs(d.f));
  }

  // A float sum's error is relative to its operands, not to its result, which
  // may cancel to near 0: the largest finite one is the kernel's error scale.
  void note_sum_operands(std::initializer_list<Scalar1> operands) {
    for (const Scalar1& v : operands)
      if (v.dtype.is_float() && std::isfinite(v.f))
        largest_sum_operand_ = std::max(largest_sum_operand_, std::abs(v.f));
  }

  // Scalars make a vector; vectors are concatenated.
  Lanes vectorize(const UOp& u) {
    Lanes out{u.dtype, {}};
    for (const auto& s : u.src) {
      if (s->dtype.base() != u.dtype.base()) fail(u, "has a " + to_string(s->dtype) + " source");
      const Lanes v = eval(*s);
      for (const Scalar1& l : v.lane) out.lane.push_back(l);
    }
    return out;
  }

  Lanes lanes_of(const UOp& u) {
    need_src(u, 1, 1);
    const auto& picks = u.get<std::vector<int64_t>>();
    if (picks.size() != u.dtype.lanes) fail(u, "its arg names " + std::to_string(picks.size()) + " lanes");
    const Lanes v = eval(*u.src[0]);
    Lanes out{u.dtype, {}};
    for (int64_t p : picks) {
      if (p < 0 || static_cast<size_t>(p) >= v.lane.size())
        fail(u, "lane " + std::to_string(p) + " is out of range");
      out.lane.push_back(v.lane[static_cast<size_t>(p)]);
    }
    return out;
  }

  Scalar1 range_value(const UOp& r) {
    const Loop* open = open_loop(r);
    if (!open) fail(r, "used outside its loop");
    return ks::of_int(DType::Int64, open->value);
  }

  // DOT2(a, b, c): c + a[2i+1] b[2i+1], then + a[2i] b[2i] (docs/kernel-ir.md).
  Lanes dot2(const UOp& u) {
    need_src(u, 3, 3);
    const Lanes a = eval(*u.src[0]), b = eval(*u.src[1]);
    Lanes acc = eval(*u.src[2]);
    if (acc.lane.size() != u.dtype.lanes || a.lane.size() != 2 * acc.lane.size() ||
        b.lane.size() != a.lane.size())
      fail(u, "pairs " + to_string(a.dtype) + " and " + to_string(b.dtype) + " into " + to_string(acc.dtype));
    for (size_t l = 0; l < acc.lane.size(); ++l)
      for (const size_t at : {2 * l + 1, 2 * l}) {
        note_sum_operands({ks::binary(Op::MUL, a.lane[at], b.lane[at]), acc.lane[l]});
        acc.lane[l] = ks::mulacc(a.lane[at], b.lane[at], acc.lane[l]);
      }
    return acc;
  }

  // A value of two lanes per accumulator lane (a pair range, codegen/pair_dot.hpp) adds
  // each pair per step, odd lane first.
  Lanes reduce(const UOp& u) {
    need_src(u, 1, u.src.size());
    const Op op = u.get<ReduceArg>().op;
    Lanes acc{u.dtype, SmallList<Scalar1, 16>(u.dtype.lanes, ks::reduce_identity(op, u.dtype.base()))};
    loops(
        u.src, 1,
        [&] {
          const Lanes x = eval(*u.src[0]);
          const size_t per = x.lane.size() == 2 * acc.lane.size() ? 2 : 1;
          if (x.lane.size() != per * acc.lane.size()) fail(u, "folds a " + to_string(x.dtype) + " value");
          for (size_t l = 0; l < acc.lane.size(); ++l)
            for (size_t k = per; k-- > 0;) {
              const Scalar1& term = x.lane[per * l + k];
              if (op == Op::ADD) note_sum_operands({acc.lane[l], term});
              const bool finite = std::isfinite(acc.lane[l].f) && std::isfinite(term.f);
              acc.lane[l] = ks::binary(op, acc.lane[l], term);
              made_infinity_ |= finite && std::isinf(acc.lane[l].f) && u.dtype.is_float();
            }
        },
        true);
    return acc;
  }

  // AFTER(x, deps...): the effects among deps first (each once per iteration of
  // the loops it needs open), then x.
  Lanes after(const UOp& u) {
    need_src(u, 1, u.src.size());
    for (size_t i = 1; i < u.src.size(); ++i) {
      const UOp& dep = *u.src[i];
      if (dep.op == Op::STORE || dep.op == Op::END)
        run_once(dep);
      else if (dep.op != Op::RANGE)
        eval(dep);
    }
    if (u.src[0]->op == Op::DEFINE_REG || u.src[0]->op == Op::DEFINE_GLOBAL || u.src[0]->op == Op::AFTER)
      return Lanes{u.dtype, {ks::of_int(DType::Int64, 0)}};  // a buffer: only its identity matters
    return eval(*u.src[0]);
  }

  // Are all the loops the node needs open now? (If not, a deeper END runs it.)
  bool all_open(const UOp& u) const {
    const auto& needs = open_.at(&u);
    return std::all_of(needs.begin(), needs.end(), [&](const UOp* r) { return open_loop(*r) != nullptr; });
  }

  void run_once(const UOp& effect) {
    Iterations when;
    for (const UOp* r : open_.at(&effect)) {
      const Loop* open = open_loop(*r);
      if (!open) fail(effect, "needs a loop that is not open");
      when.push_back(open->iteration);
    }
    const auto it = effects_run_.find(&effect);
    if (it != effects_run_.end() && it->second == when) return;
    effects_run_[&effect] = when;
    run(effect);
  }

  // The effects an END's body waits for (through AFTER) that need none of the
  // END's loops: they run before its loops, as the linearizer places them, so
  // also when the loops run no iteration (an accumulator's initial store).
  const std::vector<const UOp*>& hoisted(const UOp& end) {
    if (auto it = hoisted_.find(&end); it != hoisted_.end()) return it->second;
    std::vector<const UOp*> out;
    for (const auto& n : toposort(end.src[0])) {
      if (n->op != Op::AFTER) continue;
      for (size_t i = 1; i < n->src.size(); ++i) {
        const UOp* dep = n->src[i].get();
        if (dep->op != Op::STORE && dep->op != Op::END) continue;
        const auto& needs = open_.at(dep);
        const bool inside = std::any_of(end.src.begin() + 1, end.src.end(), [&](const UOpPtr& r) {
          return std::find(needs.begin(), needs.end(), r.get()) != needs.end();
        });
        if (!inside && std::find(out.begin(), out.end(), dep) == out.end()) out.push_back(dep);
      }
    }
    return hoisted_.emplace(&end, std::move(out)).first->second;
  }

  // The buffer behind an INDEX's first source (through AFTER edges).
  static const UOp& buffer_of(const UOp& index) {
    const UOp* b = index.src[0].get();
    while (b->op == Op::AFTER && !b->src.empty()) b = b->src[0].get();
    if ((b->op != Op::DEFINE_GLOBAL && b->op != Op::DEFINE_REG) || !b->dtype.ptr)
      fail(*b, "found where a DEFINE_GLOBAL or DEFINE_REG buffer was expected");
    return *b;
  }

  char* base_of(const UOp& buf) {
    if (buf.op == Op::DEFINE_GLOBAL) return static_cast<char*>(bufs_[buf.arg_int()]);
    const auto& arg = buf.get<std::vector<int64_t>>();
    if (arg.size() != 2 || arg[1] < 1) fail(buf, "its arg must be (id size) with size >= 1");
    auto& mem = registers_[&buf];
    if (mem.empty()) mem.resize(static_cast<size_t>(arg[1]) * buf.dtype.lanes * buf.dtype.itemsize());
    return mem.data();
  }

  // The address of each memory element an INDEX reaches, in lane order; null
  // where the access is not valid. `value` is the dtype loaded or stored.
  Addresses elements(const UOp& index, DType value) {
    if (index.op != Op::INDEX) fail(index, "found where an INDEX was expected");
    need_src(index, 2, 3);
    const UOp& buf = buffer_of(index);
    const DType elem = buf.dtype.deref();
    if (index.dtype.deref() != value) fail(index, "is used for a " + to_string(value) + " value");
    if (value.scalar != elem.scalar || value.lanes % elem.lanes != 0)
      fail(index, "does not fit its buffer " + to_string(buf.dtype));
    const size_t count = value.lanes / elem.lanes;           // buffer elements accessed
    if (index.src[0]->op == Op::AFTER) eval(*index.src[0]);  // the effects the access waits for
    const Lanes at = eval(*index.src[1]);
    if (at.dtype.base() != DType::Int64) fail(index, "its index must be i64, got " + to_string(at.dtype));
    if (at.lane.size() != 1 && (at.lane.size() != count || elem.lanes != 1))
      fail(index, "a vector index needs one lane per element");
    SmallList<char, 16> valid(count, true);
    if (index.src.size() == 3) {
      const Lanes v = eval(*index.src[2]);
      if (v.dtype.base() != DType::Bool || (v.lane.size() != 1 && v.lane.size() != count))
        fail(index, "its validity must be bool, or one bool per element");
      for (size_t k = 0; k < count; ++k) valid[k] = ks::truthy(v.lane[v.lane.size() == 1 ? 0 : k]);
    }
    char* base = base_of(buf);
    const int64_t size = elem.lanes * elem.itemsize();
    Addresses out;
    for (size_t k = 0; k < count; ++k) {
      const int64_t i = at.lane.size() == 1 ? at.lane[0].i + static_cast<int64_t>(k) : at.lane[k].i;
      if (valid[k]) check_bounds(index, buf, i);
      out.push_back(valid[k] ? base + i * size : nullptr);
    }
    return out;
  }

  // With the slots' sizes given, an element outside its buffer is an error, never a stray access.
  void check_bounds(const UOp& index, const UOp& buf, int64_t i) const {
    if (!sizes_ || buf.op != Op::DEFINE_GLOBAL) return;
    const auto slot = static_cast<size_t>(buf.arg_int());
    if (slot >= sizes_->size() || i < 0 || i >= (*sizes_)[slot])
      fail(index, "index " + std::to_string(i) + " is outside buffer slot " + std::to_string(slot) + " of " +
                      (slot < sizes_->size() ? std::to_string((*sizes_)[slot]) : std::string("no")) +
                      " elements");
  }

  Lanes load(const UOp& u) {
    need_src(u, 1, 1);
    const Addresses at = elements(*u.src[0], u.dtype);
    const DType s = u.dtype.base();
    const size_t per = u.dtype.lanes / at.size();
    Lanes out{u.dtype, {}};
    for (char* p : at)
      for (size_t l = 0; l < per; ++l)
        out.lane.push_back(p ? ks::load(s, p + l * s.itemsize()) : ks::zero(s));
    return out;
  }

  void store(const UOp& u) {
    need_src(u, 2, 2);
    const Lanes v = eval(*u.src[1]);
    if (u.src[0]->op == Op::INDEX && v.dtype != u.src[0]->dtype.deref())
      fail(u, "stores a " + to_string(v.dtype) + " value into a " + to_string(u.src[0]->dtype.deref()) +
                  " buffer");
    const Addresses at = elements(*u.src[0], v.dtype);
    const DType s = v.dtype.base();
    const size_t per = v.dtype.lanes / at.size();
    for (size_t k = 0; k < at.size(); ++k)
      if (at[k])
        for (size_t l = 0; l < per; ++l) ks::store(at[k] + l * s.itemsize(), v.lane[k * per + l]);
    forget_values();  // loads seen so far may read what was just written
  }

  void* const* bufs_;
  const std::vector<int64_t>* sizes_;
  int64_t begin_, end_;
  std::unordered_map<const UOp*, std::vector<const UOp*>> open_;
  std::unordered_map<std::string, int64_t> var_values_;
  std::vector<std::pair<const UOp*, Loop>> ranges_;  // the open loops: few, so a flat list
  uint64_t iteration_ = 0;
  double largest_sum_operand_ = 0;
  bool made_infinity_ = false;
  double smallest_divisor_ = std::numeric_limits<double>::infinity();
  std::string plain_undefined_;
  MemoTable memo_;
  uint64_t memo_epoch_ = 0;
  std::unordered_map<const UOp*, Iterations> effects_run_;
  std::unordered_map<const UOp*, std::vector<const UOp*>> hoisted_;
  std::unordered_map<const UOp*, std::vector<char>> registers_;
};
}  // namespace

void interpret_kernel(const UOpPtr& kernel, void* const* bufs, const std::vector<int64_t>& vars,
                      int64_t begin, int64_t end) {
  if (!kernel) throw Error("kernel interpreter: the kernel is null");
  Interpreter(kernel, bufs, vars, begin, end).run(*kernel);
}

KernelRunFacts interpret_kernel_checked(const UOpPtr& kernel, void* const* bufs,
                                        const std::vector<int64_t>& sizes, const std::vector<int64_t>& vars,
                                        bool float_max_instruction) {
  if (!kernel) throw Error("kernel interpreter: the kernel is null");
  Interpreter interpreter(kernel, bufs, vars, 0, -1, &sizes);
  interpreter.float_max_instruction = float_max_instruction;
  interpreter.run(*kernel);
  return interpreter.facts();
}

}  // namespace loom
