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
  };
  CHECK(target_named("native") == host);
  if (host.isa.avx2 && host.isa.fma) {
    const Target& v3 = target_named("x86-64-v3");
    CHECK(v3.name == "x86-64-v3");
    CHECK((v3.isa.avx2 && v3.isa.fma && v3.isa.avx && v3.isa.sse42));
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
  const Target& v2 = target_named("x86-64-v2");
  CHECK(v2.isa.sse42);
  CHECK_FALSE(v2.isa.avx);
  CHECK_FALSE(v2.isa.fma);
  CHECK(v2.vector_bytes == 16);
  CHECK(v2.vector_registers == 16);
  same_caches(v2);
  if (host.isa.avx512f && host.isa.avx512bw && host.isa.avx512dq && host.isa.avx512vl) {
    const Target& v4 = target_named("x86-64-v4");
    CHECK((v4.isa.avx512f && v4.isa.avx512bw && v4.isa.avx512dq && v4.isa.avx512vl));
    CHECK_FALSE(v4.isa.avx512bf16);  // not part of the level, even where the host has it
    CHECK(v4.vector_bytes == 64);
    CHECK(v4.vector_registers == 32);
    same_caches(v4);
  } else {
    CHECK_THROWS_WITH_AS(target_named("x86-64-v4"), doctest::Contains("the host lacks"), Error);
  }
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
