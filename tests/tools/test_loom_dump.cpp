// loom-dump as a user runs it: a child process per case, its stdout, stderr and
// exit code captured. Flags reach it through the environment, read once at its
// start, which is also how the unknown-flag warning and LOOM_LOG are tested.
#include "tests/support/sanitizer_budget.hpp"
#include "tools/examples.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace {

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Run {
  int code = -1;
  std::string out, err;
};

// Runs loom-dump with `args`, and `env` (NAME=value words) in its environment.
Run loom_dump(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  static int calls = 0;
  const auto dir = std::filesystem::temp_directory_path();
  const std::string stem = "loom_dump_test_" + std::to_string(getpid()) + "_" + std::to_string(calls++);
  const auto out = dir / (stem + ".out"), err = dir / (stem + ".err");
  std::string cmd = "env";
  for (const std::string& e : env) cmd += " " + quote(e);
  cmd += " " + quote(LOOM_DUMP_EXE);
  for (const std::string& a : args) cmd += " " + quote(a);
  cmd += " >" + quote(out.string()) + " 2>" + quote(err.string());
  const int status = std::system(cmd.c_str());
  Run r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The sections of a dump: heading ("=== r_64_32: llvm ===") -> text.
std::vector<std::pair<std::string, std::string>> sections(const std::string& dump) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& l : lines(dump)) {
    if (l.rfind("=== ", 0) == 0)
      out.emplace_back(l.substr(4, l.size() - 8), "");
    else if (!out.empty())
      out.back().second += l + "\n";
  }
  return out;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const std::vector<std::string> kPipelineEnds = {"tensor", "rangeify", "kernel", "linear", "llvm", "asm"};

// Checks that `names` hold the fixed stages in pipeline order.
void check_order(const std::vector<std::string>& names) {
  size_t last = 0;
  for (const std::string& stage : kPipelineEnds) {
    const auto it = std::find(names.begin(), names.end(), stage);
    REQUIRE_MESSAGE(it != names.end(), stage);
    const size_t at = static_cast<size_t>(it - names.begin());
    CHECK_MESSAGE(at >= last, stage);
    last = at;
  }
}

// Every kernel of a full dump: its stages in pipeline order, a define of the
// kernel in its LLVM IR and a ret in its assembly. Returns the kernel names.
std::vector<std::string> check_full_dump(const std::string& dump) {
  std::vector<std::string> kernels;
  std::map<std::string, std::vector<std::string>> stages_of;
  for (const auto& [heading, text] : sections(dump)) {
    const size_t colon = heading.find(": ");
    if (colon == std::string::npos) {
      stages_of[""].push_back(heading);
      continue;
    }
    const std::string kernel = heading.substr(0, colon), stage = heading.substr(colon + 2);
    if (std::find(kernels.begin(), kernels.end(), kernel) == kernels.end()) kernels.push_back(kernel);
    stages_of[kernel].push_back(stage);
    if (stage == "llvm") CHECK_MESSAGE(has(text, "define void @" + kernel + "("), kernel);
    if (stage == "asm") {
      CHECK_MESSAGE(has(text, kernel + ":"), kernel);
      CHECK_MESSAGE(std::regex_search(text, std::regex("\\n\\s+ret")), kernel);
    }
  }
  REQUIRE(!kernels.empty());
  CHECK(stages_of[""].front() == "tensor");
  CHECK(std::find(stages_of[""].begin(), stages_of[""].end(), "rangeify") != stages_of[""].end());
  for (const std::string& k : kernels) {
    std::vector<std::string> names = stages_of[""];
    names.insert(names.end(), stages_of[k].begin(), stages_of[k].end());
    check_order(names);
    CHECK_MESSAGE(stages_of[k].back() == "asm", k);
  }
  return kernels;
}

}  // namespace

