#include "tools/doc_examples.hpp"

#include "tools/unified_diff.hpp"

#include <loom/error.hpp>

#include <fmt/format.h>

#include <regex>

namespace loom::tools {

namespace {

const std::regex kMarker(R"(^<!--\s*(output|excerpt):\s*(.*?)\s*-->\s*$)");

bool is_fence(const std::string& line) { return line.rfind("```", 0) == 0; }
bool is_prompt(const std::string& line) { return line.rfind("$ ", 0) == 0; }
bool is_gap(const std::string& line) {
  return line.find_first_not_of(" \t") != std::string::npos &&
         line.substr(line.find_first_not_of(" \t"), 3) == "...";
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

std::vector<std::string> masked(const std::vector<std::string>& lines, const std::string& work_dir) {
  std::vector<std::string> out;
  for (const std::string& l : lines) out.push_back(mask_volatile(l, work_dir));
  while (!out.empty() && out.back().empty()) out.pop_back();  // a dump ends its last section with one
  return out;
}

// Whether `want` (with `...` gaps) occurs in `have`: its runs between gaps in
// order, each consecutive. Taking each run's leftmost match is optimal.
bool occurs_in(const std::vector<std::string>& want, const std::vector<std::string>& have) {
  size_t from = 0, i = 0;
  while (i < want.size()) {
    if (is_gap(want[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < want.size() && !is_gap(want[end])) ++end;
    const size_t n = end - i;
    bool found = false;
    for (size_t at = from; at + n <= have.size() && !found; ++at) {
      if (std::equal(want.begin() + static_cast<long>(i), want.begin() + static_cast<long>(end),
                     have.begin() + static_cast<long>(at))) {
        found = true;
        from = at + n;
      }
    }
    if (!found) return false;
    i = end;
  }
  return true;
}

}  // namespace

std::vector<DocExample> doc_examples(const std::string& markdown) {
  const std::vector<std::string> lines = text_lines(markdown);
  std::vector<DocExample> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(lines[i], m, kMarker)) continue;
    DocExample e;
    e.kind = m[1] == "output" ? DocCheck::output : DocCheck::excerpt;
    e.command = m[2];
    e.marker_line = static_cast<int>(i) + 1;
    if (e.command.empty())
      throw Error(fmt::format("line {}: the {} marker names no command", i + 1, m[1].str()));
    if (i + 1 >= lines.size() || !is_fence(lines[i + 1]))
      throw Error(fmt::format("line {}: the {} marker must be right before a ``` block", i + 1, m[1].str()));
    size_t j = i + 2;
    while (j < lines.size() && is_prompt(lines[j])) ++j;
    e.body_begin = j;
    while (j < lines.size() && !is_fence(lines[j])) ++j;
    if (j == lines.size())
      throw Error(fmt::format("line {}: the block after this marker is never closed", i + 1));
    e.body_end = j;
    e.body.assign(lines.begin() + static_cast<long>(e.body_begin), lines.begin() + static_cast<long>(j));
    out.push_back(std::move(e));
    i = j;
  }
  return out;
}

std::string without_clutter(const std::string& line) {
  static const std::regex log_time(R"(^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?\] )");
  std::string out = std::regex_replace(line, log_time, "");
  out.erase(out.find_last_not_of(" \t") + 1);
  return out;
}

std::string mask_volatile(const std::string& line, const std::string& work_dir) {
  static const std::regex time(R"([ \t]*\b\d+(\.\d+)?[ \t]*(ms|us|GFLOP/s|GB/s)\b)");
  static const std::regex address(R"(\b0x[0-9a-fA-F]{6,}\b)");
  std::string out = without_clutter(line);
  if (!work_dir.empty())
    for (size_t at = out.find(work_dir); at != std::string::npos; at = out.find(work_dir, at))
      out.replace(at, work_dir.size(), "<dir>");
  out = std::regex_replace(out, time, " <$2>");
  out = std::regex_replace(out, address, "0x<address>");
  out.erase(out.find_last_not_of(" \t") + 1);
  return out;
}

std::string example_mismatch(const DocExample& example, const std::string& output,
                             const std::string& work_dir, const std::string& where) {
  const std::vector<std::string> quoted = masked(example.body, work_dir);
  const std::vector<std::string> made = masked(text_lines(output), work_dir);
  const bool ok = example.kind == DocCheck::output ? quoted == made : occurs_in(quoted, made);
  if (ok) return "";
  return unified_diff(joined(quoted), joined(made), where + " (quoted)", example.command + " (output)");
}

std::string with_outputs(const std::string& markdown, const std::vector<DocExample>& examples,
                         const std::vector<std::string>& outputs) {
  const std::vector<std::string> lines = text_lines(markdown);
  std::vector<std::string> out;
  size_t next = 0;
  for (size_t k = 0; k < examples.size(); ++k) {
    const DocExample& e = examples[k];
    if (e.kind != DocCheck::output) continue;
    out.insert(out.end(), lines.begin() + static_cast<long>(next),
               lines.begin() + static_cast<long>(e.body_begin));
    const size_t start = out.size();
    for (const std::string& l : text_lines(outputs[k])) out.push_back(without_clutter(l));
    while (out.size() > start && out.back().empty()) out.pop_back();
    next = e.body_end;
  }
  out.insert(out.end(), lines.begin() + static_cast<long>(next), lines.end());
  std::string text = joined(out);
  if (!markdown.empty() && markdown.back() != '\n') text.pop_back();
  return text;
}

}  // namespace loom::tools
