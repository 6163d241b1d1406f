#pragma once
// loom's LOOM_* flags: one table (docs/env.md is its prose), read from the
// environment once, and overridable for a scope in code (loom::Context). Every
// floor reads flags() here, so schedule/ and codegen/ need no engine to know
// which stages are off.
//
// A snapshot is immutable: take it once per unit of work (a realize, a kernel)
// so a Context opened meanwhile on another thread cannot change it halfway.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom {

struct Flags {
  int debug = 0;                                   // LOOM_DEBUG 0..6
  bool noopt = false;                              // LOOM_NOOPT
  int threads = 0;                                 // LOOM_THREADS; 0: not set (the runtime's default)
  bool threads_from_context = false;               // set by a Context rather than the environment
  std::vector<std::string> disable;                // LOOM_DISABLE: stage and pass names
  std::vector<std::string> enable;                 // LOOM_ENABLE: stages that are off unless named
  int pcontig = 0;                                 // LOOM_PCONTIG
  bool check_bounds = false;                       // LOOM_CHECK_BOUNDS
  int vector_bits = 0;                             // LOOM_VECTOR_WIDTH; 0: the Target's SIMD width
  std::string target = "native";                   // LOOM_TARGET: a preset of ir/target.hpp
  std::string dump_dir;                            // LOOM_DUMP_DIR; empty: off
  std::string cache_dir;                           // LOOM_CACHE_DIR; "off" disables
  uint64_t cache_bytes = uint64_t{1} << 30;        // LOOM_CACHE_BYTES: the disk cache's bound; 0: none
  uint64_t jit_cache_bytes = uint64_t{256} << 20;  // LOOM_JIT_CACHE_BYTES: the kernel cache's code limit
  uint64_t pool_bytes = 0;                         // LOOM_POOL_BYTES: the buffer pool's bound; 0: default
  std::string log = "info";                        // LOOM_LOG
  std::string profile;                             // LOOM_PROFILE; empty: off
  int beam = 0;                                    // LOOM_BEAM: the search's beam width; 0: off
  double beam_budget = 3;                          // LOOM_BEAM_BUDGET: seconds of search per kernel
  bool dist_check = false;          // LOOM_DIST_CHECK: collectives' metadata compared across ranks
  bool dist_deterministic = false;  // LOOM_DIST_DETERMINISTIC: sums in rank order
  double dist_timeout = 300;        // LOOM_DIST_TIMEOUT: seconds a rank waits for a collective

  // Is the stage or pass `name` switched off by LOOM_DISABLE?
  bool disabled(std::string_view name) const;
  // Is the stage `name`, off by default, switched on by LOOM_ENABLE?
  bool enabled(std::string_view name) const;
};

// One row per flag: what docs/env.md and `loom-dump --help` print.
struct FlagInfo {
  std::string_view name;    // "LOOM_DEBUG"
  std::string_view values;  // "0 to 6"
  std::string_view effect;  // one sentence
};
const std::vector<FlagInfo>& flag_table();

// The flags in force: the environment, then every live override on top, newest
// last. Thread-safe and cheap (one atomic load of a shared snapshot).
std::shared_ptr<const Flags> flags();

namespace detail {
// The machinery behind loom::Context. `name` may omit the LOOM_ prefix. An
// unknown name or a value the flag cannot take throws loom::Error naming both.
// Returns a token for pop_flag_overrides; overrides may be popped in any order.
uint64_t push_flag_overrides(const std::vector<std::pair<std::string, std::string>>& overrides);
void pop_flag_overrides(uint64_t token);
// The canonical name ("LOOM_DEBUG") for `name`, or empty if no flag has it.
std::string canonical_flag_name(std::string_view name);
// What is wrong with `value` for the flag `name` (canonical), or "" if it is fine.
std::string flag_value_error(const std::string& name, const std::string& value);
}  // namespace detail

}  // namespace loom
