// loom-dump: shows what loom makes of a computation, stage by stage, and runs
// it, without writing C++. docs/loom-dump.md is the manual.
#include "ir/flags.hpp"
#include "ir/target.hpp"
#include "tools/examples.hpp"
#include "tools/expression.hpp"
#include "tools/stage_dump.hpp"
#include "tools/unified_diff.hpp"

#include <loom/context.hpp>
#include <loom/error.hpp>
#include <loom/graph_file.hpp>

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace loom;
using namespace loom::tools;

struct Options {
  std::string file, expression, example, save;
  std::vector<std::string> stages{"all"};
  std::string kernel;
  bool run = false, diff = false, color = false;
  int repeat = 10;
  int beam = 0;  // --beam=N: LOOM_BEAM=N for the dump; with --run, the heuristic's kernels timed beside
};

struct Usage {  // a mistake on the command line: exit code 2
  std::string message;
};

const char* kUsage = "usage: loom-dump [options] (FILE | -e PROGRAM | --example NAME)";

// `text` in lines of at most `width` columns, each indented by `indent`.
std::string wrapped(const std::string& text, size_t indent, size_t width) {
  std::string out, line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      out += std::string(indent, ' ') + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  return line.empty() ? out : out + std::string(indent, ' ') + line + "\n";
}

std::string help() {
  std::string out = fmt::format(R"({}

Shows what loom makes of a computation at every stage, from the tensor graph to
x86 assembly, and runs it. docs/loom-dump.md is the manual.

input (one of):
  FILE                a graph file, as loom::save_graph writes it (docs/graph-files.md)
  -e, --expr PROGRAM  statements in loom-dump's language, e.g.
                        -e 'a = rand(1024, 1024); b = rand(1024, 1024); out = (a * b).sum(1)'
                      constructors (rand, randn, zeros, ones, full, arange, eye, randint) make
                      the inputs; every name no later statement reads is an output
  --example NAME      a built-in workload (below); --example NAME --stage=source prints it

options:
  --stage=LIST        the stages to show, comma-separated: tensor, rangeify, each rewrite stage
                      or pass by its name, kernel, linear, llvm, asm; all (the default), none,
                      or list (print the stage names in pipeline order and stop)
  --kernel=NAME       only this kernel's stages (and its time with --run)
  --diff              show each rewrite stage as a unified diff of what it changed
  --run               run the computation and time each kernel (best of --repeat runs)
  --repeat=N          timed runs after one warm-up run (default 10)
  --beam=N            search each kernel's Opts with a beam of width N (LOOM_BEAM=N); with --run,
                      the heuristic's Opts and time beside the searched ones
  --save=FILE         write the computation as a graph file (loom::save_graph)
  --color=WHEN        auto (the default: colour on a terminal), always or never
  --env-table         print the LOOM_* flags as the markdown table of docs/env.md
  --target            print the machine kernels are compiled for (LOOM_TARGET; docs/env.md)
  -h, --help          this text

examples:
)",
                                kUsage);
  for (const Example& e : examples()) out += fmt::format("  {:<15} {}\n", e.name, e.summary);
  out += "\nenvironment (read once at start; a loom::Context overrides them in code):\n";
  for (const FlagInfo& f : flag_table())
    out += fmt::format("  {:<18} {}\n{}", f.name, f.values, wrapped(std::string(f.effect), 21, 100));
  return out;
}

