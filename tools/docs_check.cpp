// loom-docs-check: runs every command the docs quote the output of and compares
// (docs/loom-dump.md "Checked listings"). `--update` rewrites the quoted blocks
// from the commands instead, so one command refreshes the docs after a change.
//
//   loom-docs-check --root SRC --bin DIR... [--update] [FILE...]
//
// FILEs are relative to SRC (default: README.md and docs/*.md). Each command
// runs in bash, in a fresh empty working directory, with each DIR (where
// loom-dump and the examples are) first on PATH and a fixed environment: every LOOM_* variable of the
// caller removed, then kFixedEnvironment set. Its stdout is its output (a
// command quoting stderr says 2>&1); its exit status is not checked, except 77, which skips the listing
// (the command says this machine cannot make it).
//
//   loom-docs-check --root SRC --cpp OUT [FILE...]
//
// writes the files' marked C++ snippets to OUT as one program (tools/doc_snippets.hpp).
#include "tools/doc_examples.hpp"
#include "tools/doc_snippets.hpp"

#include <loom/error.hpp>

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using namespace loom::tools;

// What makes a listing the same on every run and every machine with AVX-512:
// no disk cache (a cached kernel skips its compile-time texts), two threads,
// 512-bit vectors planned whatever the host has, no colour, C locale.
const std::vector<std::pair<const char*, const char*>> kFixedEnvironment = {
    {"LOOM_CACHE_DIR", "off"}, {"LOOM_THREADS", "2"}, {"LOOM_VECTOR_WIDTH", "512"},
    {"NO_COLOR", "1"},         {"LC_ALL", "C"},       {"TZ", "UTC"}};

// A command exits with this (as automake's tests do) when the machine cannot make
// its listing, e.g. x86 assembly of AVX-512 code on a host without AVX-512.
constexpr int kSkip = 77;

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw loom::Error("cannot read " + p.string());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void fix_environment(const std::vector<std::string>& bins) {
  std::vector<std::string> loom_vars;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LOOM_", 5) == 0) loom_vars.emplace_back(*e, std::strchr(*e, '=') - *e);
  for (const std::string& name : loom_vars) unsetenv(name.c_str());
  for (const auto& [name, value] : kFixedEnvironment) setenv(name, value, 1);
  const char* path = std::getenv("PATH");
  std::string dirs;
  for (const std::string& b : bins) dirs += fs::absolute(b).string() + ":";
  setenv("PATH", (dirs + (path ? std::string(path) : "")).c_str(), 1);
}

struct Ran {
  std::string output, work_dir;
  bool skipped = false;  // exit status 77: this machine cannot make the listing
};

Ran run(const std::string& command) {
  std::string tmpl = (fs::temp_directory_path() / "loom-docs-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw loom::Error("cannot make a temporary directory");
  const std::string shell = "cd " + quote(tmpl) + " && exec bash -c " + quote(command);
  FILE* pipe = popen(shell.c_str(), "r");
  if (!pipe) throw loom::Error("cannot run " + command);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  fs::remove_all(tmpl);
  return {out, tmpl, WIFEXITED(status) && WEXITSTATUS(status) == kSkip};
}

std::string joined_body(const DocExample& e) {
  std::string out;
  for (const std::string& l : e.body) out += l + "\n";
  return out;
}

std::vector<std::string> default_files(const fs::path& root) {
  std::vector<std::string> out{"README.md"};
  std::vector<std::string> docs;
  for (const auto& entry : fs::directory_iterator(root / "docs"))
    if (entry.path().extension() == ".md") docs.push_back("docs/" + entry.path().filename().string());
  std::sort(docs.begin(), docs.end());
  out.insert(out.end(), docs.begin(), docs.end());
  return out;
}

// --cpp: the marked C++ snippets as one program, for the build to compile.
int write_snippets(const std::string& root, const std::vector<std::string>& files, const std::string& out) {
  std::vector<DocSnippet> all;
  for (const std::string& file : files) {
    const std::vector<DocSnippet> some = doc_snippets(read_file(fs::path(root) / file), file);
    all.insert(all.end(), some.begin(), some.end());
  }
  std::ofstream(out, std::ios::binary) << snippets_program(all);
  return 0;
}

int main_checked(int argc, char** argv) {
  std::string root = ".";
  std::vector<std::string> bins;
  bool update = false;
  std::vector<std::string> files;
  std::string cpp_out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--update")
      update = true;
    else if (a == "--cpp" && i + 1 < argc)
      cpp_out = argv[++i];
    else if (a == "--root" && i + 1 < argc)
      root = argv[++i];
    else if (a == "--bin" && i + 1 < argc)
      bins.push_back(argv[++i]);
    else if (a.rfind("-", 0) == 0) {
      fmt::print(stderr,
                 "usage: loom-docs-check --root SRC (--bin DIR... [--update] | --cpp OUT) [FILE...]\n");
      return 2;
    } else
      files.push_back(a);
  }
  if (bins.empty()) bins.push_back(fs::absolute(fs::path(argv[0])).parent_path().string());
  if (files.empty()) files = default_files(root);
  if (!cpp_out.empty()) return write_snippets(root, files, cpp_out);
  fix_environment(bins);
  int checked = 0, failed = 0, updated = 0, skipped = 0;
  for (const std::string& file : files) {
    const fs::path path = fs::path(root) / file;
    const std::string text = read_file(path);
    std::vector<DocExample> examples;
    try {
      examples = doc_examples(text);
    } catch (const loom::Error& e) {
      fmt::print(stderr, "{}: {}\n", file, e.what());
      ++failed;
      continue;
    }
    std::vector<std::string> outputs;
    bool changed = false;
    for (const DocExample& e : examples) {
      const Ran r = run(e.command);
      outputs.push_back(r.output);
      if (r.skipped) {
        ++skipped;
        outputs.back() = joined_body(e);
        fmt::print("{}:{}: skipped: `{}` cannot run on this machine\n", file, e.marker_line, e.command);
        continue;
      }
      ++checked;
      const std::string where = fmt::format("{}:{}", file, e.marker_line);
      // The diff's line numbers count from the block's first quoted line.
      const std::string diff = example_mismatch(e, r.output, r.work_dir,
                                                fmt::format("{} (from line {})", where, e.body_begin + 1));
      if (diff.empty()) {
        outputs.back() = joined_body(e);  // kept as written: --update never churns the masked values
        continue;
      }
      if (update && e.kind == DocCheck::output) {
        ++updated;
        changed = true;
        fmt::print("{}: updated from `{}`\n", where, e.command);
        continue;
      }
      ++failed;
      fmt::print("{}: the quoted {} of `{}` is not what it prints{}\n{}\n", where,
                 e.kind == DocCheck::output ? "output" : "excerpt", e.command,
                 e.kind == DocCheck::excerpt ? " (an excerpt: edit it by hand)" : "", diff);
    }
    if (changed) {
      const std::string fresh = with_outputs(text, examples, outputs);
      if (fresh != text) std::ofstream(path, std::ios::binary) << fresh;
    }
  }
  fmt::print("loom-docs-check: {} listings, {} differ, {} skipped{}\n", checked, failed, skipped,
             update ? fmt::format(", {} updated", updated) : "");
  if (failed > 0 && !update)
    fmt::print("after a change to what loom prints, refresh the docs with tools/update_docs.sh\n");
  return failed > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return main_checked(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "loom-docs-check: {}\n", e.what());
    return 1;
  }
}
