// Linearizer: nested loops out of a kernel AST. Built as a tree of blocks (one
// per open loop) so a value can still be placed in an outer loop, before the
// inner loop that asked for it, then flattened into the instruction list.
#include "codegen/linearizer.hpp"

#include "codegen/needed_loops.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <unordered_set>

namespace loom {

std::string_view linear_kind_name(LinearKind k) {
  switch (k) {
    case LinearKind::LoopBegin: return "LOOP";
    case LinearKind::LoopEnd: return "ENDLOOP";
    case LinearKind::Value: return "VALUE";
    case LinearKind::Store: return "STORE";
  }
  return "?";
}

namespace {

struct Block;
struct Item {
  LinearKind kind;
  UOpPtr uop;
  std::unique_ptr<Block> loop;  // set for a nested loop (kind LoopBegin)
};

// The body of one loop (or of the kernel, range == nullptr). New instructions
// go at `insert_at`: the end while this is the innermost open loop, and just
// before the still-open inner loop otherwise.
struct Block {
  UOpPtr range;
  std::vector<Item> items;
  size_t insert_at = 0;
  std::unordered_set<const UOp*> placed;  // values computed in this block
};

std::string range_name(const UOp& r) { return fmt::format("r{}", r.get<AxisArg>().id); }

// The nodes that wait for a loop to finish (an END under them: an accumulator's result).
std::unordered_set<const UOp*> after_loops(const UOpPtr& kernel) {
  std::unordered_set<const UOp*> out;
  for (const UOpPtr& u : toposort(kernel))
    if (u->op == Op::END ||
        std::any_of(u->src.begin(), u->src.end(), [&](const UOpPtr& s) { return out.contains(s.get()); }))
      out.insert(u.get());
  return out;
}

class Builder {
 public:
  explicit Builder(const UOpPtr& kernel) : live_(kernel), after_loops_(after_loops(kernel)) {
    open_.push_back(&root_);
  }

  void effect(const UOpPtr& u);
  void kernel_effects(const UOpPtr& sink);
  std::vector<LinearInst> flatten() const;

 private:
  mutable NeededLoops live_;
  const std::unordered_set<const UOp*> after_loops_;
  Block root_;
  std::vector<Block*> open_;  // open_[0] = &root_, then the open loops, outermost first

