#include "ir/flags.hpp"

#include "ir/log.hpp"
#include "ir/target.hpp"

#include <loom/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>

extern char** environ;

namespace loom {

namespace {

// clang-format off: one row a flag reads best
const std::vector<FlagInfo> kFlagTable = {
    {"LOOM_DEBUG", "0 to 6",
     "1: a line per realize; 2: a line per kernel with its time, GFLOP/s and GB/s; 3: each kernel as "
     "scheduled and its loops; 4: LLVM IR; 5: the graph before and after every stage or pass that "
     "changed it; 6: x86 assembly. Each level adds to the ones below"},
    {"LOOM_NOOPT", "0 or 1", "1 turns the kernel optimiser off (no parallel range, no upcast, no tiling)"},
    {"LOOM_THREADS", "1 to 1024",
     "threads of the executor's TBB arena; default: the cores this process may use"},
    {"LOOM_DISABLE", "comma-separated names", "switches off the named rewrite stages or passes"},
    {"LOOM_ENABLE", "comma-separated names",
     "switches on the named rewrite stages that are off by default (online_softmax, docs/pipeline.md)"},
    {"LOOM_PCONTIG", "0 to 10", "partial-contiguous level of buffer removal (0: off)"},
    {"LOOM_CHECK_BOUNDS", "0 or 1",
     "1 makes every kernel check each load and store index against its buffer's size; a violation is a "
     "loom::Error naming the kernel and the buffer"},
    {"LOOM_TARGET", "native, x86-64-v2, x86-64-v3, x86-64-v4 or x86-64-v3-tiny",
     "the machine kernels are compiled for (default native: the host as CPUID and sysconf report it); a "
     "preset keeps the host's caches and cores and takes that x86-64 level's instruction set, vector "
     "width and registers (v3: AVX2 and FMA, v4: AVX-512), and so do LLVM's target features; "
     "a level the host lacks is refused. loom-dump --target prints it"},
    {"LOOM_VECTOR_WIDTH", "0, 128, 256 or 512",
     "the SIMD register width in bits the optimiser plans lanes and register tiles for (0: the target's); "
     "a wider one than the target has still runs, LLVM splitting each vector"},
    {"LOOM_DUMP_DIR", "a directory",
     "writes every kernel at every stage there, one file each, named kernel.NN.stage.ext"},
    {"LOOM_CACHE_DIR", "a directory, or off",
     "where compiled kernels persist as object files; default $XDG_CACHE_HOME/loom, else ~/.cache/loom"},
    {"LOOM_CACHE_BYTES", "bytes, with an optional K, M or G suffix",
     "the most LOOM_CACHE_DIR may hold (default 1G; 0: no bound); past it the least recently used "
     "kernels' files are deleted, down to three quarters of it"},
    {"LOOM_JIT_CACHE_BYTES", "bytes, with an optional K, M or G suffix",
     "memory the in-memory kernel cache keeps for its kernels: code, the JIT's bookkeeping, ASTs "
     "(default 256M); past it the least recently used kernels are freed and compiled again, or "
     "reloaded from LOOM_CACHE_DIR, when next needed"},
    {"LOOM_POOL_BYTES", "bytes, with an optional K, M or G suffix",
     "the most memory the buffer pool keeps of freed buffers for reuse (default: an eighth of physical "
     "memory, at least 256M); a freed buffer beyond it goes back to the system, and past it the least "
     "recently freed ones do"},
    {"LOOM_LOG", "trace, debug, info, warn, error, critical or off",
     "the level of loom's own logger (named loom, on stderr; default info); the host program's loggers "
     "are never touched"},
    {"LOOM_PROFILE", "a file name",
     "writes a Chrome trace-event file of scheduling, each stage, compilation and each kernel run, "
     "one track per thread (Perfetto opens it)"},
    {"LOOM_BEAM", "0 to 64",
     "N > 0 searches each kernel's Opts with a beam of width N: candidates compiled and timed on scratch "
     "buffers, the fastest whose output equals the heuristic's kept and cached in LOOM_CACHE_DIR, so "
     "another process searches nothing (default 0: the heuristic's Opts)"},
    {"LOOM_BEAM_BUDGET", "seconds (a decimal number, 0 or more)",
     "the time LOOM_BEAM's search may spend on one kernel (default 3); 0 keeps the heuristic's Opts"},
    {"LOOM_DIST_CHECK", "0 or 1",
     "1 makes each loom::dist collective compare its kind, shape and dtype across the job's ranks when it "
     "is called (a small all-gather); a mismatch is a loom::Error naming the collective and both ranks' "
     "shapes and dtypes (docs/distributed.md)"},
    {"LOOM_DIST_DETERMINISTIC", "0 or 1",
     "1 makes loom::dist's float sums (all_reduce with Op::Sum or Op::Mean, reduce_scatter, broadcast's "
     "gradient) move every rank's values unreduced and add them in rank order, so every rank gets the "
     "same bits in every run, whatever the MPI library's reduction order (docs/distributed.md)"},
    {"LOOM_DIST_TIMEOUT", "seconds (a decimal number, more than 0)",
     "how long a rank waits for the others in a collective or barrier (default 300); then it logs an "
     "error naming itself and the collective, and ends the whole job with a non-zero exit (MPI_Abort). "
     "A rank on the same host that has died is named sooner (within 50 ms)"},
};
// clang-format on

std::optional<int> parse_int(const std::string& v, int lo, int hi) {
  int n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n < lo || n > hi) return std::nullopt;
  return n;
}

// "4096", "64K", "256M", "1G": bytes, the suffixes binary (K = 1024).
std::optional<uint64_t> parse_bytes(const std::string& v) {
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end == v.data()) return std::nullopt;
  const std::string_view suffix(end, v.data() + v.size() - end);
  int shift = 0;
  if (suffix == "K" || suffix == "k")
    shift = 10;
  else if (suffix == "M" || suffix == "m")
    shift = 20;
  else if (suffix == "G" || suffix == "g")
    shift = 30;
  else if (!suffix.empty())
    return std::nullopt;
  if (shift && n > (UINT64_MAX >> shift)) return std::nullopt;
  return n << shift;
}