std::string env_table() {
  std::string out = "| flag | values | effect |\n| --- | --- | --- |\n";
  for (const FlagInfo& f : flag_table())
    out += fmt::format("| `{}` | {} | {} |\n", f.name, f.values, f.effect);
  return out;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Parses the command line; returns false when it printed what was asked (--help).
bool parse(int argc, char** argv, Options& o) {
  std::string color = "auto";
  auto value = [&](int& i, const std::string& arg, const std::string& name) -> std::string {
    if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
    if (i + 1 >= argc) throw Usage{name + " needs a value"};
    return argv[++i];
  };
  auto is = [](const std::string& arg, const std::string& name) {
    return arg == name || arg.rfind(name + "=", 0) == 0;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    if (arg == "--env-table") {
      std::fputs(env_table().c_str(), stdout);
      return false;
    }
    if (arg == "--target") {
      std::fputs(target_of(*flags()).describe().c_str(), stdout);
      return false;
    }
    if (arg == "-e" || is(arg, "--expr"))
      o.expression = value(i, arg, arg == "-e" ? "-e" : "--expr");
    else if (is(arg, "--example"))
      o.example = value(i, arg, "--example");
    else if (is(arg, "--stage"))
      o.stages = split(value(i, arg, "--stage"));
    else if (is(arg, "--kernel"))
      o.kernel = value(i, arg, "--kernel");
    else if (is(arg, "--save"))
      o.save = value(i, arg, "--save");
    else if (is(arg, "--color"))
      color = value(i, arg, "--color");
    else if (is(arg, "--repeat")) {
      const std::string n = value(i, arg, "--repeat");
      o.repeat = std::atoi(n.c_str());
      if (o.repeat < 1 || n.find_first_not_of("0123456789") != std::string::npos)
        throw Usage{"--repeat takes a whole number of at least 1, got '" + n + "'"};
    } else if (is(arg, "--beam")) {
      const std::string n = value(i, arg, "--beam");
      o.beam = std::atoi(n.c_str());
      if (o.beam < 1 || o.beam > 64 || n.find_first_not_of("0123456789") != std::string::npos)
        throw Usage{"--beam takes a beam width from 1 to 64, got '" + n + "'"};
    } else if (arg == "--run")
      o.run = true;
    else if (arg == "--diff")
      o.diff = true;
    else if (!arg.empty() && arg[0] == '-')
      throw Usage{"unknown option '" + arg + "'"};
    else if (o.file.empty())
      o.file = arg;
    else
      throw Usage{"one input file only; got '" + o.file + "' and '" + arg + "'"};
  }
  const int inputs = !o.file.empty() + !o.expression.empty() + !o.example.empty();
  if (inputs != 1)
    throw Usage{inputs ? "give one input only" : "no input: give FILE, -e PROGRAM or --example NAME"};
  if (color != "auto" && color != "always" && color != "never")
    throw Usage{"--color takes auto, always or never, got '" + color + "'"};
  o.color = color == "always" || (color == "auto" && isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR"));
  return true;
}

// ---- printing ----

struct Painter {
  bool on;
  std::string paint(const std::string& code, const std::string& text) const {
    return on ? "\033[" + code + "m" + text + "\033[0m" : text;
  }
  std::string heading(const StageText& s) const {
    return paint("1;36", s.kernel.empty() ? fmt::format("=== {} ===", s.stage)
                                          : fmt::format("=== {}: {} ===", s.kernel, s.stage));
  }
  std::string diff(const std::string& text) const {
    if (!on) return text;
    std::string out;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      const std::string line = text.substr(start, end - start);
      const char c = line.empty() ? ' ' : line[0];
      const bool header = line.rfind("---", 0) == 0 || line.rfind("+++", 0) == 0;
      out += (header     ? paint("1", line)
              : c == '+' ? paint("32", line)
              : c == '-' ? paint("31", line)
              : c == '@' ? paint("36", line)
                         : line) +
             "\n";
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return out;
  }
};

bool wanted(const Options& o, const StageText& s) {
  if (!o.kernel.empty() && s.kernel != o.kernel) return false;
  for (const std::string& name : o.stages)
    if (name == "all" || name == s.stage) return true;
  return false;
}

void print_stage(const Options& o, const Painter& p, const StageText& s) {
  std::string body = s.text;
  if (o.diff && s.rewrite) {
    body = unified_diff(s.before, s.text, "before " + s.stage, "after " + s.stage);
    body = body.empty() ? "(no change)\n" : p.diff(body);
  }
  if (!body.empty() && body.back() != '\n') body += '\n';
  fmt::print("{}\n{}\n", p.heading(s), body);
}

void check_selection(const Options& o, const StageDump& dump) {
  const std::vector<std::string> names = stage_names(dump);
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  for (const std::string& name : o.stages)
    if (name != "all" && name != "none" && std::find(names.begin(), names.end(), name) == names.end())
      throw Usage{fmt::format("no stage is called '{}'; this computation's stages are {}", name, known)};
  if (!o.kernel.empty() &&
      std::find(dump.kernels.begin(), dump.kernels.end(), o.kernel) == dump.kernels.end()) {
    std::string kernels;
    for (const std::string& k : dump.kernels) kernels += (kernels.empty() ? "" : ", ") + k;
    throw Usage{fmt::format("no kernel is called '{}'; the kernels are {}", o.kernel, kernels)};
  }
}

void print_times(const Options& o, const Painter& p, const std::vector<KernelTime>& times) {
  fmt::print("{}\n", p.paint("1;36", fmt::format("=== run: best of {} ===", o.repeat)));
  double total = 0;
  for (const KernelTime& t : times) {
    total += t.best.ms;
    if (!o.kernel.empty() && t.kernel != o.kernel) continue;
    fmt::print("{:<28} {:>10.3f} ms {:>10.3g} GFLOP/s {:>10.3g} GB/s\n", t.kernel, t.best.ms, t.best.gflops(),
               t.best.gbps());
  }
  fmt::print("{:<28} {:>10.3f} ms ({} kernel{})\n", "total", total, times.size(),
             times.size() == 1 ? "" : "s");
}

std::vector<Tensor> load_input(const Options& o, std::string& source) {
  if (!o.file.empty()) return load_graph(o.file);
  if (!o.example.empty()) {
    try {
      source = find_example(o.example).source;
    } catch (const Error& e) {
      throw Usage{e.what()};  // a name the command line got wrong
    }
  } else {
    source = o.expression;
  }
  try {
    const Program program = run_program(source);
    std::vector<Tensor> outputs;
    for (const NamedTensor& t : program.outputs) outputs.push_back(t.tensor);
    return outputs;
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", o.example.empty() ? "-e" : "--example " + o.example, e.what()));
  }
}

// The heuristic's kernels (LOOM_BEAM off) timed beside the dump's searched ones, per kernel.
void print_beam(const Options& o, const Painter& p, const StageDump& dump, const TimedRun& searched) {
  StageDump heuristic = dump;  // its own plan: the heuristic's parallel extents
  TimedRun plain;
  std::vector<std::vector<Opt>> plain_opts, beam_opts;
  {
    const std::shared_ptr<const Flags> beam_flags = flags();
    for (const detail::PlanKernel& k : dump.plan.kernels)
      beam_opts.push_back(detail::compile_kernel(k.ast, k.name, *beam_flags)->opts);
    const Context off{{"BEAM", 0}};
    const std::shared_ptr<const Flags> off_flags = flags();
    for (detail::PlanKernel& k : heuristic.plan.kernels)
      plain_opts.push_back(detail::compile_planned_kernel(k, *off_flags)->opts);
    plain = time_kernels(heuristic, o.repeat);
  }
  fmt::print("{}\n", p.paint("1;36", fmt::format("=== beam {}: heuristic vs searched, best of {} ===", o.beam,
                                                 o.repeat)));
  fmt::print("{:<28} {:>13} {:>13} {:>8}\n", "kernel", "heuristic ms", "searched ms", "speedup");
  std::vector<std::string> shown;
  for (size_t i = 0; i < searched.times.size(); ++i) {
    const std::string& name = searched.times[i].kernel;
    if ((!o.kernel.empty() && name != o.kernel) || std::find(shown.begin(), shown.end(), name) != shown.end())
      continue;
    shown.push_back(name);
    const double h = plain.times[i].best.ms, b = searched.times[i].best.ms;
    fmt::print("{:<28} {:>13.3f} {:>13.3f} {:>7.2f}x\n", name, h, b, b > 0 ? h / b : 0.0);
    fmt::print("  heuristic {}\n  searched  {}\n", to_string(plain_opts[i]), to_string(beam_opts[i]));
  }
}

int run(const Options& o) {
  std::string source;
  const std::vector<Tensor> outputs = load_input(o, source);
  std::optional<Context> beam;  // after the inputs: the search is for the dumped kernels
  if (o.beam > 0)
    beam.emplace(std::initializer_list<std::pair<std::string, Context::Value>>{{"BEAM", o.beam}});
  const Painter p{o.color};
  if (std::find(o.stages.begin(), o.stages.end(), "source") != o.stages.end()) {
    fmt::print("{}", source.empty() ? "(a graph file has no program source)\n" : source);
    return 0;
  }
  if (!o.save.empty()) save_graph(outputs, o.save);
  const StageDump dump = dump_stages(outputs);
  if (o.stages == std::vector<std::string>{"list"}) {
    for (const std::string& name : stage_names(dump)) fmt::print("{}\n", name);
    return 0;
  }
  check_selection(o, dump);
  for (const StageText& s : dump.stages)
    if (wanted(o, s)) print_stage(o, p, s);
  if (o.run) {
    const TimedRun searched = time_kernels(dump, o.repeat);
    print_times(o, p, searched.times);
    if (o.beam > 0) print_beam(o, p, dump, searched);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options o;
    if (!parse(argc, argv, o)) return 0;
    return run(o);
  } catch (const Usage& u) {
    std::fprintf(stderr, "loom-dump: %s\n%s\n(loom-dump --help tells more)\n", u.message.c_str(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom-dump: %s\n", e.what());
    return 1;
  }
}
