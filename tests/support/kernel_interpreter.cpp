#include "support/kernel_interpreter.hpp"

#include "support/kernel_scalar.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <unordered_map>

namespace loom {

namespace {
namespace ks = kernel_scalar;
using ks::Value;

[[noreturn]] void fail(const UOp& at, const std::string& what) {
  throw Error("kernel interpreter: " + std::string(op_name(at.op)) + " " + to_string(at.dtype) + ": " + what);
}

void need_src(const UOp& u, size_t lo, size_t hi) {
  if (u.src.size() < lo || u.src.size() > hi)
    fail(u, "has " + std::to_string(u.src.size()) + " sources, expected " + std::to_string(lo) +
                (hi == lo ? "" : " to " + std::to_string(hi)));
}

// Plain recursive evaluation. Loop variables live in `ranges_`; `memo_` keeps
// values computed since the last change of any loop variable or memory, so a
// node shared by many users is evaluated once per iteration, never stale.
class Interpreter {
 public:
  Interpreter(const UOpPtr& kernel, void* const* bufs, const std::vector<int64_t>& vars, int64_t begin,
              int64_t end, const std::vector<int64_t>* sizes = nullptr)
      : bufs_(bufs), sizes_(sizes), begin_(begin), end_(end) {
    bind_vars(kernel, vars);
  }

