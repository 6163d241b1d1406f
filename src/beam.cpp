// BEAM search (src/beam.hpp): candidates are Opt lists, each compiled by the engine
// (compile_candidate), run on one set of scratch buffers and compared with the
// heuristic's output there.
#include "src/beam.hpp"

#include <loom/half.hpp>

#include "codegen/codegen.hpp"
#include "codegen/heuristic.hpp"
#include "ir/kernel_cost.hpp"
#include "ir/log.hpp"
#include "ir/planted_fault.hpp"
#include "ir/target.hpp"
#include "ir/text.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/executor.hpp"
#include "src/engine.hpp"

#include <loom/debug.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <unordered_map>
#include <unordered_set>

namespace loom::detail {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Scratch memory the search may take for one kernel's buffers: a larger kernel keeps the heuristic.
constexpr int64_t kMaxScratchBytes = int64_t{1} << 30;
// Bytes after each buffer filled with a pattern and checked after every run: a candidate
// that writes past a buffer's end is rejected (the heuristic's kernel never does).
constexpr size_t kGuardBytes = 4096;
// A candidate replaces the heuristic only when this much faster: timing noise must not
// turn a tie into a different kernel from run to run.
constexpr double kMinGain = 0.97;
// Timed runs of a candidate: at least kMinRuns, more while they take under kMinSeconds.
constexpr int kMinRuns = 3, kMaxRuns = 50;
constexpr double kMinSeconds = 0.02;

struct Slot {
  int64_t slot = 0;
  DType dtype;
  int64_t elements = 0;
  bool stored = false;  // the kernel writes it
};

// The buffers the kernel binds, sized as its index expressions reach (as the kernel
// checker sizes them); "" when it can be searched on them, else why not.
std::string slots_of(const UOpPtr& ast, std::vector<Slot>& out) {
  std::map<int64_t, Slot> slots;
  for (const auto& n : toposort(ast)) {
    if (n->op == Op::DEFINE_VAR) return "its sizes are symbolic";
    if (n->op == Op::STORE && n->src[0]->op == Op::INDEX && n->src[0]->src[0]->op == Op::DEFINE_GLOBAL)
      slots[n->src[0]->src[0]->arg_int()].stored = true;
    if (n->op != Op::INDEX || n->src.size() < 2 || n->src[0]->op != Op::DEFINE_GLOBAL) continue;
    Slot& s = slots[n->src[0]->arg_int()];
    s.slot = n->src[0]->arg_int();
    s.dtype = n->src[0]->dtype.base();
    // A gathered index (loaded from a buffer) would read scratch data as addresses.
    for (const auto& a : toposort(n->src[1]))
      if (a->op == Op::LOAD) return "an index is loaded from memory";
    const int64_t reach = n->src[1]->dtype.lanes == 1 ? n->dtype.lanes : 1;
    if (n->src[1]->vmax() > kMaxScratchBytes) return "an index has no bound";
    s.elements = std::max(s.elements, n->src[1]->vmax() + reach);
  }
  int64_t bytes = 0;
  for (const auto& [slot, s] : slots) {
    bytes += s.elements * s.dtype.itemsize();
    out.push_back(s);
  }
  if (bytes > kMaxScratchBytes) return fmt::format("its buffers take {} bytes", bytes);
  return "";
}

// Deterministic values for each slot: floats in [-2, 2] in steps of 1/500 (the kernel
// checker's), integers in [-20, 20], bools and bytes over their range.
void fill(const Slot& s, std::byte* data, uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(s.slot));
  for (int64_t i = 0; i < s.elements; ++i) {
    const uint64_t r = rng();
    std::byte* p = data + i * s.dtype.itemsize();
    const double f = static_cast<double>(static_cast<int64_t>(r % 4001) - 2000) / 500;
    const auto put = [&](auto v) { std::memcpy(p, &v, sizeof v); };
    switch (s.dtype.scalar) {
      case Scalar::Float32: put(static_cast<float>(f)); break;
      case Scalar::Float64: put(f); break;
      case Scalar::BFloat16: put(bfloat16(static_cast<float>(f))); break;
      case Scalar::Float16: put(float16(static_cast<float>(f))); break;
      case Scalar::Bool: put(static_cast<uint8_t>(r & 1)); break;
      case Scalar::UInt8: put(static_cast<uint8_t>(r & 255)); break;
      case Scalar::Int32: put(static_cast<int32_t>(r % 41) - 20); break;
      case Scalar::Int64: put(static_cast<int64_t>(r % 41) - 20); break;
    }
  }
}

