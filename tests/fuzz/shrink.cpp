// Shrinking a failing graph file: rewrite its graph one node at a time (drop an
// output, cut a subgraph off at a fresh random input, bypass a node to one of
// its sources, replace a node by a constant) and keep each change after which
// the program still fails the same way, until no change helps.
#include "fuzz/fuzz.hpp"
#include "ir/pattern.hpp"
#include "ir/text.hpp"

#include <fmt/format.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace loom::fuzz {

std::string failure_class(const Failure& f) {
  // A gradient failure's class is its verdict: loom's graph or its compiled code.
  if (f.kind == "gradient")
    return f.message.find("compiled code is not") != std::string::npos ? "compiled code" : "gradient graph";
  static const std::regex shapes_and_asides(R"(\[[^\]]*\]|\([^)]*\))");
  // Any word with a digit in it (numbers, kernel names like r_3_he545, dtypes) or nan/inf.
  static const std::regex numbers(R"([^\s,:;]*\d[^\s,:;]*|-?\b(nan|inf)\b)");
  const std::string first_line = f.message.substr(0, f.message.find('\n'));  // then the kernels' text
  return std::regex_replace(std::regex_replace(first_line, shapes_and_asides, ""), numbers, "#");
}

namespace {

struct GraphFile {
  std::vector<UOpPtr> roots;            // BUFFER nodes are the file's placeholders
  std::map<int64_t, std::string> data;  // buffer number -> its `@data` line
  std::string directives;               // comment lines that say how to check it (`# @grad`)
};

GraphFile split(const std::string& text) {
  GraphFile g;
  std::string graph, line;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    if (line.rfind("@data", 0) == 0) {
      std::istringstream fields(line);
      std::string tag;
      int64_t number = -1;
      fields >> tag >> number;
      g.data[number] = line;
    } else if (line.rfind("# @", 0) == 0) {
      g.directives += line + '\n';
    } else if (line.rfind('#', 0) != 0) {
      graph += line + '\n';
    }
  }
  g.roots = parse_text_roots(graph);
  return g;
}

std::string join(const GraphFile& g) {
  std::string out = "# loom graph 1\n" + g.directives + to_text(g.roots);
  for (const auto& n : toposort(g.roots))
    if (n->op == Op::BUFFER)
      if (auto it = g.data.find(n->get<std::vector<int64_t>>().at(0)); it != g.data.end())
        out += it->second + "\n";
  return out;
}

bool same_failure(const Outcome& o, const Failure& f) {
  return o.valid && o.failure && o.failure->kind == f.kind && failure_class(*o.failure) == failure_class(f);
}

UOpPtr constant_of(const UOpPtr& like) {
  UOpPtr c = like->dtype.is_float() ? const_float(like->dtype, 1.0) : const_int(like->dtype, 1);
  const Shape& shape = *like->shape();
  if (shape.empty()) return c;
  c = UOp::make(Op::RESHAPE, c->dtype, {c}, Shape(shape.size(), 1));
  return UOp::make(Op::EXPAND, c->dtype, {c}, shape);
}

class Shrinker {
 public:
  Shrinker(GraphFile g, const Failure& f, const CheckOptions& o, int budget)
      : best_(std::move(g)), failure_(f), options_(o), budget_(budget) {
    for (const auto& [number, line] : best_.data) next_buffer_ = std::max(next_buffer_, number + 1);
  }

  GraphFile run() {
    bool progress = true;
    while (progress && budget_ > 0) {
      progress = drop_roots();
      for (Edit edit : {Edit::Cut, Edit::Bypass, Edit::Constant}) progress |= sweep(edit);
    }
    return best_;
  }

 private:
  enum class Edit { Cut, Bypass, Constant };

  bool attempt(GraphFile candidate) {
    // Only strictly smaller graphs: replacing a node by a constant must not grow it.
    if (toposort(candidate.roots).size() >= toposort(best_.roots).size()) return false;
    const std::string text = join(candidate);
    if (budget_ <= 0 || !tried_.insert(text).second) return false;
    --budget_;
    if (!same_failure(check_graph(text, options_), failure_)) return false;
    best_ = std::move(candidate);
    return true;
  }

  bool drop_roots() {
    bool progress = false;
    for (size_t i = best_.roots.size(); i-- > 0 && best_.roots.size() > 1;) {
      GraphFile c = best_;
      c.roots.erase(c.roots.begin() + static_cast<std::ptrdiff_t>(i));
      progress |= attempt(std::move(c));
    }
    return progress;
  }

  // One edit tried at every node, from the roots towards the inputs; after a
  // success the sweep goes on from the same depth of the smaller graph.
  bool sweep(Edit edit) {
    bool progress = false;
    for (size_t depth = 0;; ++depth) {
      const std::vector<UOpPtr> nodes = toposort(best_.roots);
      if (depth >= nodes.size() || budget_ <= 0) return progress;
      const UOpPtr n = nodes[nodes.size() - 1 - depth];
      if (!editable(n, nodes)) continue;
      progress |= try_edit(edit, n);
    }
  }

  bool editable(const UOpPtr& n, const std::vector<UOpPtr>& nodes) const {
    if (!n->shape() || n->op == Op::BUFFER || n->op == Op::CONST) return false;
    for (const auto& u : nodes)  // ASSIGN targets must stay buffers
      if (u->op == Op::ASSIGN && (u->src[0] == n || (!u->src[0]->src.empty() && u->src[0]->src[0] == n)))
        return false;
    return true;
  }

  bool try_edit(Edit edit, const UOpPtr& n) {
    const bool view_of_buffer = n->op == Op::RESHAPE && n->src[0]->op == Op::BUFFER;
    switch (edit) {
      case Edit::Cut: return !view_of_buffer && attempt(cut(n));
      case Edit::Constant: return !view_of_buffer && attempt(replaced(n, constant_of(n)));
      case Edit::Bypass:
        for (const auto& s : n->src)
          if (s->shape() && *s->shape() == *n->shape() && s->dtype == n->dtype && attempt(replaced(n, s)))
            return true;
        return false;
    }
    return false;
  }

  GraphFile replaced(const UOpPtr& from, const UOpPtr& to) const {
    GraphFile c = best_;
    const UOpPtr sink = substitute(UOp::make(Op::SINK, DType::Bool, c.roots), {{from, to}});
    c.roots = sink->src;
    return c;
  }

  // A fresh input of n's shape and dtype, filled from a seed.
  GraphFile cut(const UOpPtr& n) {
    const Shape& shape = *n->shape();
    int64_t size = 1;
    for (int64_t d : shape) size *= d;
    const int64_t number = next_buffer_++;
    UOpPtr buf = UOp::make(Op::BUFFER, n->dtype, {}, std::vector<int64_t>{number, size});
    UOpPtr view = shape == Shape{size} ? buf : UOp::make(Op::RESHAPE, n->dtype, {buf}, shape);
    GraphFile c = replaced(n, view);
    c.data[number] = fmt::format("@data {} random {}", number, number);
    return c;
  }

  GraphFile best_;
  Failure failure_;
  CheckOptions options_;
  int budget_;
  std::set<std::string> tried_;
  int64_t next_buffer_ = 0;
};

}  // namespace

std::string shrink(const std::string& graph_text, const Failure& failure, const CheckOptions& options,
                   int max_attempts) {
  return join(Shrinker(split(graph_text), failure, options, max_attempts).run());
}

}  // namespace loom::fuzz
