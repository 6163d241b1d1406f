#pragma once
// The machine loom compiles for: its instruction set, vector registers and
// caches, detected once from CPUID and sysconf (sysfs may be empty in a VM), or
// a preset that LOOM_TARGET names (docs/env.md). Every stage, the optimiser, the
// emitter and the JIT read it through their context, never the host directly;
// every machine constant is derived from it (docs/performance.md, "Target").
// In ir/, the lowest floor, so schedule/, codegen/ and runtime/ all see it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

struct Flags;

// x86 instruction-set extensions loom cares about (AMX only where present).
struct TargetIsa {
  bool sse42 = false;
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;  // vcvtph2ps/vcvtps2ph: float16 <-> float32
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512bf16 = false;  // vcvtneps2bf16 and vdpbf16ps
  bool avx512vnni = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
  bool amx_int8 = false;

  bool operator==(const TargetIsa&) const = default;
};

struct Target {
  std::string name = "native";  // "native", "x86-64-v2", "x86-64-v3", "x86-64-v4" or "x86-64-v3-tiny"
  TargetIsa isa;
  int vector_bytes = 16;      // one SIMD register: 64 with AVX-512, 32 with AVX, 16 otherwise
  int vector_registers = 16;  // SIMD registers of that width: 32 with AVX-512, else 16
  int64_t l1d_bytes = 0;      // L1 data cache of one core
  int l1d_ways = 0;           // its associativity
  int line_bytes = 0;         // its line
  int64_t l2_bytes = 0;       // L2 of one core
  int64_t l3_bytes = 0;       // L3 as sysconf reports it (on AMD: the whole package's)
  // The L3 one core complex shares (sysfs's index3 where Linux shows it; else
  // l3_bytes, at most a common complex's 32 MiB: see target.cpp).
  int64_t l3_complex_bytes = 0;
  int cores = 1;  // processors online
  // The core's pipeline and memory system (CPUID's family and model, sysconf, sysfs;
  // a preset keeps the host's):
  int fma_latency = 4;         // cycles of one FMA: 5 on Zen 1/2, Haswell, Broadwell, else 4
  int fma_ports = 2;           // FMAs a core starts per cycle
  int prefetch_streams = 8;    // sequential streams a core's prefetchers follow at once
  double wake_work = 1 << 17;  // work (ops) below which waking a thread costs more than it saves
  int64_t page_bytes = 4096;   // the memory page (sysconf(_SC_PAGESIZE))
  int64_t huge_page_bytes = int64_t{2} << 20;  // a transparent huge page (hpage_pmd_size)

  bool operator==(const Target&) const = default;

  // vdpbf16ps at this vector width: pairs of bfloat16 products summed into float32 lanes
  // (OptKind::PairDot; schedule/panel_packing.cpp lays its operands out in pairs).
  bool pair_dot() const { return isa.avx512bf16 && (vector_bytes == 64 || isa.avx512vl); }

  // A Float32 MAX (NaN propagating, -0 below +0) in three instructions at every width:
  // AVX-512DQ's vrangeps orders the zeros, two vfixupimmps bring each operand's NaN
  // through (codegen/llvm_emit.cpp); elsewhere numeric_lowering writes it as selects.
  bool exact_float_max() const { return isa.avx512dq && isa.avx512vl; }

  // Sets of the L1 data cache: rows a multiple of sets x line apart share one.
  int64_t l1d_sets() const { return l1d_bytes / (int64_t{l1d_ways} * line_bytes); }

