#pragma once
// Checked examples in the docs (loom-docs-check, docs/loom-dump.md "Checked
// listings"): a fenced block right after a marker line
//
//   <!-- output: loom-dump --example matmul --stage=kernel -->
//
// is that command's output; after `<!-- excerpt: CMD -->` its lines appear, in
// order and consecutive, in the output, a line `...` standing for any number of
// lines. The block's leading `$ ` lines are the prompt the reader sees; they are
// kept as written and not compared, so the prompt may shorten the command.
#include "tools/unified_diff.hpp"

#include <string>
#include <vector>

namespace loom::tools {

enum class DocCheck { output, excerpt };

struct DocExample {
  DocCheck kind = DocCheck::output;
  std::string command;
  int marker_line = 0;                  // 1-based, for messages
  size_t body_begin = 0, body_end = 0;  // the quoted lines [begin, end), 0-based lines of the file
  std::vector<std::string> body;
};

// The marked blocks of a markdown text, in order (a marker starts its line: an
// indented one is an example of a marker, in a code block). A marker not followed by a
// fenced block is a loom::Error naming its line.
std::vector<DocExample> doc_examples(const std::string& markdown);

// `line` without what a listing never quotes: the timestamp spdlog puts before a log
// line (`[2026-12-02 06:44:13.815] `) and trailing blanks. --update writes this.
std::string without_clutter(const std::string& line);

// What may differ between runs, replaced by a placeholder on both sides before
// comparing: times (`0.215 ms`, `41.2 ms`, `1.3 s`, `us`) and rates (`9.75 GFLOP/s`,
// `39 GB/s`) with the blanks before them, hexadecimal addresses of 6 or more
// digits, the run's working directory `work_dir`; and the clutter above. Blank
// lines at the end of a listing are not compared either.
std::string mask_volatile(const std::string& line, const std::string& work_dir);

// "" when `output` (the command's, unmasked) matches the block; otherwise a
// unified diff from the quoted block to the output, both masked.
std::string example_mismatch(const DocExample& example, const std::string& output,
                             const std::string& work_dir, const std::string& where);

// `markdown` with each output block's body replaced by its command's output
// (`outputs[i]` for `examples[i]`); excerpts are left as written.
std::string with_outputs(const std::string& markdown, const std::vector<DocExample>& examples,
                         const std::vector<std::string>& outputs);

}  // namespace loom::tools
