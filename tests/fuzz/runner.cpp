#include "fuzz/fuzz.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace loom::fuzz {

namespace {
// The replay: the shrunk graph file, headed by comments saying what failed.
std::string replay_text(uint64_t seed, const Failure& f, const CheckOptions& check,
                        const std::string& shrunk) {
  std::string out = fmt::format("# loom-fuzz replay: program seed {}, failure '{}'\n", seed, f.kind);
  out += fmt::format("# rerun: loom-fuzz --replay FILE{}{}\n", check.check_bounds ? " --bounds" : "",
                     check.target.empty() ? "" : " --target " + check.target);
  std::istringstream lines(f.message);
  std::string line;
  for (int n = 0; std::getline(lines, line) && n < 12; ++n) out += "#   " + line + "\n";
  return out + shrunk;
}
}  // namespace

RunResult run(uint64_t seed, int64_t count, const RunOptions& options) {
  RunResult result;
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t program_seed = seed + static_cast<uint64_t>(i);
    CheckOptions check = options.check;
    check.check_bounds =
        options.bounds_share > 0 && program_seed % static_cast<uint64_t>(options.bounds_share) == 0;
    if (!options.targets.empty()) check.target = options.targets[program_seed % options.targets.size()];
    GenerateOptions generate = options.generate;
    generate.gradient =
        options.gradient_share > 0 &&
        program_seed % static_cast<uint64_t>(options.gradient_share) == 1 % options.gradient_share;
    const std::string text = generate_program(program_seed, generate, &result.coverage);
    const Outcome outcome = check_graph(text, check, &result.coverage);
    ++result.programs;
    if (!outcome.valid) {
      ++result.invalid;
      if (options.verbose)
        std::cerr << fmt::format("program {}: invalid: {}\n", program_seed, outcome.invalid_reason);
      continue;
    }
    if (options.verbose)  // a failure's message before shrinking: the replay file has the shrunk one's
      std::cerr << fmt::format(
          "program {}: {} (recompute ratio {:.3f})\n", program_seed,
          outcome.failure ? outcome.failure->kind + ": " + outcome.failure->message : "ok",
          outcome.recompute_ratio);
    if (!outcome.failure) continue;
    // A replay file `fuzz-S<suffix>.loom` in the replay directory; its path.
    auto write_replay = [&](const std::string& suffix, const Failure& failure, const std::string& graph) {
      std::filesystem::create_directories(options.replay_dir);
      const auto path =
          std::filesystem::path(options.replay_dir) / fmt::format("fuzz-{}{}.loom", program_seed, suffix);
      std::ofstream(path) << replay_text(program_seed, failure, check, graph);
      return path.string();
    };
    // The program as generated too: shrinking keeps a failure's kind, not always its cause.
    if (options.verbose && !options.replay_dir.empty()) write_replay(".unshrunk", *outcome.failure, text);
    const std::string shrunk = shrink(text, *outcome.failure, check);
    const Outcome again = check_graph(shrunk, check);  // the message of the minimal program
    const Failure failure = again.failure ? *again.failure : *outcome.failure;
    result.failures.emplace_back(program_seed, failure);
    result.shrunk.push_back(shrunk);
    if (!options.replay_dir.empty()) result.replay_files.push_back(write_replay("", failure, shrunk));
    if (options.stop_at_first) break;
  }
  return result;
}

}  // namespace loom::fuzz