double value_at(const Slot& s, const std::byte* data, int64_t i) {
  const std::byte* p = data + i * s.dtype.itemsize();
  const auto get = [&](auto v) {
    std::memcpy(&v, p, sizeof v);
    return static_cast<double>(v);
  };
  const auto get_half = [&](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (s.dtype.scalar) {
    case Scalar::Float32: return get(float{});
    case Scalar::Float64: return get(double{});
    case Scalar::BFloat16: return static_cast<double>(static_cast<float>(get_half(bfloat16{})));
    case Scalar::Float16: return static_cast<double>(static_cast<float>(get_half(float16{})));
    case Scalar::Bool:
    case Scalar::UInt8: return get(uint8_t{});
    case Scalar::Int32: return get(int32_t{});
    case Scalar::Int64: return get(int64_t{});
  }
  return 0;
}

// The kernel checker's tolerance (docs/fuzzing.md): integers and bools exactly; floats
// within 2^-12 (float32) or 2^-36 (float64) of |want| + scale, scale the largest
// magnitude the buffer and the inputs hold (a reordered sum keeps its operands' error);
// NaN matches NaN, an infinity the same infinity. "" when `got` agrees with `want`.
std::string compare(const Slot& s, const std::byte* got, const std::byte* want, double input_scale) {
  if (!s.dtype.is_float()) {
    if (std::memcmp(got, want, static_cast<size_t>(s.elements * s.dtype.itemsize())) == 0) return "";
    for (int64_t i = 0; i < s.elements; ++i)
      if (value_at(s, got, i) != value_at(s, want, i))
        return fmt::format("slot {} element {}: {} where the heuristic's kernel gives {}", s.slot, i,
                           value_at(s, got, i), value_at(s, want, i));
    return "";
  }
  // Halves round their results to 8 or 11 bits: a reordered sum differs by those ulps.
  const double rtol = s.dtype.scalar == Scalar::Float64   ? 0x1p-36
                      : s.dtype.scalar == Scalar::Float32 ? 0x1p-12
                      : s.dtype.scalar == Scalar::Float16 ? 0x1p-8
                                                          : 0x1p-5;
  double scale = input_scale;
  for (int64_t i = 0; i < s.elements; ++i)
    if (const double w = std::abs(value_at(s, want, i)); std::isfinite(w)) scale = std::max(scale, w);
  for (int64_t i = 0; i < s.elements; ++i) {
    const double g = value_at(s, got, i), w = value_at(s, want, i);
    const bool agree = std::isnan(w)   ? std::isnan(g)
                       : std::isinf(w) ? g == w
                                       : std::abs(g - w) <= rtol * (std::abs(w) + scale);
    if (!agree)
      return fmt::format("slot {} element {}: {} where the heuristic's kernel gives {}", s.slot, i, g, w);
  }
  return "";
}

struct Aligned {
  void operator()(std::byte* p) const { std::free(p); }
};

struct Entry {
  std::vector<Opt> prefix;  // the searched Opts, before finish_heuristic's
  std::vector<Opt> opts;    // the whole list compiled
  double ms = 0;
};

class Search {
 public:
  Search(const UOpPtr& ast, const std::string& name, const Flags& flags, std::vector<Slot> slots)
      : ast_(ast), name_(name), flags_(flags), target_(target_of(flags)), slots_(std::move(slots)) {
    for (const Slot& s : slots_) {
      const size_t bytes = static_cast<size_t>(s.elements * s.dtype.itemsize());
      constexpr auto align = static_cast<size_t>(kKernelAbiAlignment);  // what a kernel may assume
      const size_t total = (bytes + kGuardBytes + align - 1) / align * align;
      memory_.emplace_back(static_cast<std::byte*>(std::aligned_alloc(align, total)));
      if (!memory_.back()) throw Error(fmt::format("beam: no memory for {} bytes of scratch", total));
      want_.emplace_back(bytes);
      slot_bytes_.push_back(bytes);
    }
    int64_t top = -1;
    for (const Slot& s : slots_) top = std::max(top, s.slot);
    pointers_.assign(static_cast<size_t>(top + 1), nullptr);
    for (size_t i = 0; i < slots_.size(); ++i)
      pointers_[static_cast<size_t>(slots_[i].slot)] = memory_[i].get();
    double bytes = 0;
    for (size_t b : slot_bytes_) bytes += static_cast<double>(b);
    work_ = run_work(kernel_work(kernel_flops(ast), bytes), target_);
  }

  BeamResult run(int width, double budget) {
    const auto t0 = Clock::now();
    BeamResult result;
    result.heuristic = heuristic_opts(ast_, target_);
    std::string why;
    const auto h = measure(result.heuristic, true, why);
    ++result.candidates;
    if (!h) {  // the heuristic's kernel is the reference: without it nothing is compared
      result.best = result.heuristic;
      result.skipped = "the heuristic's kernel does not run on scratch buffers: " + why;
      return result;
    }
    result.heuristic_ms = *h;
    Entry best{{}, result.heuristic, *h};
    std::unordered_set<std::string> seen{to_string(result.heuristic)};
    // The search starts from the heuristic's ExpandSum Opts (each writes out a short sum
    // the rest of its choices assume written out), else from nothing.
    std::vector<Opt> base;
    for (const Opt& o : result.heuristic)
      if (o.kind == OptKind::ExpandSum) base.push_back(o);
    std::vector<Entry> beam{{base, {}, std::numeric_limits<double>::infinity()}};
    double beam_best = std::numeric_limits<double>::infinity();
    bool out_of_time = false;
    auto evaluate = [&](const std::vector<Opt>& prefix, std::vector<Entry>& level) {
      const auto opts = completed(prefix);
      if (!opts || !seen.insert(to_string(*opts)).second) return;
      ++result.candidates;
      std::string why_not;
      const auto ms = measure(*opts, false, why_not);
      if (!ms) {
        ++result.rejected;
        log().debug("beam: {}: {} rejected: {}", name_, to_string(*opts), why_not);
        return;
      }
      log().debug("beam: {}: {} {:.4f} ms", name_, to_string(*opts), *ms);
      level.push_back({prefix, *opts, *ms});
    };
    {
      std::vector<Entry> first;
      evaluate(base, first);
      if (!first.empty()) beam_best = first[0].ms, best = first[0].ms < best.ms * kMinGain ? first[0] : best;
    }
    while (!beam.empty() && !out_of_time) {
      std::vector<Entry> level;
      for (const Entry& e : beam) {
        OptState s(ast_, target_);
        try {
          for (const Opt& o : e.prefix) s.apply(o);
        } catch (const Error&) {
          continue;
        }
        for (const std::vector<Opt>& move : search_moves(s)) {
          if (seconds_since(t0) >= budget) {
            out_of_time = true;
            break;
          }
          std::vector<Opt> prefix = e.prefix;
          prefix.insert(prefix.end(), move.begin(), move.end());
          evaluate(prefix, level);
        }
        if (out_of_time) break;
      }
      std::sort(level.begin(), level.end(), [](const Entry& a, const Entry& b) { return a.ms < b.ms; });
      if (level.size() > static_cast<size_t>(width)) level.resize(static_cast<size_t>(width));
      if (level.empty() || level[0].ms >= beam_best) break;  // this level made nothing faster
      beam_best = level[0].ms;
      if (level[0].ms < best.ms * kMinGain) best = level[0];
      beam = std::move(level);
    }
    result.best = best.opts;
    result.best_ms = best.ms;
    // Timed again side by side, now that the search's compiles are done.
    if (result.best != result.heuristic) {
      std::string ignored;
      const auto h2 = measure(result.heuristic, false, ignored), b2 = measure(result.best, false, ignored);
      if (h2 && b2) {
        result.heuristic_ms = std::min(result.heuristic_ms, *h2);
        result.best_ms = std::min(result.best_ms, *b2);
      }
      if (!(result.best_ms < result.heuristic_ms * kMinGain)) {
        result.best = result.heuristic;
        result.best_ms = result.heuristic_ms;
      }
    } else {
      result.best_ms = result.heuristic_ms;
    }
    return result;
  }

 private:
  // `prefix` followed by the heuristic's last choices (finish_heuristic), if it fits.
  std::optional<std::vector<Opt>> completed(const std::vector<Opt>& prefix) const {
    try {
      OptState s(ast_, target_);
      for (const Opt& o : prefix) s.apply(o);
      finish_heuristic(s);
      return s.applied();
    } catch (const Error&) {
      return std::nullopt;
    }
  }

  // Compiles `opts`, runs it once on fresh scratch values and checks what it wrote (as the
  // reference, or against it), then times it: its best run in ms, or nothing and why.
  std::optional<double> measure(const std::vector<Opt>& opts, bool reference, std::string& why) {
    CandidateKernel c;
    try {
      c = compile_candidate(ast_, name_, flags_, opts);
    } catch (const Error& e) {
      why = e.what();
      return std::nullopt;
    }
    const int64_t extent = parallel_extent(c.extent, {});
    double input_scale = 0;
    for (size_t i = 0; i < slots_.size(); ++i) {
      fill(slots_[i], memory_[i].get(), 1);
      std::memset(memory_[i].get() + slot_bytes_[i], 0xA5, kGuardBytes);
      if (slots_[i].dtype.is_float() && !slots_[i].stored) input_scale = std::max(input_scale, 2.0);
    }
    run_kernel(c.fn, pointers_, {}, extent, {}, work_);
    for (size_t i = 0; i < slots_.size(); ++i) {
      const std::byte* guard = memory_[i].get() + slot_bytes_[i];
      for (size_t b = 0; b < kGuardBytes; ++b)
        if (guard[b] != std::byte{0xA5}) {
          why = fmt::format("it wrote past the end of buffer slot {}", slots_[i].slot);
          return std::nullopt;
        }
    }
    // Testing only (ir/planted_fault.hpp): every candidate but the reference computes a wrong first output.
    if (!reference && planted_fault() == PlantedFault::WrongSearchCandidate)
      for (size_t i = 0; i < slots_.size(); ++i)
        if (slots_[i].stored && slots_[i].elements > 0) {
          memory_[i][slots_[i].dtype.is_float() ? slots_[i].dtype.itemsize() - 1 : 0] ^= std::byte{0x40};
          break;
        }
    for (size_t i = 0; i < slots_.size(); ++i) {
      std::byte* got = memory_[i].get();
      if (reference) {
        std::memcpy(want_[i].data(), got, slot_bytes_[i]);
      } else if (std::string diff = compare(slots_[i], got, want_[i].data(), input_scale); !diff.empty()) {
        why = "its output differs: " + diff;
        return std::nullopt;
      }
    }
    double best = std::numeric_limits<double>::infinity();
    const auto t0 = Clock::now();
    for (int r = 0; r < kMaxRuns && (r < kMinRuns || seconds_since(t0) < kMinSeconds); ++r) {
      const auto t = Clock::now();
      run_kernel(c.fn, pointers_, {}, extent, {}, work_);
      best = std::min(best, seconds_since(t) * 1e3);
    }
    return best;
  }

  UOpPtr ast_;
  std::string name_;
  const Flags& flags_;
  Target target_;
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<std::byte[], Aligned>> memory_;
  std::vector<std::vector<std::byte>> want_;
  std::vector<size_t> slot_bytes_;
  std::vector<void*> pointers_;
  RunWork work_;
};

// Searches run one at a time (their timings would disturb each other); their winners
// stay here for the process, under the disk cache's key.
std::mutex& search_mutex() {
  static auto* mu = new std::mutex();
  return *mu;
}
std::unordered_map<std::string, std::vector<Opt>>& winners() {
  static auto* w = new std::unordered_map<std::string, std::vector<Opt>>();  // never destroyed
  return *w;
}

}  // namespace

