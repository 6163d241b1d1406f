// Linearizer: nested loops out of a kernel AST. Built as a tree of blocks (one
// per open loop) so a value can still be placed in an outer loop, before the
// inner loop that asked for it, then flattened into the instruction list.
#include "codegen/linearizer.hpp"

#include <fmt/format.h>

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
    case LinearKind::AccInit: return "ACC_INIT";
    case LinearKind::AccFold: return "ACC_FOLD";
    case LinearKind::Store: return "STORE";
  }
  return "?";
}

namespace {

using RangeSet = std::vector<const UOp*>;  // sorted

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

// Ranges each node depends on that are still open where the node is used:
// a REDUCE closes its own reduce ranges.
std::unordered_map<const UOp*, RangeSet> live_ranges(const UOpPtr& kernel) {
  std::unordered_map<const UOp*, RangeSet> live;
  for (const auto& n : toposort(kernel)) {
    RangeSet set;
    for (const auto& s : n->src) {
      const RangeSet& add = live.at(s.get());
      RangeSet merged;
      std::set_union(set.begin(), set.end(), add.begin(), add.end(), std::back_inserter(merged));
      set = std::move(merged);
    }
    if (n->op == Op::RANGE) set.insert(std::lower_bound(set.begin(), set.end(), n.get()), n.get());
    if (n->op == Op::REDUCE)
      for (size_t i = 1; i < n->src.size(); ++i) std::erase(set, n->src[i].get());
    live.emplace(n.get(), std::move(set));
  }
  return live;
}

class Builder {
 public:
  explicit Builder(const UOpPtr& kernel) : live_(live_ranges(kernel)) { open_.push_back(&root_); }

  void effect(const UOpPtr& u);
  std::vector<LinearInst> flatten() const;

 private:
  std::unordered_map<const UOp*, RangeSet> live_;
  Block root_;
  std::vector<Block*> open_;  // open_[0] = &root_, then the open loops, outermost first

  size_t depth_of(const UOpPtr& u) const;
  bool is_placed(const UOpPtr& u) const;
  void add(Block& b, LinearKind kind, const UOpPtr& u);
  void open_loop(const UOpPtr& range);
  void close_loop();
  void value(const UOpPtr& u);
  void place(const UOpPtr& u);
  void reduce(const UOpPtr& u);
  void flatten_into(const Block& b, int depth, std::vector<LinearInst>& out) const;
};

// The outermost block where every live range of `u` is open.
size_t Builder::depth_of(const UOpPtr& u) const {
  size_t depth = 0, found = 0;
  const RangeSet& need = live_.at(u.get());
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
// source it needs that is not placed yet. Iterative over the sources so a deep
// expression does not exhaust the stack; REDUCE is placed as a unit.
void Builder::value(const UOpPtr& u) {
  if (is_placed(u)) return;
  std::vector<std::pair<UOpPtr, size_t>> stack{{u, 0}};  // node, next source to visit
  std::unordered_set<const UOp*> seen{u.get()};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    const bool descend = node->op != Op::REDUCE;
    if (descend && next < node->src.size()) {
      const UOpPtr& s = node->src[next++];
      if (!is_placed(s) && seen.insert(s.get()).second) stack.emplace_back(s, 0);
      continue;
    }
    const UOpPtr done = node;
    stack.pop_back();
    if (done->op == Op::REDUCE)
      reduce(done);
    else
      place(done);
  }
}

void Builder::place(const UOpPtr& u) {
  switch (u->op) {
    case Op::STORE:
    case Op::END:
    case Op::SINK:
      throw Error(fmt::format("linearize: {} is an effect but is used as a value", op_name(u->op)));
    default: break;
  }
  Block& b = *open_[depth_of(u)];
  add(b, LinearKind::Value, u);
  b.placed.insert(u.get());
}

// acc = identity; loops over the reduce ranges { acc = op(acc, value) }; read acc.
// All of it goes in the block where the REDUCE's result is placed, so the loops
// open there, and deeper open loops are set aside meanwhile.
void Builder::reduce(const UOpPtr& u) {
  const size_t depth = depth_of(u);
  std::vector<Block*> deeper(open_.begin() + static_cast<std::ptrdiff_t>(depth) + 1, open_.end());
  open_.resize(depth + 1);
  add(*open_.back(), LinearKind::AccInit, u);
  for (size_t i = 1; i < u->src.size(); ++i) open_loop(u->src[i]);
  value(u->src.at(0));
  add(*open_.back(), LinearKind::AccFold, u);
  for (size_t i = 1; i < u->src.size(); ++i) close_loop();
  place(u);
  open_.insert(open_.end(), deeper.begin(), deeper.end());
}

void Builder::effect(const UOpPtr& u) {
  if (u->op == Op::END) {
    for (size_t i = 1; i < u->src.size(); ++i) open_loop(u->src[i]);
    effect(u->src.at(0));
    for (size_t i = 1; i < u->src.size(); ++i) close_loop();
  } else if (u->op == Op::STORE) {
    value(u->src.at(0));
    value(u->src.at(1));
    add(*open_.back(), LinearKind::Store, u);  // inside all the END's loops
  } else {
    throw Error(fmt::format("linearize: a kernel effect must be END or STORE, got {} {}", op_name(u->op),
                            to_string(u->dtype)));
  }
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
  int values = 0, accs = 0;
  std::string operator()(const UOpPtr& u) const {
    if (u->op == Op::CONST) return const_text(*u);
    if (u->op == Op::RANGE) return range_name(*u);
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
    case LinearKind::AccInit: {
      std::string acc = fmt::format("acc{}", name.accs++);
      name.names[inst.uop.get()] = acc;
      return fmt::format("{} = ACC_INIT {} {}", acc, to_string(u.dtype), op_name(u.get<ReduceArg>().op));
    }
    case LinearKind::AccFold:
      return fmt::format("{0} = {1} {0}, {2}", name(inst.uop), op_name(u.get<ReduceArg>().op),
                         name(u.src[0]));
    case LinearKind::Store: return fmt::format("STORE {}, {}", name(u.src[0]), name(u.src[1]));
    case LinearKind::Value: break;
  }
  std::string text;
  if (u.op == Op::REDUCE) {
    text = fmt::format("= {} {}", to_string(u.dtype), name(inst.uop));  // the accumulator's value
  } else {
    text = fmt::format("= {} {}", op_name(u.op), to_string(u.dtype));
    for (size_t i = 0; i < u.src.size(); ++i) text += (i ? ", " : " ") + name(u.src[i]);
    if (u.op == Op::DEFINE_GLOBAL) text += fmt::format(" [slot {}]", u.arg_int());
    if (u.op == Op::DEFINE_VAR) text += fmt::format(" [{}]", u.get<VarArg>().name);
  }
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
  for (const auto& effect : kernel->src) builder.effect(effect);
  return LinearKernel{kernel, builder.flatten()};
}

}  // namespace loom
