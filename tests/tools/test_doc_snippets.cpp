// The docs' C++ snippets (tools/doc_snippets.hpp): finding them and making one
// program of them.
#include "tools/doc_snippets.hpp"

#include <loom/error.hpp>

#include <doctest/doctest.h>

using namespace loom::tools;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const std::string kDoc =
    "<!-- program -->\n"
    "```cpp\n"
    "#include <vector>\n"
    "int main() {\n"
    "  std::vector<int> v{1};\n"
    "}\n"
    "```\n"
    "\n"
    "```cpp\n"
    "unmarked();\n"
    "```\n"
    "<!-- statements: auto y = 2; -->\n"
    "```cpp\n"
    "std::cout << y;\n"
    "```\n";

}  // namespace

TEST_CASE("doc_snippets finds the marked cpp blocks, whole programs and statements with their prelude") {
  const auto snippets = doc_snippets(kDoc, "a.md");
  REQUIRE(snippets.size() == 2);
  CHECK_FALSE(snippets[0].statements);
  CHECK(snippets[0].marker_line == 1);
  CHECK(snippets[0].code.size() == 4);
  CHECK(snippets[1].statements);
  CHECK(snippets[1].prelude == "auto y = 2;");
  CHECK(snippets[1].code == std::vector<std::string>{"std::cout << y;"});
  CHECK_THROWS_WITH_AS(doc_snippets("<!-- program -->\n```\nx\n```\n", "a.md"),
                       "line 1: the program marker must be right before a ```cpp block", loom::Error);
}

TEST_CASE("snippets_program hoists includes, gives each snippet a namespace and a run() that returns 0") {
  const std::string program = snippets_program(doc_snippets(kDoc, "a.md"));
  CHECK(has(program, "#include <vector>\n"));
  CHECK(has(program, "#include <loom/loom.hpp>\n"));
  CHECK(has(
      program,
      "// a.md:1\nnamespace snippet_0 {\n  int run() {\n    std::vector<int> v{1};\n    return 0;\n  }\n"));
  CHECK(
      has(program, "namespace snippet_1 {\nint run() {\n  auto y = 2;\n  std::cout << y;\n  return 0;\n}\n"));
  CHECK(has(program, "failed += run(\"a.md:12\", snippet_1::run);"));
  CHECK_FALSE(has(program, "unmarked"));
}
