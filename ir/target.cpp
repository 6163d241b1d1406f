#include "ir/target.hpp"

#include "ir/flags.hpp"

#include <loom/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cpuid.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <fstream>
#include <string>

namespace loom {

namespace {

struct Cpuid {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Cpuid cpuid(unsigned leaf, unsigned sub = 0) {
  Cpuid r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) return {};
  return r;
}

bool bit(unsigned word, int n) { return (word >> n) & 1u; }

// The register state the OS saves on a context switch (XCR0): a vector
// extension is usable only if its registers are saved.
uint64_t xcr0() {
  if (!bit(cpuid(1).c, 27)) return 0;  // no OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

TargetIsa detect_isa() {
  TargetIsa isa;
  const Cpuid l1 = cpuid(1), l7 = cpuid(7, 0), l7s1 = cpuid(7, 1);
  const uint64_t os = xcr0();
  const bool ymm = (os & 0x6) == 0x6, zmm = ymm && (os & 0xe0) == 0xe0, tiles = (os & 0x60000) == 0x60000;
  isa.sse42 = bit(l1.c, 20);
  isa.avx = ymm && bit(l1.c, 28);
  isa.fma = isa.avx && bit(l1.c, 12);
  isa.f16c = isa.avx && bit(l1.c, 29);
  isa.avx2 = isa.avx && bit(l7.b, 5);
  isa.avx512f = zmm && bit(l7.b, 16);
  isa.avx512dq = isa.avx512f && bit(l7.b, 17);
  isa.avx512bw = isa.avx512f && bit(l7.b, 30);
  isa.avx512vl = isa.avx512f && bit(l7.b, 31);
  isa.avx512vnni = isa.avx512f && bit(l7.c, 11);
  isa.avx512bf16 = isa.avx512f && bit(l7s1.a, 5);
  isa.amx_tile = tiles && bit(l7.d, 24);
  isa.amx_bf16 = isa.amx_tile && bit(l7.d, 22);
  isa.amx_int8 = isa.amx_tile && bit(l7.d, 25);
  return isa;
}

// The widest vector the ISA has, and how many of them.
void set_vectors(Target& t) {
  t.vector_bytes = t.isa.avx512f ? 64 : t.isa.avx ? 32 : 16;
  t.vector_registers = t.isa.avx512f ? 32 : 16;
}

// One cache as CPUID's deterministic cache leaves describe it (Intel's leaf 4,
// AMD's 0x8000001D: the same layout).
struct CacheLeaf {
  int level = 0, type = 0, ways = 0, line = 0, sharing = 0;
  int64_t bytes = 0;
};

std::vector<CacheLeaf> cache_leaves() {
  const Cpuid vendor = cpuid(0);
  const bool amd = vendor.b == 0x68747541;  // "Auth"enticAMD
  const unsigned leaf = amd ? 0x8000001d : 4;
  if (amd && !bit(cpuid(0x80000001).c, 22)) return {};  // no topology extensions
  std::vector<CacheLeaf> out;
  for (unsigned i = 0; i < 16; ++i) {
    const Cpuid r = cpuid(leaf, i);
    if ((r.a & 31) == 0) break;
    CacheLeaf c;
    c.type = static_cast<int>(r.a & 31);
    c.level = static_cast<int>((r.a >> 5) & 7);
    c.sharing = static_cast<int>((r.a >> 14) & 0xfff) + 1;
    c.line = static_cast<int>(r.b & 0xfff) + 1;
    c.ways = static_cast<int>((r.b >> 22) & 0x3ff) + 1;
    c.bytes = int64_t{c.ways} * (((r.b >> 12) & 0x3ff) + 1) * c.line * (int64_t{r.c} + 1);
    out.push_back(c);
  }
  return out;
}

int64_t sysconf_value(int name) {
  const long v = sysconf(name);
  return v > 0 ? v : 0;
}

// The L3 one core complex shares, from sysfs where Linux shows it.
int64_t sysfs_l3_bytes() {
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    int level = 0;
    std::string size;
    if (!(std::ifstream(dir + "level") >> level) || level != 3 || !(std::ifstream(dir + "size") >> size))
      continue;
    const int64_t n = std::atoll(size.c_str());
    const char unit = size.empty() ? ' ' : size.back();
    const int64_t bytes = unit == 'K' ? n << 10 : unit == 'M' ? n << 20 : n;
    if (bytes > 0) return bytes;
  }
  return 0;
}

// CPUID's family and model (the extended fields added where the base family says so).
void family_model(int& family, int& model) {
  const unsigned a = cpuid(1).a;
  family = static_cast<int>((a >> 8) & 0xf);
  model = static_cast<int>((a >> 4) & 0xf);
  if (family == 0xf) family += static_cast<int>((a >> 20) & 0xff);
  if (family == 0x6 || family >= 0xf) model |= static_cast<int>((a >> 16) & 0xf) << 4;
}

// The transparent huge page's size, where the kernel says; else x86's 2 MiB.
int64_t detect_huge_page_bytes() {
  int64_t bytes = 0;
  if (std::ifstream("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size") >> bytes && bytes > 0) return bytes;
  return int64_t{2} << 20;
}

// A common L3 per core complex (AMD's CCX, a mid-size Intel part's whole L3): the
// bound on l3_complex_bytes where nothing says how the package's L3 is divided.
constexpr int64_t kCommonComplexL3 = int64_t{32} << 20;

}  // namespace

TargetCaches cpuid_caches() {
  TargetCaches c;
  for (const CacheLeaf& leaf : cache_leaves()) {
    if (leaf.level == 1 && leaf.type == 1)
      c.l1d_bytes = leaf.bytes, c.l1d_ways = leaf.ways, c.line_bytes = leaf.line;
    if (leaf.level == 2 && leaf.type == 3) c.l2_bytes = leaf.bytes;
    if (leaf.level == 3 && leaf.type == 3) c.l3_bytes = leaf.bytes;
  }
  // AMD's legacy leaves: what a hypervisor that hides 0x8000001D still reports.
  if (c.l1d_bytes == 0 && cpuid(0x80000000).a >= 0x80000006) {
    const Cpuid l1 = cpuid(0x80000005), l2 = cpuid(0x80000006);
    c.l1d_bytes = int64_t{l1.c >> 24} << 10;
    c.l1d_ways = static_cast<int>((l1.c >> 16) & 0xff);
    c.line_bytes = static_cast<int>(l1.c & 0xff);
    c.l2_bytes = int64_t{l2.c >> 16} << 10;
    c.l3_bytes = int64_t{l2.d >> 18} * (512 << 10);
    if (((l2.d >> 12) & 15) == 0) c.l3_bytes = 0;  // associativity 0: no L3
  }
  return c;
}

TargetCaches sysconf_caches() {
  TargetCaches c;
  c.l1d_bytes = sysconf_value(_SC_LEVEL1_DCACHE_SIZE);
  c.l1d_ways = static_cast<int>(sysconf_value(_SC_LEVEL1_DCACHE_ASSOC));
  c.line_bytes = static_cast<int>(sysconf_value(_SC_LEVEL1_DCACHE_LINESIZE));
  c.l2_bytes = sysconf_value(_SC_LEVEL2_CACHE_SIZE);
  c.l3_bytes = sysconf_value(_SC_LEVEL3_CACHE_SIZE);
  return c;
}

namespace {

Target detect_host() {
  Target t;
  t.isa = detect_isa();
  set_vectors(t);
  // sysconf first: it is what getconf prints; CPUID for what it leaves out.
  const TargetCaches s = sysconf_caches(), c = cpuid_caches();
  auto pick = [](int64_t a, int64_t b) { return a > 0 ? a : b; };
  t.l1d_bytes = pick(s.l1d_bytes, c.l1d_bytes);
  t.l1d_ways = static_cast<int>(pick(s.l1d_ways, c.l1d_ways));
  t.line_bytes = static_cast<int>(pick(s.line_bytes, c.line_bytes));
  t.l2_bytes = pick(s.l2_bytes, c.l2_bytes);
  t.l3_bytes = pick(s.l3_bytes, c.l3_bytes);
  // Nothing known at all (an emulator): a common x86 core's L1 and L2.
  if (t.line_bytes <= 0) t.line_bytes = 64;
  if (t.l1d_bytes <= 0) t.l1d_bytes = 32 << 10;
  if (t.l1d_ways <= 0) t.l1d_ways = 8;
  if (t.l2_bytes <= 0) t.l2_bytes = 512 << 10;
  // One complex's L3: sysfs's, else Intel's leaf 4 (the package's L3 is the complex),
  // else the package's at most a common complex's (AMD's legacy leaf reports the package).
  int64_t complex = sysfs_l3_bytes();
  if (complex == 0)
    for (const CacheLeaf& leaf : cache_leaves())
      if (leaf.level == 3 && leaf.type == 3) complex = leaf.bytes;
  if (complex == 0) complex = t.l3_bytes > 0 ? std::min(t.l3_bytes, kCommonComplexL3) : kCommonComplexL3;
  t.l3_complex_bytes = complex;
  if (t.l3_bytes <= 0) t.l3_bytes = complex;
  t.cores = static_cast<int>(std::max<int64_t>(1, sysconf_value(_SC_NPROCESSORS_ONLN)));
  int family = 0, model = 0;
  family_model(family, model);
  t.fma_latency = fma_latency_of(cpuid(0).b == 0x68747541, family, model);
  if (const int64_t page = sysconf_value(_SC_PAGESIZE); page > 0) t.page_bytes = page;
  t.huge_page_bytes = detect_huge_page_bytes();
  return t;
}

// The x86-64 psABI levels: v2 up to SSE4.2, v3 adds AVX, AVX2, FMA and F16C, v4 AVX-512 F/BW/DQ/VL.
TargetIsa level_isa(int level) {
  TargetIsa isa;
  isa.sse42 = level >= 2;
  isa.avx = isa.avx2 = isa.fma = isa.f16c = level >= 3;
  isa.avx512f = isa.avx512bw = isa.avx512dq = isa.avx512vl = level >= 4;
  return isa;
}

struct Preset {
  std::string_view name;
  int level;          // 0: native
  bool tiny = false;  // caches of a few KiB and threads for any work (see tiny_machine)
};
constexpr std::array<std::string_view, 5> kLevelNames{"", "", "x86-64-v2", "x86-64-v3", "x86-64-v4"};
constexpr std::array<Preset, 5> kPresets{
    {{"native", 0}, {"x86-64-v2", 2}, {"x86-64-v3", 3}, {"x86-64-v4", 4}, {"x86-64-v3-tiny", 3, true}}};

// A machine for testing: 2 L1 sets of the host's ways and line, an L2 of 4 L1s, an L3
// of 4 L2s, and threads woken for any kernel. The choices sized by caches and by the
// work worth a thread (split reduces, packed panels, cache blocks, tasks) then happen
// on programs small enough for the reference interpreter to check.
void tiny_machine(Target& t) {
  t.l1d_bytes = int64_t{2} * t.l1d_ways * t.line_bytes;
  t.l2_bytes = 4 * t.l1d_bytes;
  t.l3_bytes = t.l3_complex_bytes = 4 * t.l2_bytes;
  t.wake_work = 64;
}

// What of `want` the host lacks, as feature names ("" if nothing).
std::string missing(const TargetIsa& want, const TargetIsa& have) {
  std::string out;
  auto need = [&](bool w, bool h, const char* name) {
    if (w && !h) out += (out.empty() ? "" : ", ") + std::string(name);
  };
  need(want.sse42, have.sse42, "sse4.2");
  need(want.avx2, have.avx2, "avx2");
  need(want.fma, have.fma, "fma");
  need(want.f16c, have.f16c, "f16c");
  need(want.avx512f, have.avx512f, "avx512f");
  need(want.avx512bw, have.avx512bw, "avx512bw");
  need(want.avx512dq, have.avx512dq, "avx512dq");
  need(want.avx512vl, have.avx512vl, "avx512vl");
  return out;
}

// A preset describes its level's machine whatever the host has: kernels are planned and
// compiled for it anywhere (as a cross compiler would); only running them needs the host
// to have its instructions (host_lacks).
Target make_preset(const Preset& p) {
  Target t = host_target();
  if (p.level == 0) return t;
  t.name = std::string(p.name);
  t.isa = level_isa(p.level);
  set_vectors(t);
  if (p.tiny) tiny_machine(t);
  return t;
}

}  // namespace

int fma_latency_of(bool amd, int family, int model) {
  if (amd) return family == 0x17 ? 5 : 4;  // Zen 1, Zen+, Zen 2; Zen 3 on: 4
  constexpr std::array<int, 8> kFiveCycles{0x3c, 0x3f, 0x45, 0x46,
                                           0x3d, 0x47, 0x4f, 0x56};  // Haswell, Broadwell
  return family == 6 && std::find(kFiveCycles.begin(), kFiveCycles.end(), model) != kFiveCycles.end() ? 5 : 4;
}

int64_t Target::tile_max_rows() const {
  const int64_t v = tile_col_vectors();
  return std::max<int64_t>(1, std::min(3 * fma_chains() / (2 * v), (vector_registers - 1 - v) / v));
}

int64_t Target::tile_wide_col_vectors() const {
  return std::max<int64_t>(tile_col_vectors(), (vector_registers - 1) / (tile_max_rows() + 1));
}

int64_t Target::accumulators() const {
  return static_cast<int64_t>(std::bit_floor(static_cast<unsigned>(std::max(1, fma_latency))));
}

const Target& host_target() {
  static const Target host = detect_host();
  return host;
}

std::string_view preset_level(std::string_view name) {
  target_named(name);
  for (const Preset& p : kPresets)
    if (p.name == name) return p.level == 0 ? std::string_view("native") : kLevelNames[p.level];
  return "native";
}

const std::vector<std::string_view>& target_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const Preset& p : kPresets) out.push_back(p.name);
    return out;
  }();
  return names;
}

