// What loom frees (docs/design.md §7, "What memory is held"): UOps that only a
// cache held die when loom::empty_cache drops the caches, the kernel cache
// counts what its kernels really hold, and LOOM_JIT_CACHE_BYTES bounds that.
#include "check.hpp"

#include "runtime/jit.hpp"
#include "runtime/kernel_cache.hpp"
#include "src/schedule_cache.hpp"
#include "support/memory_use.hpp"

#include <loom/context.hpp>
#include <loom/memory.hpp>

#include <algorithm>

using namespace loom;

namespace {
// A small graph whose kernel depends on its shape (rows x cols): each row's
// sum of x * x + 1, from a buffer of halves (so nothing folds to a constant):
// cols * 1.25 in every row.
void realize_row_sums(int64_t rows, int64_t cols) {
  const Tensor x = Tensor::from_vector(std::vector<float>(rows * cols, 0.5f), {rows, cols});
  const std::vector<float> out = (x * x + 1).sum(1).to_vector<float>();
  CHECK(out.size() == static_cast<size_t>(rows));
  CHECK(out.front() == doctest::Approx(1.25 * static_cast<double>(cols)));
  CHECK(out.back() == doctest::Approx(1.25 * static_cast<double>(cols)));
}

constexpr size_t kMiB = size_t{1} << 20;
}  // namespace

TEST_CASE(
    "400 distinct graphs realized and dropped: empty_cache frees their UOps and gives the memory back") {
  const Context ctx{{"CACHE_DIR", "off"}};
  // The first graphs of this form set up what every later one shares (LLVM's
  // target machines and pass registries, the pages of its code that run).
  for (int64_t i = 1; i <= 4; ++i) realize_row_sums(i, 1000 + i);
  empty_cache();
  const Counters start = counters();
  const size_t resident = test::resident_bytes();

  for (int64_t i = 0; i < 400; ++i) realize_row_sums(i % 20 + 1, i / 20 + 2);
  const Counters full = counters();
  CHECK(full.live_uops > start.live_uops + 2000);  // the caches hold their plans' and kernels' nodes
  CHECK(full.kernel_cache_entries >= 400);

  empty_cache();
  const Counters after = counters();
  MESSAGE("live UOps ", start.live_uops, " -> ", full.live_uops, " -> ", after.live_uops, "; resident MiB ",
          resident / kMiB, " -> ", test::resident_bytes() / kMiB, "; kernel_cache_bytes per kernel ",
          full.kernel_cache_bytes / full.kernel_cache_entries);
  CHECK(after.live_uops <= start.live_uops + start.live_uops / 20);
  CHECK(after.kernel_cache_entries == 0);
  CHECK(after.kernel_cache_bytes == 0);
  CHECK(after.jit_code_bytes <= start.jit_code_bytes);
  CHECK(detail::schedule_cache().size() == 0);
  // ASan keeps freed blocks in quarantine and maps shadow memory: RSS does not
  // come back there, so only the node count is checked under it.
  if (!test::address_sanitizer()) CHECK(test::resident_bytes() <= resident + 20 * kMiB);
}

TEST_CASE("kernel_cache_bytes counts what the cached kernels hold, and LOOM_JIT_CACHE_BYTES bounds it") {
  if (test::address_sanitizer()) return;  // mallinfo2 does not see ASan's allocator
  const Context ctx{{"CACHE_DIR", "off"}};
  for (int64_t i = 1; i <= 4; ++i) realize_row_sums(i, 2000 + i);
  empty_cache();
  // What the process holds for the kernels alone, the plans dropped: malloc's
  // blocks in use and the JIT's code pages.
  auto held = [] {
    detail::schedule_cache().clear();
    trim_intern_table();
    Jit::release_unused();
    return test::heap_bytes() + Jit::live_code_bytes_if_any();
  };
  const size_t before = held();
  for (int64_t i = 0; i < 100; ++i) realize_row_sums(i % 10 + 1, i / 10 + 3000);
  const size_t measured = held() - before;
  const Counters c = counters();
  MESSAGE(c.kernel_cache_entries, " kernels: kernel_cache_bytes ", c.kernel_cache_bytes, ", measured ",
          measured, " (", measured / c.kernel_cache_entries, " per kernel, ",
          c.jit_code_bytes / c.kernel_cache_entries, " of them code pages)");
  // The measure also holds what compiling leaves behind outside any entry
  // (about 3 KB a kernel, not yet explained: docs/performance.md, "Memory").
  CHECK(c.kernel_cache_bytes >= measured / 100 * 85);
  CHECK(c.kernel_cache_bytes <= 2 * measured);  // a measure, not a guess far above it

  const size_t limit = 30 * (c.kernel_cache_bytes / c.kernel_cache_entries);
  empty_cache();
  const Context bounded{{"JIT_CACHE_BYTES", std::to_string(limit)}};
  const size_t bounded_before = held();
  size_t most = 0;
  for (int64_t i = 0; i < 100; ++i) {
    realize_row_sums(i % 10 + 1, i / 10 + 4000);
    most = std::max<size_t>(most, counters().kernel_cache_bytes);
  }
  CHECK(most <= limit);
  CHECK(counters().kernel_cache_entries < 40);
  // Evicted kernels' memory really is freed: what stays is the limit and the
  // residue of compiling 100 kernels (as above), far below what 100 cached
  // kernels hold.
  CHECK(held() - bounded_before <= limit + measured / 4);
  empty_cache();
}
