// The Target: detected once from CPUID and sysconf, presets that restrict the ISA
// and keep the caches, and the flag that picks one.
#include "ir/target.hpp"

#include "ir/flags.hpp"

#include <loom/error.hpp>

#include <doctest/doctest.h>
#include <unistd.h>

using namespace loom;

TEST_CASE("Target: the host's caches and cores are sysconf's, what getconf prints") {
  const Target& t = host_target();
  CHECK(t.name == "native");
  auto positive = [](int name) { return sysconf(name) > 0 ? static_cast<int64_t>(sysconf(name)) : 0; };
  if (const int64_t v = positive(_SC_LEVEL1_DCACHE_SIZE)) CHECK(t.l1d_bytes == v);
  if (const int64_t v = positive(_SC_LEVEL1_DCACHE_ASSOC)) CHECK(t.l1d_ways == v);
  if (const int64_t v = positive(_SC_LEVEL1_DCACHE_LINESIZE)) CHECK(t.line_bytes == v);
  if (const int64_t v = positive(_SC_LEVEL2_CACHE_SIZE)) CHECK(t.l2_bytes == v);
  if (const int64_t v = positive(_SC_LEVEL3_CACHE_SIZE)) CHECK(t.l3_bytes == v);
  CHECK(t.cores == sysconf(_SC_NPROCESSORS_ONLN));
  // Whatever the source, a real machine's shape: sets a power of two, an L3 per complex
  // no larger than the package's.
  CHECK(t.l1d_bytes >= 16 << 10);
  CHECK(t.l1d_sets() * t.l1d_ways * t.line_bytes == t.l1d_bytes);
  CHECK((t.l1d_sets() & (t.l1d_sets() - 1)) == 0);
  CHECK(t.l2_bytes >= t.l1d_bytes);
  CHECK(t.l3_complex_bytes > 0);
  CHECK(t.l3_complex_bytes <= t.l3_bytes);
}

TEST_CASE("Target: CPUID's cache leaves agree with sysconf where both report") {
  const TargetCaches c = cpuid_caches(), s = sysconf_caches();
  if (c.l1d_bytes && s.l1d_bytes) CHECK(c.l1d_bytes == s.l1d_bytes);
  if (c.l1d_ways && s.l1d_ways) CHECK(c.l1d_ways == s.l1d_ways);
  if (c.line_bytes && s.line_bytes) CHECK(c.line_bytes == s.line_bytes);
  if (c.l2_bytes && s.l2_bytes) CHECK(c.l2_bytes == s.l2_bytes);
}

TEST_CASE("Target: the host's ISA is what the CPU and OS support, and sets the vectors") {
  const Target& t = host_target();
  CHECK(t.isa.sse42 == static_cast<bool>(__builtin_cpu_supports("sse4.2")));
  CHECK(t.isa.avx2 == static_cast<bool>(__builtin_cpu_supports("avx2")));
  CHECK(t.isa.fma == static_cast<bool>(__builtin_cpu_supports("fma")));
  CHECK(t.isa.avx512f == static_cast<bool>(__builtin_cpu_supports("avx512f")));
  CHECK(t.isa.avx512bw == static_cast<bool>(__builtin_cpu_supports("avx512bw")));
  CHECK(t.isa.avx512dq == static_cast<bool>(__builtin_cpu_supports("avx512dq")));
  CHECK(t.isa.avx512vl == static_cast<bool>(__builtin_cpu_supports("avx512vl")));
  CHECK(t.isa.avx512vnni == static_cast<bool>(__builtin_cpu_supports("avx512vnni")));
  CHECK(t.vector_bytes == (t.isa.avx512f ? 64 : t.isa.avx ? 32 : 16));
  CHECK(t.vector_registers == (t.isa.avx512f ? 32 : 16));
}

