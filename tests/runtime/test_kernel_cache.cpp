#include "runtime/kernel_cache.hpp"

#include "ir/kernel_name.hpp"

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
  k.llvm_ir = "; ir of " + k.name;
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
  CHECK(hit->llvm_ir == "; ir of " + kernel_name(fill_kernel(1.0)));
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
