#pragma once
// The IR text form: one node a line, sources before users,
//
//   %0 = CONST i64 [16]
//   %1 = RANGE i64 %0 [axis 0 loop]
//   %2 = MUL i64 %1, %0
//
// Nodes are numbered by their position in the toposort, never by address, so
// one graph prints identically run to run; parsing rebuilds the very same
// interned nodes, so parse_text(to_text(g)) == g. The grammar is in docs/ir.md.
#include "ir/uop.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace loom {

// One line per node reachable from `root`; the root is the last line.
std::string to_text(const UOpPtr& root);
// The nodes of all `roots`. A trailing `roots %a, %b` line is added only when the
// roots are not exactly the nodes nothing else uses (one root inside another's
// graph, or a root given twice), so plain dumps stay plain and parsing is exact.
std::string to_text(const std::vector<UOpPtr>& roots);
// An arg as it appears between the brackets: `1.5`, `(4 8)`, `axis 2 reduce`.
// Empty for no arg.
std::string arg_text(const Arg& arg);

// The single root of `text`: its one node nothing else uses. Throws loom::Error
// (naming the line and what was expected) on malformed text or several roots.
UOpPtr parse_text(std::string_view text);
// The roots of `text`: the nodes listed on its `roots` line if it has one, else
// the nodes nothing else uses, in the order they are defined.
std::vector<UOpPtr> parse_text_roots(std::string_view text);

}  // namespace loom