TEST_CASE("Target: a preset restricts the ISA, vectors and registers and keeps the caches") {
  const Target& host = host_target();
  auto same_caches = [&](const Target& t) {
    CHECK(t.l1d_bytes == host.l1d_bytes);
    CHECK(t.l1d_ways == host.l1d_ways);
    CHECK(t.line_bytes == host.line_bytes);
    CHECK(t.l2_bytes == host.l2_bytes);
    CHECK(t.l3_bytes == host.l3_bytes);
    CHECK(t.l3_complex_bytes == host.l3_complex_bytes);
    CHECK(t.cores == host.cores);
    CHECK(t.fma_latency == host.fma_latency);
    CHECK(t.fma_ports == host.fma_ports);
    CHECK(t.prefetch_streams == host.prefetch_streams);
    CHECK(t.wake_work == host.wake_work);
    CHECK(t.page_bytes == host.page_bytes);
    CHECK(t.huge_page_bytes == host.huge_page_bytes);
  };
  CHECK(target_named("native") == host);
  if (host.isa.avx2 && host.isa.fma) {
    const Target& v3 = target_named("x86-64-v3");
    CHECK(v3.name == "x86-64-v3");
    CHECK((v3.isa.avx2 && v3.isa.fma && v3.isa.avx && v3.isa.sse42 && v3.isa.f16c));
    CHECK_FALSE(v3.isa.avx512f);
    CHECK_FALSE(v3.isa.avx512bf16);
    CHECK_FALSE(v3.isa.amx_tile);
    CHECK(v3.vector_bytes == 32);
    CHECK(v3.vector_registers == 16);
    CHECK(v3.features().find("+avx2") != std::string::npos);
    CHECK(v3.features().find("-avx512f") != std::string::npos);
    CHECK(v3.key() != host.key());
    same_caches(v3);
  }
  if (host.isa.avx2 && host.isa.fma) {
    // The test machine: v3's instructions, caches of a few KiB, threads for any work.
    const Target& tiny = target_named("x86-64-v3-tiny");
    CHECK(tiny.isa == target_named("x86-64-v3").isa);
    CHECK(tiny.vector_bytes == 32);
    CHECK(tiny.l1d_sets() == 2);
    CHECK(tiny.l1d_ways == host.l1d_ways);
    CHECK(tiny.l2_bytes == 4 * tiny.l1d_bytes);
    CHECK(tiny.l3_bytes == 4 * tiny.l2_bytes);
    CHECK(tiny.cores == host.cores);
    CHECK(tiny.serial_work() < 100);
    CHECK(tiny.key() != target_named("x86-64-v3").key());
  }
  const Target& v2 = target_named("x86-64-v2");
  CHECK(v2.isa.sse42);
  CHECK_FALSE(v2.isa.avx);
  CHECK_FALSE(v2.isa.fma);
  CHECK_FALSE(v2.isa.f16c);  // F16C comes with x86-64-v3
  CHECK(v2.vector_bytes == 16);
  CHECK(v2.vector_registers == 16);
  same_caches(v2);
  // A preset is described on every host (kernels are planned and compiled for it anywhere);
  // only running its kernels, and so LOOM_TARGET, needs the host to have its instructions.
  const Target& v4 = target_named("x86-64-v4");
  CHECK((v4.isa.avx512f && v4.isa.avx512bw && v4.isa.avx512dq && v4.isa.avx512vl));
  CHECK_FALSE(v4.isa.avx512bf16);  // not part of the level, even where the host has it
  CHECK(v4.vector_bytes == 64);
  CHECK(v4.vector_registers == 32);
  same_caches(v4);
  if (host.isa.avx512f && host.isa.avx512bw && host.isa.avx512dq && host.isa.avx512vl) {
    CHECK(host_lacks(v4).empty());
    CHECK(&runnable_target_named("x86-64-v4") == &v4);
  } else {
    CHECK_FALSE(host_lacks(v4).empty());
    CHECK_THROWS_WITH_AS(runnable_target_named("x86-64-v4"), doctest::Contains("the host lacks"), Error);
    CHECK_THROWS_WITH_AS(detail::push_flag_overrides({{"LOOM_TARGET", "x86-64-v4"}}),
                         doctest::Contains("the host lacks"), Error);
  }
  CHECK(host_lacks(host).empty());
  CHECK_THROWS_WITH_AS(target_named("x86-64-v9"), doctest::Contains("x86-64-v3"), Error);
}

