// loom-fuzz: the differential fuzzer from the shell (docs/fuzzing.md).
//   loom-fuzz --seed S --count N [--out DIR] [--steps K] [--bounds-share N] [--gradient-share N]
//             [--target T[,T...]] [--packed-matmuls] [--stop] [--verbose]
//   loom-fuzz --replay FILE [--bounds] [--target T]
#include "fuzz/fuzz.hpp"
#include "ir/planted_fault.hpp"
#include "ir/target.hpp"

#include <loom/loom.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

constexpr const char* kUsage = R"(usage:
  loom-fuzz [--seed S] [--count N] [--out DIR] [--steps K] [--bounds-share N]
            [--gradient-share N] [--target T[,T...]] [--packed-matmuls] [--no-kernel-check] [--stop]
            [--verbose] [--coverage] [--recompute-bound R]
            [--plant-fault | --plant-gradient-fault | --plant-recompute-fault]
      runs programs S, S+1, ..., S+N-1 (default: --seed 1 --count 100) against the
      reference interpreter; each failure is shrunk and written to DIR (default
      ./loom-fuzz-failures) as a replay file. --bounds-share N runs every N-th program
      with LOOM_CHECK_BOUNDS=1 (default 8, 0: never); --gradient-share N makes every
      N-th program a gradient program, its loss's gradient checked against finite
      differences (default 4, 0: never). --target T1,T2,... compiles the programs for
      these LOOM_TARGET presets in turn (default native,x86-64-v3,x86-64-v2,x86-64-v3-tiny; one name:
      every program at that preset). --packed-matmuls makes half the matmul steps
      products big enough for panel packing (up to 16384 elements a value; slower).
      --recompute-bound R fails a program whose schedule does more than R times the
      arithmetic of its graph computed once (default 1.25, 0: not checked; the ratio
      of each program shows with --verbose, their spread with --coverage).
      Exit status 1 if any failed.
      --plant-fault switches on a deliberately wrong simplifier rule (float x - c
      becomes x + c), to see the fuzzer catch, pin and shrink a wrong rewrite;
      --plant-gradient-fault a wrong gradient rule (sqrt' = 1/sqrt, twice the truth);
      --plant-recompute-fault a buffer_removal that inlines every buffer it may.
  loom-fuzz --replay FILE [--bounds] [--target T] [--no-kernel-check]
      reruns one replay (any graph file) and says whether it still fails.
)";

int replay(const std::string& path, const loom::fuzz::CheckOptions& options) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << "loom-fuzz: cannot read " << path << "\n";
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  const auto outcome = loom::fuzz::check_graph(text.str(), options);
  if (!outcome.valid) {
    std::cerr << "loom-fuzz: the reference refuses " << path << ": " << outcome.invalid_reason << "\n";
    return 2;
  }
  if (outcome.failure) {
    std::cout << fmt::format("FAIL {}: {}\n{}\n", path, outcome.failure->kind, outcome.failure->message);
    return 1;
  }
  std::cout << "ok " << path << "\n";
  return 0;
}

// "native,x86-64-v3": the presets, each checked (target_named throws naming the known ones).
std::vector<std::string> presets(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    loom::target_named(name);
    out.push_back(name);
  }
  if (out.empty()) throw loom::Error("loom-fuzz --target: no preset named");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  loom::fuzz::RunOptions options;
  options.replay_dir = "loom-fuzz-failures";
  uint64_t seed = 1;
  int64_t count = 100;
  std::string replay_file;
  bool bounds = false, coverage = false;
  std::string replay_target;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "loom-fuzz: " << a << " needs a value\n" << kUsage;
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (a == "--seed")
        seed = std::stoull(next());
      else if (a == "--count")
        count = std::stoll(next());
      else if (a == "--out")
        options.replay_dir = next();
      else if (a == "--steps")
        options.generate.max_steps = std::stoi(next());
      else if (a == "--packed-matmuls")
        options.generate.packed_matmul_elements = 16384;
      else if (a == "--bounds-share")
        options.bounds_share = std::stoi(next());
      else if (a == "--gradient-share")
        options.gradient_share = std::stoi(next());
      else if (a == "--replay")
        replay_file = next();
      else if (a == "--bounds")
        bounds = true;
      else if (a == "--target") {
        options.targets = presets(next());
        replay_target = options.targets.front();
      } else if (a == "--no-kernel-check")
        options.check.kernel_checker = false;
      else if (a == "--stop")
        options.stop_at_first = true;
      else if (a == "--verbose")
        options.verbose = true;
      else if (a == "--coverage")
        coverage = true;
      else if (a == "--plant-fault")
        loom::set_planted_fault(loom::PlantedFault::FlipConstantSub);
      else if (a == "--plant-gradient-fault")
        loom::set_planted_fault(loom::PlantedFault::DoubledSqrtGradient);
      else if (a == "--plant-recompute-fault")
        loom::set_planted_fault(loom::PlantedFault::InlineEveryBuffer);
      else if (a == "--recompute-bound")
        options.check.recompute_bound = std::stod(next());
      else if (a == "--help" || a == "-h") {
        std::cout << kUsage;
        return 0;
      } else {
        std::cerr << "loom-fuzz: unknown argument " << a << "\n" << kUsage;
        return 2;
      }
    } catch (const loom::Error& e) {
      std::cerr << "loom-fuzz: " << e.what() << "\n";
      return 2;
    } catch (const std::exception&) {
      std::cerr << "loom-fuzz: bad value for " << a << "\n" << kUsage;
      return 2;
    }
  }
  if (!replay_file.empty()) {
    loom::fuzz::CheckOptions check = options.check;
    check.check_bounds = bounds;
    check.target = replay_target;
    return replay(replay_file, check);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto result = loom::fuzz::run(seed, count, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (coverage) std::cout << result.coverage.report();
  for (size_t i = 0; i < result.failures.size(); ++i)
    std::cout << fmt::format("FAIL program {}: {}: {}\n", result.failures[i].first,
                             result.failures[i].second.kind, result.failures[i].second.message.substr(0, 400))
              << (i < result.replay_files.size() ? "  replay: " + result.replay_files[i] + "\n" : "");
  std::cout << fmt::format("loom-fuzz: {} programs from seed {} in {:.1f} s: {} failed, {} invalid\n",
                           result.programs, seed, seconds, result.failures.size(), result.invalid);
  return result.failures.empty() ? 0 : 1;
}