TEST_CASE("every built-in example dumps every stage of every kernel, in pipeline order") {
  // Each example is a loom-dump process: under the sanitizers, the first only.
  for (const loom::tools::Example& e : loom::test::sanitizer_budget(loom::tools::examples())) {
    CAPTURE(e.name);
    const Run all = loom_dump({"--example", e.name});
    REQUIRE_MESSAGE(all.code == 0, all.err);
    check_full_dump(all.out);
    const Run list = loom_dump({"--example", e.name, "--stage=list"});
    REQUIRE(list.code == 0);
    check_order(lines(list.out));
  }
}

TEST_CASE("an inline expression: its kernels, one stage at a time, and --run's timings") {
  const std::string program = "a = rand(1024, 1024); b = rand(1024, 1024); out = (a * b).sum(1)";
  const Run all = loom_dump({"-e", program});
  REQUIRE_MESSAGE(all.code == 0, all.err);
  CHECK(check_full_dump(all.out) == std::vector<std::string>{"r_1024_1024"});

  const Run llvm = loom_dump({"-e", program, "--stage=llvm"});
  const auto only = sections(llvm.out);
  REQUIRE(only.size() == 1);
  CHECK(only[0].first == "r_1024_1024: llvm");
  CHECK(has(only[0].second, "define void @r_1024_1024("));

  const Run run = loom_dump({"-e", program, "--stage=none", "--run", "--repeat=3"});
  REQUIRE_MESSAGE(run.code == 0, run.err);
  CHECK(has(run.out, "=== run: best of 3 ==="));
  CHECK(
      std::regex_search(run.out, std::regex("r_1024_1024 +[0-9.]+ ms +[0-9.e+-]+ GFLOP/s +[0-9.e+-]+ GB/s")));
  CHECK(std::regex_search(run.out, std::regex("total +[0-9.]+ ms \\(1 kernel\\)")));
}

TEST_CASE("--beam=N --run: the heuristic's Opts and time beside the searched ones") {
  const std::string program = "a = rand(40, 24); b = rand(24, 36); out = a @ b";
  const Run run = loom_dump({"-e", program, "--stage=opts", "--beam=2", "--run", "--repeat=2"},
                            {"LOOM_BEAM_BUDGET=0.3", "LOOM_CACHE_DIR=off"});
  REQUIRE_MESSAGE(run.code == 0, run.err);
  CHECK(has(run.out, "=== beam 2: heuristic vs searched, best of 2 ==="));
  CHECK(std::regex_search(run.out,
                          std::regex("r_40_36_24 +[0-9.]+ +[0-9.]+ +[0-9.]+x\n  heuristic \\[matmul_tile"
                                     "[^\n]*\\]\n  searched  \\[[^\n]*\\]\n")));
  const Run bad = loom_dump({"-e", program, "--beam=0"});
  CHECK(bad.code == 2);
  CHECK(has(bad.err, "--beam takes a beam width from 1 to 64, got '0'"));
}

TEST_CASE("--diff shows what each rewrite stage changed; --kernel keeps one kernel") {
  const std::string program = "x = rand(64, 32); s = x.sum(0, keepdim=1); out = x / s";
  const Run diff = loom_dump({"-e", program, "--diff", "--stage=rangeify,optimizer"});
  REQUIRE_MESSAGE(diff.code == 0, diff.err);
  CHECK(has(diff.out, "=== rangeify ===\n--- before rangeify\n+++ after rangeify\n@@ "));
  CHECK(has(diff.out, "+%"));  // an added line of the IR's text form
  CHECK(has(diff.out, "[axis 0 parallel]"));

  const Run names = loom_dump({"-e", program, "--stage=kernel"});
  std::vector<std::string> kernels;
  for (const auto& [heading, text] : sections(names.out))
    kernels.push_back(heading.substr(0, heading.find(':')));
  REQUIRE(kernels.size() == 2);
  const Run one = loom_dump({"-e", program, "--kernel=" + kernels[1]});
  for (const auto& [heading, text] : sections(one.out)) CHECK(heading.rfind(kernels[1] + ": ", 0) == 0);

  const Run wrong = loom_dump({"-e", program, "--kernel=E_9"});
  CHECK(wrong.code == 2);  // a name the command line got wrong (docs/loom-dump.md)
  CHECK(has(wrong.err, "no kernel is called 'E_9'; the kernels are " + kernels[0] + ", " + kernels[1]));
  const Run stage = loom_dump({"-e", program, "--stage=frobnicate"});
  CHECK(stage.code == 2);
  CHECK(
      has(stage.err,
          "no stage is called 'frobnicate'; this computation's stages are tensor, split_reduceop, rangeify"));
}