TEST_CASE("Target: LOOM_TARGET picks the preset, LOOM_VECTOR_WIDTH the planned width on top") {
  const Target before = current_target();
  {
    const uint64_t v2 = detail::push_flag_overrides({{"LOOM_TARGET", "x86-64-v2"}});
    CHECK(current_target() == target_named("x86-64-v2"));
    const uint64_t wide = detail::push_flag_overrides({{"LOOM_VECTOR_WIDTH", "512"}});
    const Target planned = current_target();
    CHECK(planned.vector_bytes == 64);
    CHECK(planned.vector_registers == 32);
    CHECK(planned.isa == target_named("x86-64-v2").isa);  // the ISA stays the level's
    detail::pop_flag_overrides(wide);
    detail::pop_flag_overrides(v2);
  }
  CHECK(current_target() == before);
  CHECK_THROWS_AS(detail::push_flag_overrides({{"LOOM_TARGET", "pentium"}}), Error);
  CHECK(with_vector_bytes(host_target(), 32).vector_registers == 16);
}

TEST_CASE("Target: the host's page is sysconf's, the FMA latency CPUID's family and model") {
  const Target& t = host_target();
  CHECK(t.page_bytes == sysconf(_SC_PAGESIZE));
  CHECK(t.huge_page_bytes >= t.page_bytes);
  CHECK((t.fma_latency == 4 || t.fma_latency == 5));
  CHECK(fma_latency_of(true, 0x17, 0x31) == 5);  // Zen 2 (EPYC Rome)
  CHECK(fma_latency_of(true, 0x17, 0x01) == 5);  // Zen 1
  CHECK(fma_latency_of(true, 0x19, 0x01) == 4);  // Zen 3
  CHECK(fma_latency_of(true, 0x1a, 0x02) == 4);  // Zen 5
  CHECK(fma_latency_of(false, 6, 0x3c) == 5);    // Haswell
  CHECK(fma_latency_of(false, 6, 0x4f) == 5);    // Broadwell-EP
  CHECK(fma_latency_of(false, 6, 0x55) == 4);    // Skylake-SP
  CHECK(fma_latency_of(false, 6, 0x8f) == 4);    // Sapphire Rapids
}

namespace {
// A hand-written AVX2 machine: 16 registers of 32 bytes, 32 KiB 8-way L1d, 4 cores.
Target avx2_target(int fma_latency) {
  Target t;
  t.name = "test-avx2";
  t.isa.sse42 = t.isa.avx = t.isa.avx2 = t.isa.fma = true;
  t.vector_bytes = 32;
  t.vector_registers = 16;
  t.l1d_bytes = 32 << 10;
  t.l1d_ways = 8;
  t.line_bytes = 64;
  t.l2_bytes = 256 << 10;
  t.l3_bytes = t.l3_complex_bytes = 8 << 20;
  t.cores = 4;
  t.fma_latency = fma_latency;
  t.fma_ports = 2;
  t.prefetch_streams = 8;
  t.wake_work = 1 << 17;
  t.page_bytes = 4096;
  return t;
}
}  // namespace