const Target& target_named(std::string_view name) {
  // Each preset made once (a thread-safe static).
  static const std::array<Target, kPresets.size()> made = [] {
    std::array<Target, kPresets.size()> out;
    for (size_t i = 0; i < kPresets.size(); ++i) out[i] = make_preset(kPresets[i]);
    return out;
  }();
  for (size_t i = 0; i < kPresets.size(); ++i)
    if (kPresets[i].name == name) return made[i];
  throw Error(fmt::format("unknown target '{}'; expected one of {}", name, fmt::join(target_names(), ", ")));
}

std::string host_lacks(const Target& t) { return missing(t.isa, host_target().isa); }

const Target& runnable_target_named(std::string_view name) {
  const Target& t = target_named(name);
  if (const std::string lacks = host_lacks(t); !lacks.empty())
    throw Error(fmt::format("the host lacks {}, which {} needs", lacks, name));
  return t;
}

Target with_vector_bytes(Target t, int bytes) {
  t.vector_bytes = bytes;
  t.vector_registers = bytes >= 64 ? 32 : 16;
  return t;
}

Target target_of(const Flags& flags) {
  const Target& t = target_named(flags.target);
  return flags.vector_bits > 0 ? with_vector_bytes(t, flags.vector_bits / 8) : t;
}