  // Derived constants (docs/performance.md, "Derived constants"):
  // fma_latency x fma_ports: independent FMA chains that keep every FMA pipe busy.
  int64_t fma_chains() const { return int64_t{fma_latency} * fma_ports; }
  // fma_ports: b vectors per k step of a register tile, so one a broadcast feeds every pipe.
  int64_t tile_col_vectors() const { return fma_ports; }
  // min(3 x fma_chains / (2 x tile_col_vectors), (vector_registers - 1 - tile_col_vectors) /
  // tile_col_vectors): a tile's rows, half again the chains needed, within the registers.
  int64_t tile_max_rows() const;
  // max(tile_col_vectors, (vector_registers - 1) / (tile_max_rows + 1)): the most b vectors a
  // tile of tile_max_rows rows holds in registers (accumulators, b vectors, one broadcast),
  // so a product this narrow is one tile wide and reads a once.
  int64_t tile_wide_col_vectors() const;
  // n columns of `lanes`-lane vectors that one such tile holds: whole vectors, at most
  // tile_wide_col_vectors of them (panel_packing's panel width and register_tile's tile agree).
  bool one_tile_wide(int64_t n, int64_t lanes) const {
    return n % lanes == 0 && n / lanes <= tile_wide_col_vectors();
  }
  // bit_floor(fma_latency): a reduction's vector accumulators (a power of two, to divide the vectors).
  int64_t accumulators() const;
  // prefetch_streams: rows of b a GEMV or column-sum tile streams at once.
  int64_t gemv_rows() const { return prefetch_streams; }
  // 8 x gemv_rows: rows per part where split_reduceop cuts a GEMV's or column sum's k.
  int64_t gemv_part_rows() const { return 8 * gemv_rows(); }
  // 2 x page_bytes / itemsize: columns of a GEMV chunk, two pages of each row of b.
  int64_t gemv_chunk(int64_t itemsize) const { return 2 * page_bytes / itemsize; }
  // max(1, cores): blocks (or chunks) at least, since they are what the threads share.
  int64_t min_blocks() const { return cores > 1 ? cores : 1; }
  // max(vector_bytes, line_bytes): a buffer's alignment, whole vectors and whole lines.
  int64_t buffer_alignment() const { return vector_bytes > line_bytes ? vector_bytes : line_bytes; }
  // wake_work: a kernel run of less work runs on the calling thread.
  double serial_work() const { return wake_work; }
  // wake_work / 4: work a slice holds at least, so its call is worth making.
  double slice_work() const { return wake_work / 4; }
  // 4 x wake_work: work a task of a shared run (consecutive slices) holds at least, so its
  // spawn and steal are small beside it; a run has at least one task per thread.
  double task_work() const { return 4 * wake_work; }
  // The ISA as LLVM spells its features, for the keys and for the JIT:
  // "+avx2,+fma,-avx512f,...", every extension above listed.
  std::string features() const;
  // What distinguishes the code made for it: the kernel and disk caches' key.
  std::string key() const;
  // One line per field, for loom-dump --target and logs.
  std::string describe() const;
};

// The alignment the kernel ABI promises for every buffer pointer (the JIT's
// aligned loads assume it): an interface, not a machine property.
inline constexpr int64_t kKernelAbiAlignment = 64;

// The FMA latency of a CPU by CPUID's vendor, family and model (amd: AuthenticAMD):
// 5 cycles on Zen 1/Zen+/Zen 2 (family 0x17), Haswell and Broadwell, else 4.
int fma_latency_of(bool amd, int family, int model);

// The host's caches as one source reports them (0: not reported): the tests
// compare the two; host_target() takes sysconf's (what getconf prints) and
// CPUID's where sysconf has none.
struct TargetCaches {
  int64_t l1d_bytes = 0;
  int l1d_ways = 0;
  int line_bytes = 0;
  int64_t l2_bytes = 0;
  int64_t l3_bytes = 0;
};
TargetCaches cpuid_caches();
TargetCaches sysconf_caches();

// The host as detected at first use (thread-safe; the same value ever after).
const Target& host_target();
// The preset `name` derived from the host (its caches and cores kept, the ISA,
// vector width and registers those of the preset's level, even where the host
// lacks them: kernels are planned and compiled for it anywhere), or the host
// itself for "native". Throws loom::Error naming the known presets otherwise.
const Target& target_named(std::string_view name);
// The instructions of `t` the host does not have, as feature names ("avx512f,
// avx512bw"), or "" when the host runs `t`'s kernels.
std::string host_lacks(const Target& t);
// target_named(name), or a loom::Error naming what the host lacks when it cannot
// run the preset's kernels (what LOOM_TARGET takes).
const Target& runnable_target_named(std::string_view name);
// The x86-64 level whose instructions the preset `name` allows, as LLVM names the
// CPU ("x86-64-v3" for x86-64-v3-tiny), or "native". Throws as target_named.
std::string_view preset_level(std::string_view name);
// The preset names LOOM_TARGET takes, "native" first.
const std::vector<std::string_view>& target_names();
// `t` planned for vectors of `bytes` instead (the registers: that width's count):
// what LOOM_VECTOR_WIDTH does, and what tests of one width use.
Target with_vector_bytes(Target t, int bytes);
// The Target the flags ask for: LOOM_TARGET's preset, its vector width replaced
// by LOOM_VECTOR_WIDTH's (and the registers by that width's count) where set.
Target target_of(const Flags& flags);
// The same for the flags in force (loom::flags()): the default of the options
// of codegen's passes, so a test or tool without flags of its own follows LOOM_TARGET.
Target current_target();

}  // namespace loom