TEST_CASE("a syntax error names its column; a bad command line is exit code 2") {
  const Run bad = loom_dump({"-e", "a = rand(8); out = a.sum(0"});
  CHECK(bad.code == 1);
  CHECK(has(bad.err, "loom-dump: -e: column 27: expected ')' closing the arguments of sum, got the end"));
  CHECK(has(bad.err, "\n  a = rand(8); out = a.sum(0\n" + std::string(28, ' ') + "^"));
  CHECK(loom_dump({"--frob"}).code == 2);
  CHECK(has(loom_dump({}).err, "no input: give FILE, -e PROGRAM or --example NAME"));
  const Run example = loom_dump({"--example", "nope"});
  CHECK(example.code == 2);
  CHECK(has(example.err, "no example is called 'nope'; the examples are matmul"));
}

TEST_CASE("a graph file saved with --save dumps the same kernels as its program") {
  const auto file = std::filesystem::temp_directory_path() / ("loom_dump_graph_" + std::to_string(getpid()));
  const Run saved = loom_dump({"--example", "softmax", "--stage=kernel", "--save=" + file.string()});
  REQUIRE_MESSAGE(saved.code == 0, saved.err);
  const Run loaded = loom_dump({file.string(), "--stage=kernel"});
  REQUIRE_MESSAGE(loaded.code == 0, loaded.err);
  CHECK(loaded.out == saved.out);
  std::filesystem::remove(file);
}

TEST_CASE("colour only when asked for or on a terminal") {
  const std::string program = "a = rand(8); out = a + 1";
  CHECK_FALSE(has(loom_dump({"-e", program, "--stage=kernel"}).out, "\033["));
  CHECK(has(loom_dump({"-e", program, "--stage=kernel", "--color=always"}).out, "\033[1;36m=== "));
}

TEST_CASE("an unknown LOOM_ variable or a bad value is a warning naming it; LOOM_LOG sets loom's level") {
  const std::vector<std::string> args = {"-e", "a = rand(8); out = a + 1", "--stage=none"};
  const Run warned = loom_dump(args, {"LOOM_DEBGU=1", "LOOM_THREADS=many"});
  CHECK(warned.code == 0);
  CHECK(has(warned.err, "unknown environment variable LOOM_DEBGU ignored"));
  CHECK(has(warned.err, "LOOM_THREADS='many' ignored: expected a whole number in [1, 1024]"));
  CHECK(has(loom_dump(args, {"LOOM_DEBUG=1"}).err, "realize: 1 kernel"));  // rand's kernel
  const Run quiet = loom_dump(args, {"LOOM_DEBUG=1", "LOOM_LOG=warn", "LOOM_DEBGU=1"});
  CHECK_FALSE(has(quiet.err, "realize:"));
  CHECK(has(quiet.err, "LOOM_DEBGU"));
  CHECK(loom_dump(args, {"LOOM_DEBGU=1", "LOOM_LOG=off"}).err == "");
}

TEST_CASE("docs/env.md's table is the flag table in code, row for row") {
  const Run table = loom_dump({"--env-table"});
  REQUIRE(table.code == 0);
  CHECK(lines(table.out).size() == 23);  // heading, rule, twenty-one flags
  const std::string doc = read_file(std::filesystem::path(LOOM_SOURCE_DIR) / "docs" / "env.md");
  CHECK_MESSAGE(has(doc, table.out), "regenerate the table with loom-dump --env-table");
  CHECK(has(loom_dump({"--help"}).out, "LOOM_PROFILE"));
}