TEST_CASE("Target: derived constants of hand-written Targets, by their formulas") {
  // Zen 2 or Haswell: latency 5, 2 pipes, 16 registers.
  const Target zen2 = avx2_target(5);
  CHECK(zen2.fma_chains() == 10);        // 5 x 2
  CHECK(zen2.tile_col_vectors() == 2);   // the pipes
  CHECK(zen2.tile_max_rows() == 6);      // min(3 x 10 / 4 = 7, (16 - 1 - 2) / 2 = 6): the registers bind
  CHECK(zen2.accumulators() == 4);       // bit_floor(5)
  CHECK(zen2.min_blocks() == 4);         // the cores
  CHECK(zen2.buffer_alignment() == 64);  // the line, above a 32-byte vector
  // Skylake with AVX2: latency 4.
  const Target skl = avx2_target(4);
  CHECK(skl.fma_chains() == 8);
  CHECK(skl.tile_max_rows() == 6);  // min(3 x 8 / 4 = 6, 6)
  CHECK(skl.accumulators() == 4);
  // AVX-512 (32 registers of 64 bytes), latency 4: the chains bind, not the registers.
  Target zmm = with_vector_bytes(skl, 64);
  CHECK(zmm.vector_registers == 32);
  CHECK(zmm.tile_max_rows() == 6);  // min(6, (32 - 1 - 2) / 2 = 14)
  CHECK(zmm.buffer_alignment() == 64);
  // Latency 5 with 32 registers: 3 x 10 / 4 = 7 rows.
  zmm.fma_latency = 5;
  CHECK(zmm.tile_max_rows() == 7);
  // One FMA pipe, latency 4: chains 4, one b vector a step, min(3 x 4 / 2, 14) = 6 rows.
  Target one_pipe = with_vector_bytes(skl, 64);
  one_pipe.fma_ports = 1;
  CHECK(one_pipe.fma_chains() == 4);
  CHECK(one_pipe.tile_col_vectors() == 1);
  CHECK(one_pipe.tile_max_rows() == 6);
  // A 3-cycle FMA: accumulators 2, the largest power of two within the latency.
  Target fast = skl;
  fast.fma_latency = 3;
  CHECK(fast.accumulators() == 2);
  // GEMV: the prefetch streams, 8 blocks of them per part, two pages of float32 or float64.
  CHECK(skl.gemv_rows() == 8);
  CHECK(skl.gemv_part_rows() == 64);
  CHECK(skl.gemv_chunk(4) == 2048);
  CHECK(skl.gemv_chunk(8) == 1024);
  Target big_pages = skl;
  big_pages.page_bytes = 16384;  // a 16 KiB page
  big_pages.prefetch_streams = 16;
  CHECK(big_pages.gemv_chunk(4) == 8192);
  CHECK(big_pages.gemv_rows() == 16);
  CHECK(big_pages.gemv_part_rows() == 128);
  // The executor's thresholds: the wake-up's work, a quarter of it per slice.
  CHECK(skl.serial_work() == 131072);
  CHECK(skl.slice_work() == 32768);
  Target one_core = skl;
  one_core.cores = 1;
  CHECK(one_core.min_blocks() == 1);
  // A 128-byte line (POWER-like) aligns buffers to it.
  Target wide_line = skl;
  wide_line.line_bytes = 128;
  CHECK(wide_line.buffer_alignment() == 128);
}

TEST_CASE("Target: describe() and key() show the new fields") {
  const Target t = avx2_target(5);
  const std::string d = t.describe();
  CHECK(d.find("fma_latency        5\n") != std::string::npos);
  CHECK(d.find("page_bytes         4096\n") != std::string::npos);
  CHECK(d.find("fma_chains         10\n") != std::string::npos);
  CHECK(d.find("tile               6 rows x 2 vectors\n") != std::string::npos);
  CHECK(d.find("wide tile          6 rows x 2 vectors\n") != std::string::npos);  // 16 registers
  // 32 registers: 6 rows x 4 vectors, 24 accumulators + 4 b vectors + 1 broadcast.
  CHECK(target_named("x86-64-v4").describe().find("wide tile          6 rows x 4 vectors\n") !=
        std::string::npos);
  // The fields that change code are in the key; a runtime threshold is not.
  CHECK(avx2_target(4).key() != t.key());
  Target paged = t;
  paged.page_bytes = 16384;
  CHECK(paged.key() != t.key());
  Target woken = t;
  woken.wake_work = 1 << 16;
  CHECK(woken.key() == t.key());
}