  size_t depth_of(const UOpPtr& u) const;
  bool is_placed(const UOpPtr& u) const;
  void add(Block& b, LinearKind kind, const UOpPtr& u);
  void open_loop(const UOpPtr& range);
  void close_loop();
  void value(const UOpPtr& u);
  void place(const UOpPtr& u);
  void place_store(const UOpPtr& u);
  void place_end(const UOpPtr& u);
  void flatten_into(const Block& b, int depth, std::vector<LinearInst>& out) const;
};

// The outermost block where every live range of `u` is open.
size_t Builder::depth_of(const UOpPtr& u) const {
  size_t depth = 0, found = 0;
  const RangeSet& need = live_(u);
  for (size_t i = 1; i < open_.size(); ++i)
    if (std::binary_search(need.begin(), need.end(), open_[i]->range.get())) depth = i, ++found;
  if (found != need.size())
    for (const UOp* r : need)
      if (std::none_of(open_.begin() + 1, open_.end(), [r](const Block* b) { return b->range.get() == r; }))
        throw Error(fmt::format("linearize: {} {} uses range {} outside the loops of that range",
                                op_name(u->op), to_string(u->dtype), range_name(*r)));
  return depth;
}

bool Builder::is_placed(const UOpPtr& u) const {
  if (u->op == Op::CONST || u->op == Op::RANGE) return true;  // inline, or the loop counter
  return open_[depth_of(u)]->placed.contains(u.get());
}

void Builder::add(Block& b, LinearKind kind, const UOpPtr& u) {
  b.items.insert(b.items.begin() + static_cast<std::ptrdiff_t>(b.insert_at++), Item{kind, u, nullptr});
}

void Builder::open_loop(const UOpPtr& range) {
  if (range->op != Op::RANGE)
    throw Error(
        fmt::format("linearize: END/REDUCE closes over a {} where a RANGE was expected", op_name(range->op)));
  for (const Block* b : open_)
    if (b->range == range) throw Error("linearize: range " + range_name(*range) + " is opened twice");
  const bool parallel = range->get<AxisArg>().kind == AxisKind::Parallel;
  if (parallel && open_.size() != 1)
    throw Error("linearize: parallel range " + range_name(*range) + " must be the outermost loop");
  if (!parallel) value(range->src.at(0));  // the loop bound, computed before the loop
  auto loop = std::make_unique<Block>();
  loop->range = range;
  Block* inner = loop.get();
  Block& outer = *open_.back();
  outer.items.insert(outer.items.begin() + static_cast<std::ptrdiff_t>(outer.insert_at),
                     Item{LinearKind::LoopBegin, range, std::move(loop)});
  open_.push_back(inner);
}

void Builder::close_loop() {
  open_.pop_back();
  ++open_.back()->insert_at;  // later instructions of the outer loop go after the closed one
}

// Makes `u` available in the innermost open loop: places it and, first, every
// source it needs that is not placed yet, effects it waits for included.
// Sources that wait for a loop go first, so what the others compute (an epilogue's
// loads, a mask) is placed after that loop rather than held in registers across it.
// Iterative over the sources so a deep expression does not exhaust the stack;
// an END is placed as a unit (its loops, then its body inside them).
void Builder::value(const UOpPtr& u) {
  if (is_placed(u)) return;
  // node, next of its 2n source visits (those that wait for a loop, then the others)
  std::vector<std::pair<UOpPtr, size_t>> stack{{u, 0}};
  std::unordered_set<const UOp*> seen{u.get()};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (node->op == Op::REDUCE)
      throw Error(fmt::format("linearize: REDUCE {} must be lowered to an accumulator first (lower_reduce)",
                              to_string(node->dtype)));
    const size_t n = node->src.size();
    if (node->op != Op::END && next < 2 * n) {
      const bool first_pass = next < n;
      const UOpPtr& s = node->src[next++ % n];
      if (after_loops_.contains(s.get()) != first_pass) continue;
      if (!is_placed(s) && seen.insert(s.get()).second) stack.emplace_back(s, 0);
      continue;
    }
    const UOpPtr done = node;
    stack.pop_back();
    if (done->op == Op::END)
      place_end(done);
    else if (done->op == Op::STORE)
      place_store(done);
    else
      place(done);
  }
}

void Builder::place(const UOpPtr& u) {
  switch (u->op) {
    case Op::SINK:
      throw Error(fmt::format("linearize: {} is the kernel's root but is used as a value", op_name(u->op)));
    default: break;
  }
  Block& b = *open_[depth_of(u)];
  add(b, LinearKind::Value, u);
  b.placed.insert(u.get());
}

// A STORE something waits for (an accumulator's update): once per iteration of
// the loops its index and value need, so in the outermost block that has them.
void Builder::place_store(const UOpPtr& u) {
  Block& b = *open_[depth_of(u)];
  add(b, LinearKind::Store, u);
  b.placed.insert(u.get());
}

// An END something waits for (an accumulator's loop): its loops open in the
// block where the END is placed, and deeper open loops are set aside meanwhile.
void Builder::place_end(const UOpPtr& u) {
  const size_t depth = depth_of(u);
  std::vector<Block*> deeper(open_.begin() + static_cast<std::ptrdiff_t>(depth) + 1, open_.end());
  open_.resize(depth + 1);
  effect(u);
  open_[depth]->placed.insert(u.get());
  open_.insert(open_.end(), deeper.begin(), deeper.end());
}

void Builder::effect(const UOpPtr& u) {
  if (u->op == Op::SINK) {  // a group of effects, in order
    for (const auto& s : u->src) effect(s);
  } else if (u->op == Op::END) {
    for (size_t i = 1; i < u->src.size(); ++i) open_loop(u->src[i]);
    effect(u->src.at(0));
    for (size_t i = 1; i < u->src.size(); ++i) close_loop();
  } else if (u->op == Op::STORE) {
    value(u->src.at(0));
    value(u->src.at(1));
    add(*open_.back(), LinearKind::Store, u);  // inside all the END's loops
  } else {
    throw Error(fmt::format("linearize: a kernel effect must be END, STORE or a SINK of them, got {} {}",
                            op_name(u->op), to_string(u->dtype)));
  }
}

// The kernel's effects in order. Consecutive ENDs share the loops of their common
// leading ranges (a kernel of several outputs, docs/kernel-ir.md): those stay open
// from one END's body to the next, so the values placed in them are computed once.
void Builder::kernel_effects(const UOpPtr& sink) {
  std::vector<UOpPtr> open;  // the ranges the previous END left open, outermost first
  for (const auto& u : sink->src) {
    size_t keep = 0;
    while (u->op == Op::END && keep < open.size() && keep + 1 < u->src.size() &&
           u->src[keep + 1] == open[keep])
      ++keep;
    for (; open.size() > keep; open.pop_back()) close_loop();
    if (u->op != Op::END) {
      effect(u);
      continue;
    }
    for (size_t i = keep + 1; i < u->src.size(); ++i) open_loop(u->src[i]), open.push_back(u->src[i]);
    effect(u->src.at(0));
  }
  for (; !open.empty(); open.pop_back()) close_loop();
}

void Builder::flatten_into(const Block& b, int depth, std::vector<LinearInst>& out) const {
  for (const Item& item : b.items) {
    out.push_back({item.kind, item.uop, depth});
    if (!item.loop) continue;
    flatten_into(*item.loop, depth + 1, out);
    out.push_back({LinearKind::LoopEnd, item.uop, depth});
  }
}

std::vector<LinearInst> Builder::flatten() const {
  std::vector<LinearInst> out;
  flatten_into(root_, 0, out);
  return out;
}

// ---- dump ---------------------------------------------------------------------------
std::string const_text(const UOp& c) {
  if (c.dtype.is_float()) return fmt::format("{}", c.const_value());
  if (c.dtype.is_bool()) return c.const_int() ? "true" : "false";
  return fmt::format("{}", c.const_int());
}

struct Namer {
  std::unordered_map<const UOp*, std::string> names;
  int values = 0, stores = 0;
  std::string operator()(const UOpPtr& u) const {
    if (u->op == Op::CONST) return const_text(*u);
    if (u->op == Op::RANGE) return range_name(*u);
    if (u->op == Op::END) {  // an effect an AFTER waits for: its loops
      std::string loops;
      for (size_t i = 1; i < u->src.size(); ++i) loops += (i > 1 ? " " : "") + (*this)(u->src[i]);
      return "end(" + loops + ")";
    }
    auto it = names.find(u.get());
    return it == names.end() ? "?" : it->second;
  }
};

std::string inst_text(const LinearInst& inst, Namer& name) {
  const UOp& u = *inst.uop;
  switch (inst.kind) {
    case LinearKind::LoopBegin: {
      const AxisArg& axis = u.get<AxisArg>();
      if (axis.kind == AxisKind::Parallel)
        return fmt::format("LOOP {} parallel [begin, end)", name(inst.uop));
      return fmt::format("LOOP {} {} [0, {})", name(inst.uop), axis_kind_name(axis.kind), name(u.src[0]));
    }
    case LinearKind::LoopEnd: return "ENDLOOP " + name(inst.uop);
    case LinearKind::Store: {
      name.names[inst.uop.get()] = fmt::format("store{}", name.stores++);
      return fmt::format("STORE {}, {}", name(u.src[0]), name(u.src[1]));
    }
    case LinearKind::Value: break;
  }
  std::string text = fmt::format("= {} {}", op_name(u.op), to_string(u.dtype));
  for (size_t i = 0; i < u.src.size(); ++i) text += (i ? ", " : " ") + name(u.src[i]);
  if (u.op == Op::DEFINE_GLOBAL) text += fmt::format(" [slot {}]", u.arg_int());
  if (u.op == Op::DEFINE_VAR) text += fmt::format(" [{}]", u.get<VarArg>().name);
  if (u.op == Op::DEFINE_REG || u.op == Op::GEP)
    text += fmt::format(" [{}]", fmt::join(u.get<std::vector<int64_t>>(), " "));
  std::string id = fmt::format("%{}", name.values++);
  name.names[inst.uop.get()] = id;
  return id + " " + text;
}

}  // namespace

std::string LinearKernel::dump() const {
  std::string out;
  Namer name;
  for (const LinearInst& inst : insts)
    out += std::string(2 * static_cast<size_t>(inst.depth), ' ') + inst_text(inst, name) + "\n";
  return out;
}

LinearKernel linearize(const UOpPtr& kernel) {
  if (!kernel || kernel->op != Op::SINK)
    throw Error(fmt::format("linearize: a kernel is a SINK of effects, got {}",
                            kernel ? op_name(kernel->op) : "null"));
  Builder builder(kernel);
  builder.kernel_effects(kernel);
  return LinearKernel{kernel, builder.flatten()};
}

}  // namespace loom
