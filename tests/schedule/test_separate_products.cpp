// separate_products: an elementwise value combining two matrix products makes every
// product but the first a realization point; one product, a dot product, or a product
// behind a realization point already is left alone.
#include "schedule/separate_products.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace loom;
using loom::testing::apply_stage;

namespace {
// x @ w over [4, 8] @ [8, 4], as Tensor::matmul builds it; `name` prefixes its nodes.
std::string product(const std::string& name, int first_id) {
  const std::string x = "%" + name + "x", w = "%" + name + "w";
  return x + " = BUFFER f32 [(" + std::to_string(first_id) + " 32)]\n" + x + "r = RESHAPE f32 " + x +
         " [(4 1 8)]\n" + x + "e = EXPAND f32 " + x + "r [(4 4 8)]\n" + w + " = BUFFER f32 [(" +
         std::to_string(first_id + 1) + " 32)]\n" + w + "r = RESHAPE f32 " + w + " [(8 4)]\n" + w +
         "t = PERMUTE f32 " + w + "r [(1 0)]\n" + w + "u = RESHAPE f32 " + w + "t [(1 4 8)]\n" + w +
         "e = EXPAND f32 " + w + "u [(4 4 8)]\n%" + name + "m = MUL f32 " + x + "e, " + w + "e\n%" + name +
         "s = REDUCE_AXIS f32 %" + name + "m [reduce ADD (2)]\n";
}
}  // namespace

TEST_CASE("x @ w + h @ u: the second product becomes a realization point") {
  const std::string before = product("a", 1) + "%ar = RESHAPE f32 %as [(4 4)]\n" + product("b", 3) +
                             "%br = RESHAPE f32 %bs [(4 4)]\n%out = ADD f32 %ar, %br\n%k = SINK bool %out\n";
  const std::string after = product("a", 1) + "%ar = RESHAPE f32 %as [(4 4)]\n" + product("b", 3) +
                            "%bc = CONTIGUOUS f32 %bs\n%br = RESHAPE f32 %bc [(4 4)]\n%out = ADD f32 %ar, "
                            "%br\n%k = SINK bool %out\n";
  CHECK(apply_stage(separate_products(), before, Flags{}, false) == parse_text(after));
}

TEST_CASE("three products through a chain of adds: all but the first are realized") {
  const std::string before = product("a", 1) + product("b", 3) + product("c", 5) +
                             "%ab = ADD f32 %as, %bs\n%out = ADD f32 %ab, %cs\n%k = SINK bool %out\n";
  const UOpPtr out = apply_stage(separate_products(), before, Flags{}, false);
  int realized = 0;
  for (const auto& n : toposort(out)) realized += n->op == Op::CONTIGUOUS;
  CHECK(realized == 2);
}

TEST_CASE("one product with a bias, a product realized already, a dot product: unchanged") {
  const std::string biased = product("a", 1) + "%b = BUFFER f32 [(3 16)]\n%br = RESHAPE f32 %b [(4 4 1)]\n" +
                             "%out = ADD f32 %as, %br\n%k = SINK bool %out\n";
  CHECK(apply_stage(separate_products(), biased, Flags{}, false) == parse_text(biased));
  const std::string realized = product("a", 1) + product("b", 3) +
                               "%bc = CONTIGUOUS f32 %bs\n%out = ADD f32 %as, %bc\n%k = SINK bool %out\n";
  CHECK(apply_stage(separate_products(), realized, Flags{}, false) == parse_text(realized));
  const std::string dots = R"(
%x = BUFFER f32 [(1 8)]
%y = BUFFER f32 [(2 8)]
%m = MUL f32 %x, %y
%s = REDUCE_AXIS f32 %m [reduce ADD (0)]
%u = BUFFER f32 [(3 8)]
%v = BUFFER f32 [(4 8)]
%n = MUL f32 %u, %v
%t = REDUCE_AXIS f32 %n [reduce ADD (0)]
%out = ADD f32 %s, %t
%k = SINK bool %out
)";
  CHECK(apply_stage(separate_products(), dots, Flags{}, false) == parse_text(dots));
}

TEST_CASE("a product another node reads too is not this value's to separate") {
  // relu's backward mask reads the forward product's relu: its buffer, not fused here.
  const std::string shared = product("a", 1) + product("b", 3) +
                             "%out = ADD f32 %as, %bs\n%other = MUL f32 %bs, %bs\n%k = SINK bool %out, %other\n";
  CHECK(apply_stage(separate_products(), shared, Flags{}, false) == parse_text(shared));
}
