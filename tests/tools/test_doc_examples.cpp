// The docs' checked listings (tools/doc_examples.hpp): finding the marked
// blocks, masking what varies between runs, comparing, and rewriting.
#include "tools/doc_examples.hpp"

#include <loom/error.hpp>

#include <doctest/doctest.h>

using namespace loom::tools;

namespace {

const std::string kDoc =
    "# Title\n"
    "\n"
    "<!-- output: loom-dump --example matmul --stage=list -->\n"
    "```\n"
    "$ loom-dump --example matmul --stage=list\n"
    "tensor\n"
    "rangeify\n"
    "```\n"
    "\n"
    "```\n"
    "not checked\n"
    "```\n"
    "<!-- excerpt: seq 1 10 -->\n"
    "```\n"
    "2\n"
    "3\n"
    "...\n"
    "9\n"
    "```\n";

}  // namespace

TEST_CASE("doc_examples finds each marked block, its command, line and quoted lines without the prompt") {
  const auto examples = doc_examples(kDoc);
  REQUIRE(examples.size() == 2);
  CHECK(examples[0].kind == DocCheck::output);
  CHECK(examples[0].command == "loom-dump --example matmul --stage=list");
  CHECK(examples[0].marker_line == 3);
  CHECK(examples[0].body == std::vector<std::string>{"tensor", "rangeify"});
  CHECK(examples[1].kind == DocCheck::excerpt);
  CHECK(examples[1].command == "seq 1 10");
  CHECK(examples[1].marker_line == 13);
  CHECK(examples[1].body == std::vector<std::string>{"2", "3", "...", "9"});
}

TEST_CASE("a marker without a block after it is an error naming its line") {
  CHECK_THROWS_WITH_AS(doc_examples("text\n<!-- output: ls -->\n\n```\nx\n```\n"),
                       "line 2: the output marker must be right before a ``` block", loom::Error);
  CHECK_THROWS_WITH_AS(doc_examples("<!-- output: ls -->\n```\nx\n"),
                       "line 1: the block after this marker is never closed", loom::Error);
}

TEST_CASE("mask_volatile hides times, rates, addresses, the working directory and trailing blanks") {
  CHECK(mask_volatile("r_64_32                           0.004 ms      0.984 GFLOP/s          2 GB/s", "") ==
        "r_64_32 <ms> <GFLOP/s> <GB/s>");
  CHECK(mask_volatile("realize: 3 kernels in 12.345 ms", "") == "realize: 3 kernels in <ms>");
  CHECK(mask_volatile("at 0x7ffd3a2b10c0, 0x10 bytes", "") == "at 0x<address>, 0x10 bytes");
  CHECK(mask_volatile("wrote /tmp/loom-docs-ab12/x.ll  ", "/tmp/loom-docs-ab12") == "wrote <dir>/x.ll");
  // What is not a measurement stays: counts, kernel names, sizes.
  CHECK(mask_volatile("best of 10 (2 buffers) r_1024_1024", "") == "best of 10 (2 buffers) r_1024_1024");
}

TEST_CASE("an output block must equal the output; an excerpt must occur in it, with ... for any lines") {
  const auto examples = doc_examples(kDoc);
  CHECK(example_mismatch(examples[0], "tensor\nrangeify\n", "", "a.md:3") == "");
  const std::string diff = example_mismatch(examples[0], "tensor\nrangeify\nkernel\n", "", "a.md:3");
  CHECK(diff.find("--- a.md:3 (quoted)") != std::string::npos);
  CHECK(diff.find("+kernel") != std::string::npos);

  std::string ten;
  for (int i = 1; i <= 10; ++i) ten += std::to_string(i) + "\n";
  CHECK(example_mismatch(examples[1], ten, "", "a.md:13") == "");
  CHECK(example_mismatch(examples[1], "1\n2\n4\n9\n", "", "a.md:13") != "");  // 2, 3 not consecutive
  CHECK(example_mismatch(examples[1], "9\n2\n3\n", "", "a.md:13") != "");     // 9 must come after
  // Timings differ between runs and still match.
  DocExample run{DocCheck::output, "loom-dump --run", 1, 0, 0, {"k      0.004 ms"}};
  CHECK(example_mismatch(run, "k 12.5 ms\n", "", "a.md:1") == "");
}

TEST_CASE("with_outputs rewrites output blocks from the commands, keeping prompts, excerpts and the rest") {
  const auto examples = doc_examples(kDoc);
  const std::string fresh = with_outputs(kDoc, examples, {"tensor\nrangeify\nkernel   \n", "ignored\n"});
  CHECK(fresh ==
        "# Title\n\n<!-- output: loom-dump --example matmul --stage=list -->\n```\n"
        "$ loom-dump --example matmul --stage=list\ntensor\nrangeify\nkernel\n```\n\n```\nnot checked\n```\n"
        "<!-- excerpt: seq 1 10 -->\n```\n2\n3\n...\n9\n```\n");
  // Rewriting is idempotent: the fresh text's block equals the output.
  const auto again = doc_examples(fresh);
  CHECK(example_mismatch(again[0], "tensor\nrangeify\nkernel\n", "", "a.md:3") == "");
}

TEST_CASE("blank lines ending an output are neither compared nor written") {
  const auto examples = doc_examples(kDoc);
  CHECK(example_mismatch(examples[0], "tensor\nrangeify\n\n\n", "", "a.md:3") == "");
  CHECK(with_outputs(kDoc, examples, {"tensor\nrangeify\n\n", ""}) == kDoc);
  // A blank line inside the listing is compared.
  CHECK(example_mismatch(examples[0], "tensor\n\nrangeify\n", "", "a.md:3") != "");
}

TEST_CASE("log timestamps are dropped, so a quoted warning reads as the user's terminal shows it") {
  CHECK(without_clutter("[2026-12-02 06:44:13.815] [loom] [warning] unknown  ") ==
        "[loom] [warning] unknown");
  CHECK(mask_volatile("[2026-12-02 06:44:13.815] [loom] [info] realize: 1 kernels in 0.5 ms", "") ==
        "[loom] [info] realize: 1 kernels in <ms>");
  CHECK(without_clutter("[loom] [warning] x") == "[loom] [warning] x");
}

TEST_CASE("an indented marker is quoted in a code block, not a marker") {
  CHECK(doc_examples("    <!-- output: ls -->\n    ```\n    x\n    ```\n").empty());
}
