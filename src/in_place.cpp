#include "src/in_place.hpp"

#include "schedule/schedule.hpp"

#include <algorithm>
#include <mutex>

namespace loom::detail {

namespace {
const UOpPtr& buffer_of_view(const UOpPtr& view) { return view->op == Op::BUFFER ? view : view->src[0]; }
}  // namespace

std::vector<UOpPtr> in_place_buffers(const std::vector<UOpPtr>& targets, const GraphSignature& sig) {
  std::vector<UOpPtr> into(targets.size());
  const auto is_assign = [](const UOpPtr& t) { return t->op == Op::ASSIGN && is_buffer_view(t->src[0]); };
  if (std::none_of(targets.begin(), targets.end(), is_assign)) return into;

  // References each node has from inside the realize: `graph` itself, its
  // users in the graph, and for a target `targets` plus its tensor. use_count
  // counts every holder, so anything beyond that is a tensor, graph or alias
  // that outlives the realize.
  const std::vector<UOpPtr>& graph = sig.nodes;
  const auto pos = [&](const UOpPtr& n) { return sig.index.find(n.get()); };
  std::vector<long> inside(graph.size(), 1);
  for (const auto& n : graph)
    for (const auto& s : n->src) ++inside[pos(s)];
  for (const auto& t : targets) inside[pos(t)] += 2;

  // Users before sources: a node read later makes everything below it read later.
  std::vector<char> read_later(graph.size(), 0);
  for (size_t i = graph.size(); i-- > 0;) {
    read_later[i] |= graph[i].use_count() > inside[i];
    if (read_later[i])
      for (const auto& s : graph[i]->src) read_later[pos(s)] = 1;
  }
  for (size_t i = 0; i < targets.size(); ++i)
    if (is_assign(targets[i])) {
      const UOpPtr& buffer = buffer_of_view(targets[i]->src[0]);
      if (!read_later[pos(buffer)]) into[i] = buffer;
    }
  return into;
}

namespace {
// The assigns not yet realized, each with the tensor holding it. An entry
// whose ASSIGN node died can no longer be reached by any graph and is dropped.
class PendingAssigns {
 public:
  static PendingAssigns& get() {
    static PendingAssigns* p = new PendingAssigns();  // never destroyed: tensors may outlive statics
    return *p;
  }
  void add(const std::shared_ptr<TensorNode>& holder) {
    std::lock_guard lock(mu_);
    entries_.push_back({holder->uop, holder});
    if (entries_.size() >= prune_at_) {
      prune();
      prune_at_ = std::max<size_t>(64, 2 * entries_.size());
    }
  }
  // Live (ASSIGN, holder) pairs.
  std::vector<std::pair<UOpPtr, std::shared_ptr<TensorNode>>> live() {
    std::lock_guard lock(mu_);
    prune();
    std::vector<std::pair<UOpPtr, std::shared_ptr<TensorNode>>> out;
    for (const auto& e : entries_)
      if (auto a = e.assign.lock())
        if (auto h = e.holder.lock()) out.emplace_back(std::move(a), std::move(h));
    return out;
  }

 private:
  struct Entry {
    std::weak_ptr<const UOp> assign;
    std::weak_ptr<TensorNode> holder;
  };
  void prune() {
    std::erase_if(entries_, [](const Entry& e) { return e.assign.expired() || e.holder.expired(); });
  }
  std::mutex mu_;
  std::vector<Entry> entries_;
  size_t prune_at_ = 64;
};
}  // namespace

void note_assign(const std::shared_ptr<TensorNode>& holder) { PendingAssigns::get().add(holder); }

std::vector<std::shared_ptr<TensorNode>> assigns_reached(
    const GraphSignature& graph, const std::vector<std::shared_ptr<TensorNode>>& pending) {
  const auto live = PendingAssigns::get().live();
  if (live.empty()) return {};
  std::vector<std::shared_ptr<TensorNode>> out;
  for (const auto& [assign, holder] : live)
    if (graph.index.contains(assign.get()) && holder->uop == assign &&
        std::find(pending.begin(), pending.end(), holder) == pending.end() &&
        std::find(out.begin(), out.end(), holder) == out.end())
      out.push_back(holder);
  return out;
}

namespace {
thread_local std::vector<std::weak_ptr<TensorNode>> t_deferred;
}

void defer_realize(const std::shared_ptr<TensorNode>& holder) { t_deferred.push_back(holder); }

std::vector<std::shared_ptr<TensorNode>> take_deferred() {
  std::vector<std::shared_ptr<TensorNode>> out;
  if (t_deferred.empty()) return out;
  std::vector<std::weak_ptr<TensorNode>> list;
  list.swap(t_deferred);
  for (const auto& w : list)
    if (auto h = w.lock())
      if (!is_buffer_view(h->uop) && std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  return out;
}

std::vector<std::shared_ptr<TensorNode>> assigns_into(const std::vector<const void*>& memory) {
  if (memory.empty()) return {};
  const auto live = PendingAssigns::get().live();
  std::vector<std::shared_ptr<TensorNode>> out;
  for (const auto& [assign, holder] : live) {
    if (holder->uop != assign || !is_buffer_view(assign->src[0])) continue;
    const UOpPtr& target = buffer_of_view(assign->src[0]);
    if (std::find(memory.begin(), memory.end(), target->storage().get()) != memory.end() &&
        std::find(out.begin(), out.end(), holder) == out.end())
      out.push_back(holder);
  }
  return out;
}

}  // namespace loom::detail