TEST_CASE("loom-dump --target prints the Target: sysconf's caches, the preset's ISA") {
  const Run native = loom_dump({"--target"});
  REQUIRE(native.code == 0);
  CHECK(has(native.out, "target             native\n"));
  CHECK(has(native.out, fmt::format("cores              {}\n", sysconf(_SC_NPROCESSORS_ONLN))));
  if (sysconf(_SC_LEVEL1_DCACHE_SIZE) > 0)
    CHECK(has(native.out, fmt::format("l1d_bytes          {}\n", sysconf(_SC_LEVEL1_DCACHE_SIZE))));
  if (sysconf(_SC_LEVEL2_CACHE_SIZE) > 0)
    CHECK(has(native.out, fmt::format("l2_bytes           {}\n", sysconf(_SC_LEVEL2_CACHE_SIZE))));
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
  const Run v3 = loom_dump({"--target"}, {"LOOM_TARGET=x86-64-v3"});
  REQUIRE(v3.code == 0);
  CHECK(has(v3.out, "target             x86-64-v3\n"));
  CHECK(has(v3.out, "vector_bytes       32\n"));
  CHECK(has(v3.out, "-avx512f"));
}

TEST_CASE("LOOM_TARGET=x86-64-v3: the 1024 matmul's assembly has no AVX-512 register") {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
  const std::vector<std::string> args{"-e", "a = rand(1024, 1024); b = rand(1024, 1024); out = a.matmul(b)",
                                      "--stage=asm", "--color=never"};
  const Run v3 = loom_dump(args, {"LOOM_TARGET=x86-64-v3", "LOOM_CACHE_DIR=off"});
  REQUIRE(v3.code == 0);
  CHECK_FALSE(has(v3.out, "zmm"));
  CHECK(has(v3.out, "vfmadd"));
  CHECK(has(v3.out, "ymm"));
  if (!__builtin_cpu_supports("avx512f")) return;
  const Run native = loom_dump(args, {"LOOM_TARGET=native", "LOOM_CACHE_DIR=off"});
  REQUIRE(native.code == 0);
  CHECK(has(native.out, "zmm"));
}

// Half conversions by the Target's instructions (docs/semantics.md, "Half-precision dtypes"):
// a bfloat16 add narrows with vcvtneps2bf16 where the host has AVX512_BF16 and not at
// x86-64-v3; a float16 add uses F16C at x86-64-v3 and not at x86-64-v2.
TEST_CASE("the half conversions' instructions follow LOOM_TARGET") {
  auto asm_of = [](const char* dtype, const char* target) {
    const Run r = loom_dump(
        {"-e", fmt::format("a = randn(64, 64).cast({0}); b = randn(64, 64).cast({0}); out = a + b", dtype),
         "--stage=asm", "--color=never"},
        {fmt::format("LOOM_TARGET={}", target), "LOOM_CACHE_DIR=off"});
    REQUIRE(r.code == 0);
    return r.out;
  };
  CHECK_FALSE(has(asm_of("f16", "x86-64-v2"), "vcvtps2ph"));
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !__builtin_cpu_supports("f16c"))
    return;
  const std::string bf16_v3 = asm_of("bf16", "x86-64-v3"), f16_v3 = asm_of("f16", "x86-64-v3");
  CHECK_FALSE(has(bf16_v3, "vcvtneps2bf16"));
  CHECK(has(f16_v3, "vcvtps2ph"));
  CHECK(has(f16_v3, "vcvtph2ps"));
  if (!__builtin_cpu_supports("avx512bf16")) return;
  CHECK(has(asm_of("bf16", "native"), "vcvtneps2bf16"));
}
