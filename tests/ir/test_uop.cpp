#include "ir/uop.hpp"

#include <doctest/doctest.h>

using namespace loom;

TEST_CASE("hash-consing: two builds of the same graph are one object") {
  auto build = [] {
    auto r = make_range(16, 0);
    return (r * 4 + const_int(DType::Int64, 3)) % 7;
  };
  auto a = build(), b = build();
  CHECK(a == b);
  CHECK(a->hash() == b->hash());
  CHECK(a->vmin() == 0);
  CHECK(a->vmax() == 6);
}