BeamResult beam_opts(const UOpPtr& ast, const std::string& name, const Flags& flags,
                     const std::string& options) {
  BeamResult result;
  const std::string key = fmt::format("beam\noptions {}\n{}", options, to_text(ast));
  std::lock_guard lock(search_mutex());
  if (auto it = winners().find(key); it != winners().end()) {
    result.best = it->second;
    result.heuristic = heuristic_opts(ast, target_of(flags));
    result.from_cache = true;
    return result;
  }
  const DiskCache disk(disk_cache_dir(flags), kernel_backend(flags)->cache_identity(), flags.cache_bytes);
  if (auto hit = disk.find(key); hit && hit->symbol == "beam") {
    try {
      result.best = parse_opts(hit->object);
      result.heuristic = heuristic_opts(ast, target_of(flags));
      result.from_cache = true;
      winners()[key] = result.best;
      count_beam_cache_hit();
      return result;
    } catch (const Error& e) {  // written by a loom whose Opts read otherwise: search again
      log().debug("beam: {}: ignoring the cached winner: {}", name, e.what());
    }
  }
  std::vector<Slot> slots;
  result.skipped = flags.beam_budget > 0 ? slots_of(ast, slots) : "the budget is 0";
  if (!result.skipped.empty()) {
    result.best = result.heuristic = heuristic_opts(ast, target_of(flags));
    log().debug("beam: {} not searched: {}", name, result.skipped);
    return result;
  }
  const auto t0 = Clock::now();
  result = Search(ast, name, flags, std::move(slots)).run(flags.beam, flags.beam_budget);
  count_beam_search();
  const std::string line = fmt::format(
      "beam: {} searched in {:.2f} s ({} candidates, {} rejected): heuristic {} {:.4f} ms, searched {} "
      "{:.4f} "
      "ms",
      name, seconds_since(t0), result.candidates, result.rejected, to_string(result.heuristic),
      result.heuristic_ms, to_string(result.best), result.best_ms);
  if (flags.debug >= 2)
    log().info("{}", line);
  else
    log().debug("{}", line);
  if (!result.skipped.empty()) return result;  // the reference did not run: nothing to keep
  winners()[key] = result.best;
  disk.store(key, {"beam", to_string(result.best)});
  return result;
}

void clear_beam_results() {
  std::lock_guard lock(search_mutex());
  winners().clear();
}

}  // namespace loom::detail
