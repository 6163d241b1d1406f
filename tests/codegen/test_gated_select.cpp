// gated_select: WHERE(c, LOAD(INDEX(buf, i, g)), 0.0) becomes one guarded load, and a store
// of a select that keeps the element's own value becomes a guarded store; the kernel
// means what it meant (interpreted before and after, and compiled).
#include "codegen/codegen.hpp"
#include "codegen/run_kernel.hpp"

#include <doctest/doctest.h>

#include <functional>

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

namespace {

// out[j] = where(c, x[j], out[j]) for j in [0, 16), c = 2 < j < 9: an in-place update of
// some elements (as `out.assign(where(c, x, out))`). `keep_first` writes the select the
// other way round (where(NOT c, out[j], x[j])); `read_at` reads out at another element.
struct Update {
  UOpPtr kernel, condition;
};
Update in_place_update(bool keep_first, const std::function<UOpPtr(const UOpPtr&)>& read_at = {}) {
  auto out = global(0, f32), x = global(1, f32);
  const UOpPtr j = make_range(16, 0);
  const UOpPtr c = land(i64(2) < j, j < i64(9));
  const UOpPtr own = kb::load(index(out, read_at ? read_at(j) : j)), other = kb::load(index(x, j));
  const UOpPtr value =
      keep_first ? where(alu(Op::XOR, {c, const_int(DType::Bool, 1)}), own, other) : where(c, other, own);
  return {sink({end(store(index(out, j), value), {j})}), c};
}

// The single STORE of `kernel`.
UOpPtr the_store(const UOpPtr& kernel) {
  for (const auto& u : toposort(kernel))
    if (u->op == Op::STORE) return u;
  return nullptr;
}

// Loads of slot `slot`.
size_t loads_of(const UOpPtr& kernel, int64_t slot) {
  size_t n = 0;
  for (const auto& u : toposort(kernel))
    n += u->op == Op::LOAD && u->src[0]->src[0]->op == Op::DEFINE_GLOBAL &&
         u->src[0]->src[0]->arg_int() == slot;
  return n;
}

void check_update(const UOpPtr& before, const UOpPtr& after) {
  Aligned<float> out(16), x(16);
  for (size_t i = 0; i < 16; ++i) out[i] = 100.0f + static_cast<float>(i), x[i] = -static_cast<float>(i);
  check_same_results(before, after, {out, x});
  run_all(compile_kernel(after, "gated_store"), after,
          {out, x});  // the compiled kernel against the interpreter
  for (size_t i = 0; i < 16; ++i) {
    INFO("element " << i);
    CHECK(out[i] == (i > 2 && i < 9 ? -static_cast<float>(i) : 100.0f + static_cast<float>(i)));
  }
}

}  // namespace

TEST_CASE("gated_select: an in-place update stores only where its condition holds") {
  const Update update = in_place_update(false);
  const UOpPtr folded = fold_gated_selects(update.kernel);
  const UOpPtr stored = the_store(folded);
  REQUIRE(stored);
  CHECK(stored->src[0]->src.size() == 3);
  CHECK(stored->src[0]->src[2] == update.condition);  // the store's guard
  CHECK(count_op(folded, Op::WHERE) == 0);
  CHECK(loads_of(folded, 0) == 0);  // out is not read: its elements outside c are not touched
  check_update(update.kernel, folded);
}

TEST_CASE("gated_select: the select the other way round stores where its condition fails") {
  const Update update = in_place_update(true);
  const UOpPtr folded = fold_gated_selects(update.kernel);
  CHECK(count_op(folded, Op::WHERE) == 0);
  CHECK(loads_of(folded, 0) == 0);
  check_update(update.kernel, folded);
}

TEST_CASE("gated_select: a select of another element of the stored buffer stays a full store") {
  const Update update = in_place_update(false, [](const UOpPtr& j) { return i64(15) - j; });
  CHECK(fold_gated_selects(update.kernel) == update.kernel);
}

TEST_CASE("gated_select: a half's in-place update through its widening stores only where it changes") {
  const DType bf16 = DType::BFloat16;
  auto out = global(0, bf16), x = global(1, f32);
  const UOpPtr j = make_range(16, 0);
  const UOpPtr c = j < i64(5);
  const UOpPtr own = cast(kb::load(index(out, j)), f32);
  const UOpPtr kernel = sink({end(
      store(index(out, j), cast(where(c, kb::load(index(x, j)) * const_float(f32, 2.0), own), bf16)), {j})});
  const UOpPtr folded = fold_gated_selects(kernel);
  CHECK(loads_of(folded, 0) == 0);
  CHECK(the_store(folded)->src[0]->src.at(2) == c);
  Aligned<uint16_t> o(16);
  Aligned<float> in(16);
  for (size_t i = 0; i < 16; ++i)
    o[i] = static_cast<uint16_t>(0x3f80 + i), in[i] = 0.25f * static_cast<float>(i);
  check_same_results(kernel, folded, {o, in});
  run_all(compile_kernel(folded, "gated_store_bf16"), folded, {o, in});
  for (size_t i = 0; i < 16; ++i) {
    INFO("element " << i);
    // bfloat16 of 0.5 i (exact): 0x3f00 is 0.5, each doubling adds 0x80 to the exponent.
    if (i >= 5) CHECK(o[i] == 0x3f80 + i);
  }
  CHECK(o[0] == 0);       // 0.0
  CHECK(o[1] == 0x3f00);  // 0.5
  CHECK(o[2] == 0x3f80);  // 1.0
  CHECK(o[4] == 0x4000);  // 2.0
}