Target current_target() { return target_of(*flags()); }

std::string Target::features() const {
  const std::array<std::pair<const char*, bool>, 14> all{{{"sse4.2", isa.sse42},
                                                          {"avx", isa.avx},
                                                          {"avx2", isa.avx2},
                                                          {"fma", isa.fma},
                                                          {"f16c", isa.f16c},
                                                          {"avx512f", isa.avx512f},
                                                          {"avx512bw", isa.avx512bw},
                                                          {"avx512dq", isa.avx512dq},
                                                          {"avx512vl", isa.avx512vl},
                                                          {"avx512bf16", isa.avx512bf16},
                                                          {"avx512vnni", isa.avx512vnni},
                                                          {"amx-tile", isa.amx_tile},
                                                          {"amx-bf16", isa.amx_bf16},
                                                          {"amx-int8", isa.amx_int8}}};
  std::string out;
  for (const auto& [feature, on] : all)
    out += fmt::format("{}{}{}", out.empty() ? "" : ",", on ? '+' : '-', feature);
  return out;
}

std::string Target::key() const {
  return fmt::format(
      "target={} {} vector={}x{} l1d={}/{}/{} l2={} l3={}/{} cores={} fma={}x{} streams={} page={}", name,
      features(), vector_registers, vector_bytes, l1d_bytes, l1d_ways, line_bytes, l2_bytes, l3_bytes,
      l3_complex_bytes, cores, fma_latency, fma_ports, prefetch_streams, page_bytes);
}

