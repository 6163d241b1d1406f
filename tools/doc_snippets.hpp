#pragma once
// The docs' C++ snippets as one program that the build compiles and the
// `doc_snippets` test runs (docs/loom-dump.md "Checked listings"). A ```cpp
// block right after
//
//   <!-- program -->              is a whole file: includes, definitions, perhaps main()
//   <!-- statements: PRELUDE -->  is statements, run in a main() after PRELUDE
//
// and each becomes a namespace of its own, its includes hoisted to the top; every
// snippet sees <loom/loom.hpp> (the whole public API), <iostream> and fmt.
#include <string>
#include <vector>

namespace loom::tools {

struct DocSnippet {
  std::string file;     // as given, for messages
  int marker_line = 0;  // 1-based
  bool statements = false;
  std::string prelude;
  std::vector<std::string> code;
};

// The marked ```cpp blocks of a markdown text. A marker not followed by one is a
// loom::Error naming its line.
std::vector<DocSnippet> doc_snippets(const std::string& markdown, const std::string& file);

// One C++ source holding every snippet: `int main()` runs each in order and
// returns 1 when one throws, naming its file and line.
std::string snippets_program(const std::vector<DocSnippet>& snippets);

}  // namespace loom::tools