std::optional<spdlog::level::level_enum> parse_level(const std::string& v) {
  for (auto l : {spdlog::level::trace, spdlog::level::debug, spdlog::level::info, spdlog::level::warn,
                 spdlog::level::err, spdlog::level::critical, spdlog::level::off})
    if (v == spdlog::level::to_string_view(l) || (l == spdlog::level::warn && v == "warn") ||
        (l == spdlog::level::err && v == "error"))
      return l;
  return std::nullopt;
}

std::vector<std::string> split_list(const std::string& v) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= v.size()) {
    size_t end = v.find(',', start);
    if (end == std::string::npos) end = v.size();
    std::string item = v.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
    start = end + 1;
  }
  return out;
}

// Sets one flag from its text; returns what is wrong with the value, or "".
std::string apply(Flags& f, const std::string& name, const std::string& v) {
  auto ranged = [&](int& out, int lo, int hi) -> std::string {
    if (auto n = parse_int(v, lo, hi)) {
      out = *n;
      return "";
    }
    return fmt::format("expected a whole number in [{}, {}]", lo, hi);
  };
  auto bytes = [&](uint64_t& out) -> std::string {
    if (auto n = parse_bytes(v)) {
      out = *n;
      return "";
    }
    return "expected a number of bytes, optionally followed by K, M or G (like 64M)";
  };
  auto boolean = [&](bool& out) -> std::string {
    int n = 0;
    std::string err = ranged(n, 0, 1);
    out = n != 0;
    return err;
  };
  if (name == "LOOM_DEBUG") return ranged(f.debug, 0, 6);
  if (name == "LOOM_NOOPT") return boolean(f.noopt);
  if (name == "LOOM_THREADS") return v.empty() ? (f.threads = 0, "") : ranged(f.threads, 1, 1024);
  if (name == "LOOM_DISABLE") return f.disable = split_list(v), "";
  if (name == "LOOM_ENABLE") return f.enable = split_list(v), "";
  if (name == "LOOM_PCONTIG") return ranged(f.pcontig, 0, 10);
  if (name == "LOOM_CHECK_BOUNDS") return boolean(f.check_bounds);
  if (name == "LOOM_VECTOR_WIDTH") {
    const auto bits = parse_int(v, 0, 512);
    if (!bits || (*bits != 0 && *bits != 128 && *bits != 256 && *bits != 512))
      return "expected 0, 128, 256 or 512";
    f.vector_bits = *bits;
    return "";
  }
  if (name == "LOOM_TARGET") {
    try {
      runnable_target_named(v);
    } catch (const Error& e) {
      return e.what();
    }
    f.target = v;
    return "";
  }
  if (name == "LOOM_DUMP_DIR") return f.dump_dir = v, "";
  if (name == "LOOM_CACHE_DIR") return f.cache_dir = v, "";
  if (name == "LOOM_PROFILE") return f.profile = v, "";
  if (name == "LOOM_BEAM") return ranged(f.beam, 0, 64);
  if (name == "LOOM_DIST_CHECK") return boolean(f.dist_check);
  if (name == "LOOM_DIST_DETERMINISTIC") return boolean(f.dist_deterministic);
  if (name == "LOOM_BEAM_BUDGET") {
    double s = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), s);
    if (ec != std::errc() || end != v.data() + v.size() || !(s >= 0) || s > 1e6)
      return "expected a number of seconds, 0 or more (like 2.5)";
    f.beam_budget = s;
    return "";
  }
  if (name == "LOOM_DIST_TIMEOUT") {
    double s = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), s);
    if (ec != std::errc() || end != v.data() + v.size() || !(s > 0) || s > 1e9)
      return "expected a number of seconds, more than 0 (like 300 or 2.5)";
    f.dist_timeout = s;
    return "";
  }
  if (name == "LOOM_CACHE_BYTES") return bytes(f.cache_bytes);
  if (name == "LOOM_JIT_CACHE_BYTES") return bytes(f.jit_cache_bytes);
  if (name == "LOOM_POOL_BYTES") return bytes(f.pool_bytes);
  if (name == "LOOM_LOG") {
    if (!parse_level(v)) return "expected trace, debug, info, warn, error, critical or off";
    f.log = v;
    return "";
  }
  return "no such flag";
}

