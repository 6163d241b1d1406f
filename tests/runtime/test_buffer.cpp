#include "runtime/buffer.hpp"

#include <loom/error.hpp>
#include <loom/memory.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace loom;

namespace {
bool all_zero(const Buffer& b) {
  const auto* p = static_cast<const unsigned char*>(b.data());
  for (size_t i = 0; i < b.bytes(); ++i)
    if (p[i] != 0) return false;
  return true;
}
uintptr_t address(const Buffer& b) { return reinterpret_cast<uintptr_t>(b.data()); }

// The kernel's "THPeligible" for the mapping holding `addr` (from /proc/self/smaps), or -1.
int thp_eligible(uintptr_t addr) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> lo >> dash >> hi && dash == '-') inside = lo <= addr && addr < hi;
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
  }
  return -1;
}

bool thp_available() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(f, modes);
  return !modes.empty() && modes.find("[never]") == std::string::npos;
}
}  // namespace

TEST_CASE("buffers are 64-byte aligned and zeroed, whatever their size") {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{3}, size_t{64}, size_t{65}, size_t{1000}, size_t{4096},
                       size_t{100003}}) {
    CAPTURE(bytes);
    auto b = Buffer::allocate(bytes);
    REQUIRE(b->data() != nullptr);
    CHECK(address(*b) % 64 == 0);
    CHECK(b->bytes() == bytes);
    CHECK(all_zero(*b));
  }
}

TEST_CASE("size classes: multiples of 64, four per power of two") {
  CHECK(buffer_size_class(0) == 64);
  CHECK(buffer_size_class(1) == 64);
  CHECK(buffer_size_class(64) == 64);
  CHECK(buffer_size_class(65) == 128);
  CHECK(buffer_size_class(1000) == 1024);
  CHECK(buffer_size_class(1024) == 1024);
  CHECK(buffer_size_class(1025) == 1280);
  CHECK(buffer_size_class(1537) == 1792);
  CHECK(buffer_size_class(2049) == 2560);
  CHECK(buffer_size_class(1 << 20) == 1 << 20);
  for (size_t bytes = 1; bytes < 100000; bytes += 37) {
    const size_t c = buffer_size_class(bytes);
    CHECK(c % 64 == 0);
    CHECK(c >= bytes);
    CHECK(c < bytes + bytes / 3 + 64);
  }
}

TEST_CASE("a released block is reused by the next request of its class, zeroed again") {
  auto first = Buffer::allocate(1000);
  const uintptr_t where = address(*first);
  std::memset(first->data(), 0xab, first->bytes());
  first.reset();
  auto other_class = Buffer::allocate(5000);  // a different class cannot take the cached block
  CHECK(address(*other_class) != where);
  auto again = Buffer::allocate(1020);  // 1000 and 1020 share the 1024 class
  CHECK(address(*again) == where);
  CHECK(again->bytes() == 1020);
  CHECK(all_zero(*again));
}

TEST_CASE("live bytes count buffers until their last reference dies") {
  const size_t start = live_buffer_bytes();
  auto a = Buffer::allocate(100);
  auto b = Buffer::allocate(0);
  auto c = Buffer::allocate(4096);
  CHECK(live_buffer_bytes() == start + 4196);
  std::shared_ptr<Buffer> a2 = a;
  a.reset();
  CHECK(live_buffer_bytes() == start + 4196);  // a2 still holds it
  a2.reset();
  b.reset();
  c.reset();
  CHECK(live_buffer_bytes() == start);
}

TEST_CASE("the pool keeps freed blocks until trimmed") {
  trim_buffer_pool();
  CHECK(pooled_buffer_bytes() == 0);
  Buffer::allocate(3000).reset();  // class 3072
  CHECK(pooled_buffer_bytes() == 3072);
  trim_buffer_pool();
  CHECK(pooled_buffer_bytes() == 0);
}

// The pool's bound for one test case, the default's again after it.
struct PoolLimit {
  explicit PoolLimit(size_t bytes) { set_buffer_pool_limit(bytes); }
  ~PoolLimit() { set_buffer_pool_limit(default_buffer_pool_limit()); }
};

