#pragma once
// The differential fuzzer (docs/fuzzing.md): random tensor programs, compiled by
// loom and evaluated by the reference interpreter, compared with tolerances
// stated per dtype and op class; each kernel-level pass checked against the
// pass before it by the kernel-IR interpreter; failures shrunk to a minimal
// graph file that `loom-fuzz --replay` reruns. Tests-only: links the
// interpreters, never part of libloom.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::fuzz {

// What the fuzzer exercised: how many programs used each op, dtype, rank and stage.
struct Coverage {
  std::map<std::string, int64_t> api_ops;        // Tensor API calls the generator made
  std::map<std::string, int64_t> uops;           // tensor-level UOp ops in the graphs
  std::map<std::string, int64_t> dtypes;         // dtypes of tensor-level nodes
  std::map<std::string, int64_t> ranks;          // ranks of tensor-level nodes
  std::map<std::string, int64_t> stages;         // passes and stages that ran (pass observer)
  std::map<std::string, int64_t> kernel_checks;  // kernel-checker outcomes: checked, unchanged, skipped
  // Gradient probes (fuzz/gradient_check.hpp): agreed, unstable (a kink within the
  // step: skipped), and gradient programs whose loss is not finite (not probed).
  std::map<std::string, int64_t> gradient_checks;
  std::map<std::string, int64_t> targets;  // programs per Target they were compiled for
  // Programs by their schedule's recompute ratio (src/plan.hpp), and the largest.
  std::map<std::string, int64_t> recompute;
  double max_recompute = 0;
  int64_t programs = 0, kernels = 0, bounds_checked = 0;
  int64_t gradients = 0;  // gradient programs whose gradients were compared with finite differences

  void merge(const Coverage& other);
  std::string report() const;
};

struct Failure {
  std::string kind;     // "mismatch", "error", "kernel <pass>", "gradient", "recompute"
  std::string message;  // what differed, where
};

struct CheckOptions {
  bool kernel_checker = true;  // interpret every kernel after every kernel-level pass
  bool check_bounds = false;   // run under LOOM_CHECK_BOUNDS=1
  bool gradients = true;       // check `# @grad` programs against finite differences
  std::string target;          // LOOM_TARGET preset to compile for ("": the flags in force)
  // The most arithmetic a schedule may do against its graph computed once (the
  // recompute ratio, docs/fuzzing.md); 0: not checked.
  double recompute_bound = 1.25;
};

struct Outcome {
  bool valid = true;  // false: the reference refused the program (a generator bug, not loom's)
  std::string invalid_reason;
  std::optional<Failure> failure;
  double recompute_ratio = 0;  // of the program's schedule; 0 when not measured
};

// Loads a graph file (include/loom/graph_file.hpp), evaluates it with the
// reference interpreter, realizes it with loom and compares.
Outcome check_graph(const std::string& graph_text, const CheckOptions& options, Coverage* coverage = nullptr);

// A random program as a graph file. Seeded: the same seed gives the same text.
struct GenerateOptions {
  int max_steps = 8;           // ops per program
  int64_t max_elements = 512;  // per tensor
  // When positive, a share of the matmul steps multiply fresh operands big enough for
  // panel packing (32 rows or more, b over 32 KiB, columns not filling whole panels
  // too): values up to this many elements, where max_elements keeps the rest small.
  int64_t packed_matmul_elements = 0;
  // A gradient program (`# @grad`): Float64 values, operands kept away from
  // poles, and output 0 a random scalar loss of the last values.
  bool gradient = false;
};
std::string generate_program(uint64_t seed, const GenerateOptions& options, Coverage* coverage = nullptr);

// What a failure's message says went wrong, without the numbers, shapes and
// parentheticals that shrinking changes: the shrinker keeps only candidates
// that fail with the same kind and class, so it cannot drift to another bug.
std::string failure_class(const Failure& failure);

// The smallest graph file the shrinker finds that still fails as `failure` did.
std::string shrink(const std::string& graph_text, const Failure& failure, const CheckOptions& options,
                   int max_attempts = 600);

struct RunOptions {
  GenerateOptions generate;
  CheckOptions check;
  int bounds_share = 8;    // every n-th program runs with LOOM_CHECK_BOUNDS=1 (0: never)
  int gradient_share = 4;  // every n-th program is a gradient program (0: never)
  // The LOOM_TARGET presets the programs are compiled for, in turn (program seed modulo
  // their number): the AVX2 and SSE code paths get the same checks as the host's.
  std::vector<std::string> targets = {"native", "x86-64-v3", "x86-64-v2", "x86-64-v3-tiny"};
  std::string replay_dir;      // where shrunk failures are written ("" : not written)
  bool stop_at_first = false;  // stop after the first failure
  bool verbose = false;        // one line per program on stderr
};
struct RunResult {
  int64_t programs = 0, invalid = 0;
  std::vector<std::pair<uint64_t, Failure>> failures;  // program seed, failure
  std::vector<std::string> replay_files;
  std::vector<std::string> shrunk;  // the shrunk graph text per failure
  Coverage coverage;
};
// Programs seed, seed+1, ..., seed+count-1.
RunResult run(uint64_t seed, int64_t count, const RunOptions& options);

}  // namespace loom::fuzz
