#include "runtime/kernel_cache.hpp"

#include "ir/kernel_name.hpp"
#include "runtime/jit.hpp"

#include "support/kernel_builders.hpp"

#include <doctest/doctest.h>

#include <thread>
#include <vector>

using namespace loom;
using namespace loom::kb;

namespace {
// out[i] = c for i < n: kernels that differ only in a constant.
UOpPtr fill_kernel(double c, int64_t n = 16) {
  auto r = make_range(n, 0);
  return sink({end(store(index(global(0, DType::Float32), r), const_float(DType::Float32, c)), {r})});
}

// Stand-ins for compiled code: the cache stores whatever function it is given.
void fn_a(void* const*, const int64_t*, int64_t, int64_t) {}
void fn_b(void* const*, const int64_t*, int64_t, int64_t) {}

CompiledKernel entry(const UOpPtr& ast, KernelFn fn) {
  CompiledKernel k;
  k.name = kernel_name(ast);
  k.fn = fn;
  k.ast = ast;
  k.source = "; ir of " + k.name;
  return k;
}
}  // namespace

TEST_CASE("a kernel rebuilt with the same structure hits; a different one misses") {
  KernelCache cache;
  const auto stored = cache.insert(entry(fill_kernel(1.0), fn_a));
  CHECK(cache.size() == 1);
  const auto hit = cache.find(fill_kernel(1.0));
  REQUIRE(hit != nullptr);
  CHECK(hit == stored);
  CHECK((hit->fn == &fn_a));
  CHECK(hit->source == "; ir of " + kernel_name(fill_kernel(1.0)));
  CHECK(cache.find(fill_kernel(2.0)) == nullptr);
  CHECK(cache.find(fill_kernel(1.0, 17)) == nullptr);
}

TEST_CASE("the cache holds its AST alive, so a freed address cannot alias another kernel") {
  KernelCache cache;
  std::weak_ptr<const UOp> watched;
  {
    UOpPtr ast = fill_kernel(3.0);
    watched = ast;
    cache.insert(entry(ast, fn_a));
  }  // the cache's entry is now the only owner of the AST
  CHECK_FALSE(watched.expired());
  // Build many other kernels: had the AST died, one could reuse its address.
  for (int k = 0; k < 200; ++k) {
    const UOpPtr other = fill_kernel(100.0 + k);
    CHECK(cache.find(other) == nullptr);
  }
  auto again = cache.find(fill_kernel(3.0));
  REQUIRE(again != nullptr);
  CHECK(again->ast == watched.lock());
  again.reset();
  cache.clear();
  CHECK(cache.size() == 0);
  CHECK(watched.expired());  // clear releases the AST
}

TEST_CASE("a second insert of the same kernel keeps the first entry") {
  KernelCache cache;
  const auto first = cache.insert(entry(fill_kernel(4.0), fn_a));
  const auto second = cache.insert(entry(fill_kernel(4.0), fn_b));
  CHECK(second == first);
  CHECK((second->fn == &fn_a));
  CHECK(cache.size() == 1);
}

TEST_CASE("inserting without an AST or a function is a loom::Error") {
  KernelCache cache;
  CompiledKernel no_ast;
  no_ast.name = "E_x";
  no_ast.fn = fn_a;
  CHECK_THROWS_WITH_AS(cache.insert(no_ast), doctest::Contains("E_x"), Error);
  CHECK_THROWS_AS(cache.insert(entry(fill_kernel(5.0), nullptr)), Error);
  CHECK(cache.size() == 0);
}

