#include "src/in_place.hpp"

#include "schedule/schedule.hpp"

#include <algorithm>
#include <unordered_map>

namespace loom::detail {

namespace {
const UOpPtr& buffer_of_view(const UOpPtr& view) { return view->op == Op::BUFFER ? view : view->src[0]; }
}  // namespace

std::vector<UOpPtr> in_place_buffers(const std::vector<UOpPtr>& targets) {
  std::vector<UOpPtr> into(targets.size());
  const auto is_assign = [](const UOpPtr& t) { return t->op == Op::ASSIGN && is_buffer_view(t->src[0]); };
  if (std::none_of(targets.begin(), targets.end(), is_assign)) return into;

  // References each node has from inside the realize: `graph` itself, its
  // users in the graph, and for a target `targets` plus its tensor. use_count
  // counts every holder, so anything beyond that is a tensor, graph or alias
  // that outlives the realize.
  const std::vector<UOpPtr> graph = toposort(targets);
  std::unordered_map<const UOp*, size_t> pos;
  for (size_t i = 0; i < graph.size(); ++i) pos.emplace(graph[i].get(), i);
  std::vector<long> inside(graph.size(), 1);
  for (const auto& n : graph)
    for (const auto& s : n->src) ++inside[pos.at(s.get())];
  for (const auto& t : targets) inside[pos.at(t.get())] += 2;

  // Users before sources: a node read later makes everything below it read later.
  std::vector<char> read_later(graph.size(), 0);
  for (size_t i = graph.size(); i-- > 0;) {
    read_later[i] |= graph[i].use_count() > inside[i];
    if (read_later[i])
      for (const auto& s : graph[i]->src) read_later[pos.at(s.get())] = 1;
  }
  for (size_t i = 0; i < targets.size(); ++i)
    if (is_assign(targets[i])) {
      const UOpPtr& buffer = buffer_of_view(targets[i]->src[0]);
      if (!read_later[pos.at(buffer.get())]) into[i] = buffer;
    }
  return into;
}

}  // namespace loom::detail
