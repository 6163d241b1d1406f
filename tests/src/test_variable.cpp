// loom::Variable and symbolic sizes in the front end (include/loom/variable.hpp,
// include/loom/dim.hpp): binding, shape inference and printing over a bound
// variable, decisions over its bounds, and the errors that name it.
#include <loom/loom.hpp>

#include "ir/dim_expr.hpp"
#include "tests/support/error_message.hpp"

#include <loom/debug.hpp>
#include <loom/memory.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <sstream>

using namespace loom;
using loom::test::check_message;
using loom::test::error_of;

TEST_CASE("Variable: bind gives a size that prints as name=value, within the bounds only") {
  const Variable t("T", 1, 4096);
  CHECK(t.name() == "T");
  CHECK(t.min() == 1);
  CHECK(t.max() == 4096);
  const Dim d = t.bind(17);
  CHECK(d.is_symbolic());
  CHECK(d.value() == 17);
  CHECK(d.min() == 1);
  CHECK(d.max() == 4096);
  CHECK(d.str() == "T=17");
  // fmt prints sizes with only <loom/loom.hpp> included, as it printed numeric ones.
  CHECK(fmt::format("{} {}", d, Dim(64)) == "T=17 64");
  CHECK(fmt::format("{}", Shape{4, d, 64}) == "[4, T=17, 64]");
  std::ostringstream os;
  os << Shape{4, d, 64};
  CHECK(os.str() == "[4, T=17, 64]");
  CHECK(t.bind(1).value() == 1);
  CHECK(t.bind(4096).value() == 4096);
  check_message(error_of([&] { t.bind(0); }), {"'T'", "0", "[1, 4096]"});
  check_message(error_of([&] { t.bind(4097); }), {"'T'", "4097"});
  check_message(error_of([] { Variable("", 1, 2); }), {"name"});
  check_message(error_of([] { Variable("N", 5, 2); }), {"'N'", "[5, 2]"});
}

TEST_CASE("Dim: arithmetic simplifies, equal sizes are equal, comparisons are decided over the bounds") {
  const Variable t("T", 1, 100);
  const Dim d = t.bind(7);
  CHECK((d * 64 / 64) == d);
  CHECK((d + 1 - 1) == d);
  CHECK((d * 2 + 1).value() == 15);
  CHECK((d * 2 + 1).str() == "T*2+1=15");
  CHECK(d * 2 == d + d);
  CHECK((d % 1) == 0);
  CHECK(d != t.bind(8));  // the binding is part of the size
  CHECK(d != 7);          // a symbolic size is not a number, whatever its value
  CHECK(d > 0);
  CHECK(d <= 100);
  CHECK(d < 101);
  check_message(error_of([&] { (void)(d < 50); }), {"T=7", "50", "T"});
  check_message(error_of([&] { (void)static_cast<int64_t>(d); }), {"T=7", "symbolic", "T"});
  check_message(error_of([&] { concrete(Shape{2, d}, "to_vector"); }), {"to_vector", "T=7"});
  const Shape numbers{2, 3};
  const std::vector<int64_t> as_ints = numbers;  // numeric shapes convert both ways
  CHECK(as_ints == std::vector<int64_t>{2, 3});
  CHECK(numbers == std::vector<int64_t>{2, 3});
}

TEST_CASE("Dim: combined sizes are kept (the same node again), and empty_cache frees what the cache holds") {
  const Variable t("T_cache", 1, 999);
  const uint64_t before = counters().live_uops;
  {
    const Dim n = t.bind(17);
    const Dim a = n * 3 + 5, b = n * 3 + 5;
    CHECK(a.expr() == b.expr());  // one node: the second product came from the cache
    CHECK(a.value() == 56);
    CHECK((a / 3).str() == "T_cache+1=18");  // a cached sum still simplifies as a fresh one
  }
  CHECK(counters().live_uops > before);  // the cache holds the sizes it combined
  empty_cache();
  CHECK(counters().live_uops <= before);
}

TEST_CASE("Dim: a size combined at a new binding is the cached one with that binding, never another's") {
  const Variable t("T_rebind", 1, 999);
  for (const int64_t v : {17, 18, 999, 1, 18}) {
    CAPTURE(v);
    const Dim n = t.bind(v);
    const Dim a = (n * 3 + 5) / 3;  // simplified to n + 1 once, then rebound to each value
    CHECK(a.value() == v + 1);
    CHECK(a.str() == fmt::format("T_rebind+1={}", v + 1));
    CHECK(a == n + 1);
    CHECK((n - n) == 0);
  }
  // One variable bound to two values in one expression: combined as written, uncached.
  const Dim mixed = t.bind(3) + t.bind(4);
  CHECK(mixed.value() == 7);
}

TEST_CASE("symbolic sizes flow through shape inference: slice, reshape, expand, elementwise, reduce") {
  const Variable t("T", 1, 256);
  const Dim n = t.bind(17);
  const Tensor cache = Tensor::zeros({4, 256, 8});
  const Tensor x = cache.slice(1, 0, n);
  CHECK(x.shape() == Shape{4, n, 8});
  CHECK(fmt::format("{}", x.shape()) == "[4, T=17, 8]");
  const Tensor flat = x.reshape({4, -1});
  CHECK(flat.shape() == Shape{4, n * 8});
  CHECK(flat.reshape({4, n, 8}).shape() == x.shape());
  const Tensor y = (x * 2 + 1).sum(1);
  CHECK(y.shape() == Shape{4, 8});
  const Tensor m = x.mean(2, true);
  CHECK(m.shape() == Shape{4, n, 1});
  CHECK((x + m).shape() == Shape{4, n, 8});
  CHECK(Tensor::zeros({1, 1, 8}).expand({4, n, 8}).shape() == Shape{4, n, 8});
  // A slice bound past the size for some value of the variable is an error naming it.
  const Variable big("B", 1, 1000);
  check_message(error_of([&] { cache.slice(1, 0, big.bind(3)); }), {"B=3"});
  // Two bindings of one variable do not broadcast.
  check_message(error_of([&] { (void)(x + cache.slice(1, 0, t.bind(18))); }), {"T=17", "T=18"});
}

// Realizing is tests/src/test_symbolic_realize.cpp's.
TEST_CASE("a concrete count of a symbolic size is refused by name, not computed for one value") {
  const Variable t("T", 1, 64);
  const Tensor x = Tensor::ones({64, 2}).slice(0, 0, t.bind(5));
  check_message(error_of([&] { (void)x.numel(); }), {"T*2=10", "symbolic"});
}