struct Override {
  uint64_t token;
  std::vector<std::pair<std::string, std::string>> values;
};

// The registry: the environment's values, the live overrides, and the snapshot
// built from them. Writers hold the mutex; readers only load the snapshot.
struct Registry {
  std::map<std::string, std::string> environment;  // LOOM_* variables that are set
  std::vector<std::string> warnings;               // about the environment, logged once
  std::mutex mu;
  std::vector<Override> overrides;
  uint64_t next_token = 1;
  std::atomic<std::shared_ptr<const Flags>> snapshot;

  Registry() {
    for (char** e = environ; e && *e; ++e) {
      const std::string_view entry(*e);
      if (!entry.starts_with("LOOM_")) continue;
      const size_t eq = entry.find('=');
      const std::string name(entry.substr(0, eq)), value(eq == entry.npos ? "" : entry.substr(eq + 1));
      if (detail::canonical_flag_name(name).empty())
        warnings.push_back(
            fmt::format("unknown environment variable {} ignored (docs/env.md lists loom's flags)", name));
      else
        environment[name] = value;
    }
    rebuild(true);
  }

  void rebuild(bool from_env = false) {
    auto f = std::make_shared<Flags>();
    for (const auto& [name, value] : environment) {
      Flags tried = *f;
      const std::string err = apply(tried, name, value);
      if (err.empty())
        *f = std::move(tried);
      else if (from_env)
        warnings.push_back(fmt::format("{}='{}' ignored: {}", name, value, err));
    }
    for (const auto& o : overrides)
      for (const auto& [name, value] : o.values) {
        apply(*f, name, value);  // validated when pushed
        if (name == "LOOM_THREADS") f->threads_from_context = f->threads != 0;
      }
    detail::raw_log().set_level(*parse_level(f->log));
    snapshot.store(std::move(f));
  }
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: flags are read until exit
  static std::once_flag warned;
  std::call_once(warned, [] {
    for (const auto& w : r->warnings) detail::raw_log().warn("{}", w);
  });
  return *r;
}

}  // namespace

bool Flags::disabled(std::string_view name) const {
  return std::find(disable.begin(), disable.end(), name) != disable.end();
}

bool Flags::enabled(std::string_view name) const {
  return std::find(enable.begin(), enable.end(), name) != enable.end();
}

const std::vector<FlagInfo>& flag_table() { return kFlagTable; }

std::shared_ptr<const Flags> flags() { return registry().snapshot.load(); }

namespace detail {

std::string canonical_flag_name(std::string_view name) {
  const std::string full = name.starts_with("LOOM_") ? std::string(name) : "LOOM_" + std::string(name);
  for (const auto& row : kFlagTable)
    if (row.name == full) return full;
  return "";
}

std::string flag_value_error(const std::string& name, const std::string& value) {
  Flags probe;
  return apply(probe, name, value);
}

uint64_t push_flag_overrides(const std::vector<std::pair<std::string, std::string>>& overrides) {
  Override o;
  for (const auto& [name, value] : overrides) {
    const std::string full = canonical_flag_name(name);
    if (full.empty())
      throw Error(fmt::format("Context: no flag is called '{}' (docs/env.md lists loom's flags)", name));
    if (std::string err = flag_value_error(full, value); !err.empty())
      throw Error(fmt::format("Context: {}='{}': {}", full, value, err));
    o.values.emplace_back(full, value);
  }
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  o.token = r.next_token++;
  r.overrides.push_back(std::move(o));
  r.rebuild();
  return r.overrides.back().token;
}

void pop_flag_overrides(uint64_t token) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::erase_if(r.overrides, [&](const Override& o) { return o.token == token; });
  r.rebuild();
}

}  // namespace detail

}  // namespace loom
