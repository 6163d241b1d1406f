#pragma once
// A unified diff of two texts, line by line (loom-dump --diff): what a stage
// changed, in the form `diff -u` and `patch` read.
#include <string>
#include <vector>

namespace loom::tools {

// The text's lines, without their newlines.
std::vector<std::string> text_lines(const std::string& text);

// "" when the texts are equal; otherwise `--- before` / `+++ after` headers and
// `@@ -a,n +b,m @@` hunks with `context` unchanged lines around each change.
// The edit script is a shortest one (Myers); past a few thousand changed lines
// it degrades to replacing the differing middle whole.
std::string unified_diff(const std::string& before, const std::string& after, const std::string& before_name,
                         const std::string& after_name, int context = 3);

}  // namespace loom::tools
