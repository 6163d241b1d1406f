// guard_narrowing: a loop whose store changes memory only where its guard bounds the
// loop runs over those iterations only.
#include "schedule/guard_narrowing.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>

#include <set>
#include <string>

using namespace loom;
using loom::testing::apply_stage;

namespace {

// out[r*8 + l] = where(guard, x[l], out[r*8 + l]) for r < 16, l < 8: row P of out
// written in place (`out.slice(0, P, P + 1).assign(x)`), as rangeify leaves it.
// `guard` defines %g from %r (and %l).
std::string row_write(const std::string& guard) {
  return R"(
%n16 = CONST i64 [16]
%r = RANGE i64 %n16 [axis 0 loop]
%n8 = CONST i64 [8]
%l = RANGE i64 %n8 [axis 1 loop]
%r8 = MUL i64 %r, %n8
%addr = ADD i64 %r8, %l
%out = DEFINE_GLOBAL f32* [0]
%io = INDEX f32* %out, %addr
%x = DEFINE_GLOBAL f32* [1]
%ix = INDEX f32* %x, %l
%vx = LOAD f32 %ix
%old = LOAD f32 %io
)" + guard +
         R"(
%v = WHERE f32 %g, %vx, %old
%st = STORE f32 %io, %v
%e = END f32 %st, %r, %l
%sink = SINK bool %e)";
}

const std::string kRowP = R"(%p = DEFINE_VAR i64 [var "P" 0 15]
%one = CONST i64 [1]
%hi = ADD i64 %p, %one
%below = CMPLT bool %r, %hi
%lo = SUB i64 %p, %one
%above = CMPLT bool %lo, %r
%g = AND bool %below, %above)";

// The extents of the store's loops, outermost first (-1: not a number).
std::vector<int64_t> loop_ends(const UOpPtr& kernel) {
  std::vector<int64_t> ends;
  const UOpPtr& end = kernel->src[0];
  for (size_t k = 1; k < end->src.size(); ++k)
    ends.push_back(end->src[k]->src[0]->is_const() ? end->src[k]->src[0]->const_int() : -1);
  return ends;
}

// The addresses the kernel's store writes with P bound to `p`: every iteration of its loops
// where the store changes memory (its WHERE's condition holds, if it has one), as numbers.
std::set<int64_t> written(const UOpPtr& kernel, int64_t p) {
  const UOpPtr end = kernel->src[0], store = end->src[0];
  const UOpPtr var = [&] {
    for (const auto& u : toposort(kernel))
      if (u->op == Op::DEFINE_VAR) return u;
    return UOpPtr{};
  }();
  std::set<int64_t> out;
  std::vector<std::pair<UOpPtr, UOpPtr>> at{{var, const_int(DType::Int64, p)}};
  const auto visit = [&](auto&& self, size_t k) -> void {
    if (k == end->src.size()) {
      const UOpPtr& value = store->src[1];
      const UOpPtr changed = value->op == Op::WHERE ? simplify(substitute(value->src[0], at)) : nullptr;
      REQUIRE((!changed || changed->is_const()));
      if (!changed || changed->const_int() != 0) {
        const UOpPtr address = simplify(substitute(store->src[0]->src[1], at));
        REQUIRE(address->is_const());
        out.insert(address->const_int());
      }
      return;
    }
    const UOpPtr& r = end->src[k];
    const UOpPtr extent = simplify(substitute(r->src[0], at));
    REQUIRE(extent->is_const());
    for (int64_t i = 0; i < extent->const_int(); ++i) {
      at.emplace_back(r, const_int(DType::Int64, i));
      self(self, k + 1);
      at.pop_back();
    }
  };
  visit(visit, 1);
  return out;
}

}  // namespace

TEST_CASE("a row written in place at a variable position loops over that row only") {
  const std::string text = row_write(kRowP);
  const UOpPtr before = parse_text(text), after = apply_stage(guard_narrowing(), text);
  CHECK(loop_ends(before) == std::vector<int64_t>{16, 8});
  CHECK(loop_ends(after) == std::vector<int64_t>{1, 8});
  for (const int64_t p : {0, 1, 7, 15}) {
    CAPTURE(p);
    std::set<int64_t> row;
    for (int64_t l = 0; l < 8; ++l) row.insert(p * 8 + l);
    CHECK(written(before, p) == row);
    CHECK(written(after, p) == row);
  }
}

TEST_CASE("a bound of numbers narrows the loop to it; the lower end moves the start") {
  const UOpPtr after = apply_stage(guard_narrowing(), row_write(R"(%k3 = CONST i64 [3]
%k11 = CONST i64 [11]
%above = CMPLT bool %k3, %r
%below = CMPLT bool %r, %k11
%g = AND bool %above, %below)"));
  CHECK(loop_ends(after) == std::vector<int64_t>{7, 8});  // rows 4 to 10: the guard always holds
  std::set<int64_t> rows;
  for (int64_t r = 4; r < 11; ++r)
    for (int64_t l = 0; l < 8; ++l) rows.insert(r * 8 + l);
  CHECK(written(after, 0) == rows);
}

TEST_CASE("nothing narrows where another iteration may change memory") {
  // The WHERE's other side is not what the store's own address holds.
  const std::string elsewhere = R"(
%n16 = CONST i64 [16]
%r = RANGE i64 %n16 [axis 0 loop]
%k3 = CONST i64 [3]
%g = CMPLT bool %r, %k3
%out = DEFINE_GLOBAL f32* [0]
%io = INDEX f32* %out, %r
%y = DEFINE_GLOBAL f32* [1]
%iy = INDEX f32* %y, %r
%vy = LOAD f32 %iy
%zero = CONST f32 [0.0]
%v = WHERE f32 %g, %zero, %vy
%st = STORE f32 %io, %v
%e = END f32 %st, %r
%sink = SINK bool %e)";
  CHECK(apply_stage(guard_narrowing(), elsewhere) == testing::expect(elsewhere));
  // A bound that reads another loop (a triangle): unchanged.
  const std::string triangle = row_write("%g = CMPLT bool %r, %l");
  CHECK(apply_stage(guard_narrowing(), triangle) == testing::expect(triangle));
}