  void run(const UOp& effect) {
    switch (effect.op) {
      case Op::SINK:
        for (const auto& s : effect.src) run(*s);
        return;
      case Op::END:
        need_src(effect, 1, effect.src.size());
        return loops(effect.src, 1, [&] { run(*effect.src[0]); });
      case Op::STORE: return store(effect);
      default: fail(effect, "is not an effect: expected SINK, END or STORE");
    }
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
  void loops(const std::vector<UOpPtr>& src, size_t first, const std::function<void()>& body) {
    if (first == src.size()) return body();
    const UOp& r = *src[first];
    if (r.op != Op::RANGE) fail(r, "found where a loop RANGE was expected");
    if (ranges_.count(&r)) fail(r, "is already an open loop");
    const auto [lo, hi] = iterations(r);
    for (int64_t i = lo; i < hi; ++i) {
      set_range(r, i);
      loops(src, first + 1, body);
    }
    ranges_.erase(&r);
    memo_.clear();
  }

  std::pair<int64_t, int64_t> iterations(const UOp& r) {
    need_src(r, 1, 1);
    const Value extent = eval(*r.src[0]);
    if (!extent.dtype.is_int()) fail(r, "its end must be an integer, got " + to_string(extent.dtype));
    const bool sliced = r.get<AxisArg>().kind == AxisKind::Parallel && end_ >= 0;
    if (!sliced) return {0, extent.i};
    return {std::max<int64_t>(begin_, 0), std::min(end_, extent.i)};
  }

  void set_range(const UOp& r, int64_t i) {
    ranges_[&r] = i;
    memo_.clear();
  }

  Value eval(const UOp& u) {
    if (auto it = memo_.find(&u); it != memo_.end()) return it->second;
    if (u.dtype.lanes != 1) fail(u, "vector values are not supported (scalar kernels only)");
    const Value v = compute(u);
    if (v.dtype != u.dtype) fail(u, "computes a " + to_string(v.dtype) + " value from its sources");
    memo_.emplace(&u, v);
    return v;
  }

  Value compute(const UOp& u) {
    switch (u.op) {
      case Op::CONST: return ks::of_const(u);
      case Op::RANGE: return range_value(u);
      case Op::DEFINE_VAR: return ks::of_int(DType::Int64, var_values_.at(u.get<VarArg>().name));
      case Op::LOAD: return load(u);
      case Op::REDUCE: return reduce(u);
      case Op::AFTER: need_src(u, 1, u.src.size()); return eval(*u.src[0]);
      case Op::CAST: need_src(u, 1, 1); return ks::cast(eval(*u.src[0]), u.dtype);
      case Op::BITCAST: need_src(u, 1, 1); return ks::bitcast(eval(*u.src[0]), u.dtype);
      case Op::WHERE:
        need_src(u, 3, 3);
        return ks::truthy(eval(*u.src[0])) ? eval(*u.src[1]) : eval(*u.src[2]);
      case Op::MULACC:
        need_src(u, 3, 3);
        return ks::mulacc(eval(*u.src[0]), eval(*u.src[1]), eval(*u.src[2]));
      default: return alu(u);
    }
  }

  Value alu(const UOp& u) {
    if (is_unary(u.op)) {
      need_src(u, 1, 1);
      return ks::unary(u.op, eval(*u.src[0]));
    }
    if (is_binary(u.op)) {
      need_src(u, 2, 2);
      return ks::binary(u.op, eval(*u.src[0]), eval(*u.src[1]));
    }
    fail(u, "is not a value the kernel IR defines");
  }

  Value range_value(const UOp& r) {
    auto it = ranges_.find(&r);
    if (it == ranges_.end()) fail(r, "used outside its loop");
    return ks::of_int(DType::Int64, it->second);
  }

  Value reduce(const UOp& u) {
    need_src(u, 1, u.src.size());
    const Op op = u.get<ReduceArg>().op;
    Value acc = ks::reduce_identity(op, u.dtype);
    loops(u.src, 1, [&] { acc = ks::binary(op, acc, eval(*u.src[0])); });
    return acc;
  }

  // The buffer parameter behind an INDEX's first source (through AFTER edges).
  static const UOp& buffer_of(const UOp& index) {
    const UOp* b = index.src[0].get();
    while (b->op == Op::AFTER && !b->src.empty()) b = b->src[0].get();
    if (b->op != Op::DEFINE_GLOBAL || !b->dtype.ptr)
      fail(*b, "found where a DEFINE_GLOBAL buffer was expected");
    return *b;
  }

  // The element an INDEX points at, or null where its `valid` is false.
  char* element(const UOp& index) {
    if (index.op != Op::INDEX) fail(index, "found where an INDEX was expected");
    need_src(index, 2, 3);
    if (index.src.size() == 3 && !ks::truthy(eval(*index.src[2]))) return nullptr;
    const UOp& buf = buffer_of(index);
    const Value at = eval(*index.src[1]);
    if (at.dtype != DType::Int64) fail(index, "its index must be i64, got " + to_string(at.dtype));
    const auto slot = static_cast<size_t>(buf.arg_int());
    if (sizes_ && (slot >= sizes_->size() || at.i < 0 || at.i >= (*sizes_)[slot]))
      fail(index, "index " + std::to_string(at.i) + " is outside buffer slot " + std::to_string(slot) +
                      " of " + (slot < sizes_->size() ? std::to_string((*sizes_)[slot]) : std::string("no")) +
                      " elements");
    return static_cast<char*>(bufs_[buf.arg_int()]) + at.i * buf.dtype.itemsize();
  }

  Value load(const UOp& u) {
    need_src(u, 1, u.src.size());
    const UOp& index = *u.src[0];
    const char* p = element(index);
    const DType elem = buffer_of(index).dtype.base();
    return p ? ks::load(elem, p) : ks::zero(elem);
  }

  void store(const UOp& u) {
    need_src(u, 2, 2);
    char* p = element(*u.src[0]);
    if (!p) return;
    const Value v = eval(*u.src[1]);
    const DType elem = buffer_of(*u.src[0]).dtype.base();
    if (v.dtype != elem)
      fail(u, "stores a " + to_string(v.dtype) + " value into a " + to_string(elem) + " buffer");
    ks::store(p, v);
    memo_.clear();  // loads seen so far may read what was just written
  }

  void* const* bufs_;
  const std::vector<int64_t>* sizes_;
  int64_t begin_, end_;
  std::unordered_map<std::string, int64_t> var_values_;
  std::unordered_map<const UOp*, int64_t> ranges_;
  std::unordered_map<const UOp*, Value> memo_;
};
}  // namespace

void interpret_kernel(const UOpPtr& kernel, void* const* bufs, const std::vector<int64_t>& vars,
                      int64_t begin, int64_t end) {
  if (!kernel) throw Error("kernel interpreter: the kernel is null");
  Interpreter(kernel, bufs, vars, begin, end).run(*kernel);
}

void interpret_kernel_checked(const UOpPtr& kernel, void* const* bufs, const std::vector<int64_t>& sizes,
                              const std::vector<int64_t>& vars) {
  if (!kernel) throw Error("kernel interpreter: the kernel is null");
  Interpreter(kernel, bufs, vars, 0, -1, &sizes).run(*kernel);
}

}  // namespace loom