std::string Target::describe() const {
  return fmt::format(
      "target             {}\n"
      "features           {}\n"
      "vector_bytes       {}\n"
      "vector_registers   {}\n"
      "l1d_bytes          {}\n"
      "l1d_ways           {}\n"
      "line_bytes         {}\n"
      "l1d_sets           {}\n"
      "l2_bytes           {}\n"
      "l3_bytes           {}\n"
      "l3_complex_bytes   {}\n"
      "cores              {}\n"
      "fma_latency        {}\n"
      "fma_ports          {}\n"
      "prefetch_streams   {}\n"
      "wake_work          {}\n"
      "page_bytes         {}\n"
      "huge_page_bytes    {}\n"
      "fma_chains         {}\n"
      "tile               {} rows x {} vectors\n"
      "wide tile          {} rows x {} vectors\n"
      "accumulators       {}\n",
      name, features(), vector_bytes, vector_registers, l1d_bytes, l1d_ways, line_bytes, l1d_sets(), l2_bytes,
      l3_bytes, l3_complex_bytes, cores, fma_latency, fma_ports, prefetch_streams, wake_work, page_bytes,
      huge_page_bytes, fma_chains(), tile_max_rows(), tile_col_vectors(), tile_max_rows(),
      tile_wide_col_vectors(), accumulators());
}

}  // namespace loom