TEST_CASE("threads finding and inserting one kernel at once all get the same entry") {
  KernelCache cache;
  std::vector<std::shared_ptr<const CompiledKernel>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &cache, &got] {
      for (int round = 0; round < 100; ++round) {
        const UOpPtr ast = fill_kernel(round % 10);
        auto found = cache.find(ast);
        if (!found) found = cache.insert(entry(ast, t % 2 ? fn_a : fn_b));
        if (round == 99) got[t] = found;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(cache.size() == 10);
  for (int t = 1; t < 4; ++t) CHECK(got[t] == got[0]);
}

TEST_CASE("the process-wide cache is one object") { CHECK(&kernel_cache() == &kernel_cache()); }

// ---- the byte limit --------------------------------------------------------------
namespace {
// out[i] = 7 for i in [begin, end), i64 slot 0: a real function to load many copies of.
const std::string& seven_object() {
  static const std::string object = Jit::instance()
                                        .compile_object(R"(
define void @seven(ptr %bufs, ptr %vars, i64 %begin, i64 %end) nounwind {
entry:
  %out = load ptr, ptr %bufs
  br label %head
head:
  %i = phi i64 [ %begin, %entry ], [ %next, %body ]
  %more = icmp slt i64 %i, %end
  br i1 %more, label %body, label %exit
body:
  %p = getelementptr i64, ptr %out, i64 %i
  store i64 7, ptr %p
  %next = add nsw i64 %i, 1
  br label %head
exit:
  ret void
}
)",
                                                        "seven")
                                        .bytes;
  return object;
}

// A cache entry for `ast` owning a fresh copy of that code in the JIT.
CompiledKernel owned_entry(const UOpPtr& ast) {
  CompiledKernel k = entry(ast, nullptr);
  k.code = Jit::instance().load(seven_object(), "seven");
  k.fn = k.code->fn();
  return k;
}
}  // namespace

TEST_CASE("over 1,000 distinct kernels, the live JIT code stays under a small limit; evicted code is freed") {
  KernelCache cache;
  const size_t each = footprint_bytes(owned_entry(fill_kernel(-1)));  // freed again at once
  const size_t limit = 10 * each, before = Jit::instance().live_code_bytes();
  cache.set_limit(limit);
  size_t most = 0;
  for (int i = 0; i < 1000; ++i) {
    cache.insert(owned_entry(fill_kernel(i)));
    most = std::max(most, Jit::instance().live_code_bytes() - before);
    CHECK(cache.bytes() <= limit);
  }
  CHECK(most <= limit);  // the JIT's own count of loaded code: entries' code really is freed
  CHECK(cache.size() <= 10);
  CHECK(cache.size() >= 8);  // evicts down to 7/8 of the limit, not further
  CHECK(cache.find(fill_kernel(999)));
  CHECK_FALSE(cache.find(fill_kernel(0)));
  cache.clear();
  CHECK(Jit::instance().live_code_bytes() == before);
}

TEST_CASE("eviction takes the least recently used kernel, counting finds as uses") {
  KernelCache cache;
  cache.set_limit(4 * footprint_bytes(owned_entry(fill_kernel(-1))));
  for (int i = 0; i < 4; ++i) cache.insert(owned_entry(fill_kernel(i)));
  CHECK(cache.find(fill_kernel(0)));  // 0 is now the most recent; 1 the least
  cache.insert(owned_entry(fill_kernel(4)));
  CHECK_FALSE(cache.find(fill_kernel(1)));
  CHECK(cache.find(fill_kernel(0)));
  CHECK(cache.find(fill_kernel(4)));
}

TEST_CASE(
    "a kernel held elsewhere outlives its eviction and still runs; one larger than the limit stays alone") {
  KernelCache cache;
  const auto held = cache.insert(owned_entry(fill_kernel(1)));
  cache.set_limit(0);  // evicts everything but nothing inserted since
  CHECK(cache.size() == 0);
  int64_t out[4] = {0, 0, 0, 0};
  void* bufs[] = {out};
  held->fn(bufs, nullptr, 0, 4);
  CHECK(out[3] == 7);
  cache.insert(owned_entry(fill_kernel(2)));  // alone above the limit: kept
  CHECK(cache.size() == 1);
  CHECK(cache.bytes() > cache.limit());
}