TEST_CASE("a pool full of large blocks makes room for a small one freed after them") {
  // A program's large steps, then small ones: the small steps' blocks must be reused,
  // not mapped afresh every step beside a pool still full of the large steps' blocks.
  empty_cache();
  const PoolLimit limit(size_t{256} << 20);
  const size_t large = size_t{64} << 20, small_class = buffer_size_class(3000);
  std::vector<std::shared_ptr<Buffer>> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(Buffer::allocate(large, Buffer::Fill::Uninitialized));
  blocks.clear();
  const size_t full = pooled_buffer_bytes();
  REQUIRE(full >= large);
  REQUIRE(full < 8 * large);  // the pool's bound held back some of them
  Buffer::allocate(3000).reset();
  CHECK(pooled_buffer_bytes() == full - large + small_class);  // one large block left for it
  auto again = Buffer::allocate(3000);
  CHECK(pooled_buffer_bytes() == full - large);  // and the small block was taken back
  again.reset();
  empty_cache();
  CHECK(pooled_buffer_bytes() == 0);
}

TEST_CASE("the pool's bound: an eighth of physical memory by default; a larger block is not kept") {
  CHECK(default_buffer_pool_limit() == std::max(size_t{256} << 20, physical_memory_bytes() / 8));
  CHECK(buffer_pool_limit() == default_buffer_pool_limit());
  empty_cache();
  const PoolLimit limit(size_t{8} << 20);
  const size_t block = size_t{4} << 20;
  Buffer::allocate(size_t{9} << 20, Buffer::Fill::Uninitialized).reset();  // beyond the bound
  CHECK(pooled_buffer_bytes() == 0);
  auto a = Buffer::allocate(block, Buffer::Fill::Uninitialized), b = Buffer::allocate(block / 2);
  a.reset();
  b.reset();
  CHECK(pooled_buffer_bytes() == block + block / 2);
  set_buffer_pool_limit(block);  // lowering it gives back the least recently freed: a's
  CHECK(pooled_buffer_bytes() == block / 2);
  empty_cache();
}

TEST_CASE("a step's largest buffers are reused from the pool, freed and asked for again") {
  // Attention's [B, H, T, T] scores at T = 2048 are 512 MiB: mapped and zeroed by the
  // system every step, that was half the step's time (docs/performance.md).
  empty_cache();
  const PoolLimit limit(size_t{96} << 20);
  const size_t bytes = size_t{64} << 20;
  auto first = Buffer::allocate(bytes, Buffer::Fill::Uninitialized);
  const uintptr_t at = address(*first);
  first.reset();
  CHECK(pooled_buffer_bytes() == buffer_size_class(bytes));
  auto again = Buffer::allocate(bytes, Buffer::Fill::Uninitialized);
  CHECK(address(*again) == at);
  again.reset();
  empty_cache();
}

TEST_CASE("buffers of 2 MiB or more are 2 MiB-aligned on transparent huge pages, zeroed, and pooled") {
  empty_cache();
  for (size_t bytes : {size_t{2} << 20, (size_t{5} << 20) + 3, size_t{64} << 20}) {
    CAPTURE(bytes);
    auto b = Buffer::allocate(bytes);
    CHECK(address(*b) % (size_t{2} << 20) == 0);
    CHECK(all_zero(*b));
    if (thp_available()) CHECK(thp_eligible(address(*b)) == 1);
    std::memset(b->data(), 0xab, b->bytes());
    b.reset();
    CHECK(pooled_buffer_bytes() == buffer_size_class(bytes));
    auto again = Buffer::allocate(bytes);  // the pooled block, zeroed again
    CHECK(all_zero(*again));
    again.reset();
    empty_cache();  // loom::empty_cache releases the pool
    CHECK(pooled_buffer_bytes() == 0);
  }
  auto small = Buffer::allocate(100000);
  CHECK(address(*small) % 64 == 0);
}

TEST_CASE("an impossible request is a loom::Error") {
  CHECK_THROWS_WITH_AS(Buffer::allocate(size_t{1} << 60), doctest::Contains("Buffer::allocate"), Error);
}

TEST_CASE("threads allocating and releasing at once never share a live block") {
  const size_t start = live_buffer_bytes();
  constexpr int kThreads = 4, kRounds = 300;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &failures] {
      std::vector<std::shared_ptr<Buffer>> held;
      for (int round = 0; round < kRounds; ++round) {
        auto b = Buffer::allocate(static_cast<size_t>(64 + (round % 7) * 300));
        if (address(*b) % 64 != 0 || !all_zero(*b)) ++failures[t];
        std::memset(b->data(), t + 1, b->bytes());
        held.push_back(std::move(b));
        if (held.size() > 5) held.erase(held.begin());
        for (const auto& h : held) {  // another thread writing our block would show here
          const auto* p = static_cast<const unsigned char*>(h->data());
          if (p[0] != t + 1 || p[h->bytes() - 1] != t + 1) ++failures[t];
        }
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failures == std::vector<int>(kThreads, 0));
  CHECK(live_buffer_bytes() == start);
}
