// gated_select: WHERE(c, LOAD(INDEX(buf, i, g)), 0.0) becomes one guarded load; the kernel
// means what it meant (interpreted before and after, and compiled).
#include "codegen/codegen.hpp"
#include "codegen/run_kernel.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::test;

namespace {

const auto f32 = DType::Float32;

// out[j] = where(c, x[j - 1] guarded by g, z) for j in [0, 16): a padded row read one to
// the left, its guard g = (0 < j) and, with `lanes`, also j < 12 (a tile's padded lanes).
struct Row {
  UOpPtr kernel, load;
};
Row padded_row(bool lanes_guard, bool same_condition, double zero, bool second_reader = false) {
  auto out = global(0, f32), x = global(1, f32);
  const UOpPtr j = make_range(16, 0);
  const UOpPtr inside = i64(0) < j, in_tile = j < i64(12);
  const UOpPtr guard = lanes_guard ? land(inside, in_tile) : inside;
  const UOpPtr c = same_condition ? inside : j < i64(14);
  const UOpPtr loaded = kb::load(index(x, j - i64(1), guard));
  UOpPtr value = where(c, loaded, const_float(f32, zero));
  if (second_reader) value = value + loaded;
  return {sink({end(store(index(out, j), value), {j})}), loaded};
}

size_t count_op(const UOpPtr& k, Op op) {
  size_t n = 0;
  for (const auto& u : toposort(k)) n += u->op == op;
  return n;
}

void check_meaning(const UOpPtr& before, const UOpPtr& after) {
  Aligned<float> out(16, -7.0f), x(16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 5.5f;
  check_same_results(before, after, {out, x});
  Aligned<float> want(16, -7.0f), got(16, -7.0f);
  std::vector<void*> bufs{want.data(), x.data()};
  interpret_kernel(before, bufs.data(), {});
  run_all(compile_kernel(after, "gated_select"), after, {got, x});
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == want[i]);
    CHECK(std::signbit(got[i]) == std::signbit(want[i]));
  }
}

}  // namespace

TEST_CASE("gated_select: a select by the load's own guard is the load") {
  const Row row = padded_row(false, true, 0.0);
  const UOpPtr folded = fold_gated_selects(row.kernel);
  CHECK(count_op(folded, Op::WHERE) == 0);
  CHECK(folded->src[0]->src[0]->src[1] == row.load);  // the store's value is the load as it was
  check_meaning(row.kernel, folded);
}

TEST_CASE("gated_select: a select by a term of the guard (the tile's lanes added) is the load") {
  const Row row = padded_row(true, true, 0.0);
  const UOpPtr folded = fold_gated_selects(row.kernel);
  CHECK(count_op(folded, Op::WHERE) == 0);
  check_meaning(row.kernel, folded);
}

TEST_CASE("gated_select: another condition joins the guard") {
  const Row row = padded_row(true, false, 0.0);
  const UOpPtr folded = fold_gated_selects(row.kernel);
  CHECK(count_op(folded, Op::WHERE) == 0);
  const UOpPtr& load = folded->src[0]->src[0]->src[1];
  REQUIRE(load->op == Op::LOAD);
  CHECK(load->src[0]->src[2] == land(row.load->src[0]->src[2], make_range(16, 0) < i64(14)));
  check_meaning(row.kernel, folded);
}

TEST_CASE("gated_select: -0.0, another value, a load read twice and an unguarded load stay selects") {
  for (const Row& row :
       {padded_row(false, true, -0.0), padded_row(false, true, 1.5), padded_row(false, true, 0.0, true)}) {
    const UOpPtr folded = fold_gated_selects(row.kernel);
    CHECK(folded == row.kernel);
    check_meaning(row.kernel, folded);
  }
  auto out = global(0, f32), x = global(1, f32);
  const UOpPtr j = make_range(16, 0);
  const UOpPtr unguarded =
      sink({end(store(index(out, j), where(j < i64(8), kb::load(index(x, j)), const_float(f32, 0.0))), {j})});
  CHECK(fold_gated_selects(unguarded) == unguarded);
}
