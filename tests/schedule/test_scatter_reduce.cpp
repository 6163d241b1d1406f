// scatter_reduce: a kernel storing a sum over lookups i that selects output row
// r by an index becomes a zero fill and a scatter-add of the selected terms.
#include "schedule/scatter_reduce.hpp"
#include "stage_testing.hpp"
#include "support/kernel_interpreter.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace loom;
using loom::testing::apply_stage;
using loom::testing::expect;

namespace {
// out[r, c] = sum over i < 5 of (idx[i] == r ? w[i, c] : 0), for an [8, 4] out.
// `sel` defines %sel, the selection: the WHERE form by default.
std::string gradient_kernel(
    const std::string& sel = "%fz = CONST f32 [0.0]\n%sel = WHERE f32 %eq, %lw, %fz") {
  return R"(
%out = DEFINE_GLOBAL f32* [0]
%idx = DEFINE_GLOBAL i32* [1]
%w = DEFINE_GLOBAL f32* [2]
%R = CONST i64 [8]
%C = CONST i64 [4]
%I = CONST i64 [5]
%r = RANGE i64 %R [axis 0 loop]
%c = RANGE i64 %C [axis 1 loop]
%i = RANGE i64 %I [axis 2 reduce]
%ii = INDEX i32* %idx, %i
%li = LOAD i32 %ii
%rc = CAST i32 %r
%eq = CMPEQ bool %rc, %li
%i4 = MUL i64 %i, %C
%iw = ADD i64 %i4, %c
%xw = INDEX f32* %w, %iw
%lw = LOAD f32 %xw
)" + sel +
         R"(
%s = REDUCE f32 %sel, %i [reduce ADD ()]
%r4 = MUL i64 %r, %C
%o = ADD i64 %r4, %c
%io = INDEX f32* %out, %o
%st = STORE f32 %io, %s
%e = END f32 %st, %r, %c
%k = SINK bool %e
)";
}

// The After: every element zeroed over fresh ranges, then row idx[i] += w[i, :], for i in order.
const char* kScattered = R"(
%out = DEFINE_GLOBAL f32* [0]
%idx = DEFINE_GLOBAL i32* [1]
%w = DEFINE_GLOBAL f32* [2]
%R = CONST i64 [8]
%C = CONST i64 [4]
%I = CONST i64 [5]
%r2 = RANGE i64 %R [axis 3 loop]
%c2 = RANGE i64 %C [axis 4 loop]
%r24 = MUL i64 %r2, %C
%o2 = ADD i64 %r24, %c2
%io2 = INDEX f32* %out, %o2
%fz = CONST f32 [0.0]
%fill = STORE f32 %io2, %fz
%ef = END f32 %fill, %r2, %c2
%zeroed = AFTER f32* %out, %ef
%c = RANGE i64 %C [axis 1 loop]
%i = RANGE i64 %I [axis 2 loop]
%ii = INDEX i32* %idx, %i
%li = LOAD i32 %ii
%at = CAST i64 %li
%at4 = MUL i64 %at, %C
%o = ADD i64 %c, %at4
%m1 = CONST i64 [-1]
%lo = CMPLT bool %m1, %at
%hi = CMPLT bool %at, %R
%in = AND bool %lo, %hi
%io = INDEX f32* %zeroed, %o, %in
%old = LOAD f32 %io
%i4 = MUL i64 %i, %C
%iw = ADD i64 %c, %i4
%xw = INDEX f32* %w, %iw
%lw = LOAD f32 %xw
%sum = ADD f32 %old, %lw
%st = STORE f32 %io, %sum
%e = END f32 %st, %i, %c
%k = SINK bool %e
)";

// Runs a kernel of gradient_kernel's slots on idx and w, out starting as garbage.
std::vector<float> run(const UOpPtr& kernel, std::vector<int32_t> idx) {
  std::vector<float> out(8 * 4, 7.5f), w(5 * 4);
  for (size_t k = 0; k < w.size(); ++k) w[k] = 0.25f * static_cast<float>(k) - 1;
  void* bufs[] = {out.data(), idx.data(), w.data()};
  interpret_kernel_checked(kernel, bufs, {32, 5, 20}, {});
  return out;
}
}  // namespace

TEST_CASE("a sum over lookups selecting output rows becomes a zero fill and a scatter-add") {
  const UOpPtr before = parse_text(gradient_kernel());
  const UOpPtr after = apply_stage(scatter_reduce(), gradient_kernel());
  CHECK(after == expect(kScattered));
  // Repeated rows add up in the order of i, and a row no lookup selects (or an
  // index out of range) leaves zeros, as the sum did.
  for (const std::vector<int32_t>& idx : {std::vector<int32_t>{3, 0, 3, 7, 3}, {9, -1, 2, 2, 8}})
    CHECK(run(after, idx) == run(before, idx));
}

TEST_CASE("w * cast(idx == r) is read as the selection where(idx == r, w, 0)") {
  CHECK(apply_stage(scatter_reduce(), gradient_kernel("%one = CAST f32 %eq\n%sel = MUL f32 %lw, %one")) ==
        expect(kScattered));
}

TEST_CASE("scatter_reduce refuses what it cannot scatter") {
  SUBCASE("a value that depends on the selected row") {
    const std::string k = gradient_kernel(
        "%fz = CONST f32 [0.0]\n"
        "%rf = CAST f32 %r\n%v = MUL f32 %lw, %rf\n%sel = WHERE f32 %eq, %v, %fz");
    CHECK(apply_stage(scatter_reduce(), k) == expect(k));
  }
  SUBCASE("a selection by something other than equality (idx <= r)") {
    const std::string k = gradient_kernel(
        "%fz = CONST f32 [0.0]\n"
        "%lt = CMPLT bool %rc, %li\n%le = OR bool %lt, %eq\n%sel = WHERE f32 %le, %lw, %fz");
    CHECK(apply_stage(scatter_reduce(), k) == expect(k));
  }
  SUBCASE("a kernel that reads its own output (the fill would overwrite it)") {
    const std::string k = gradient_kernel(
        "%fz = CONST f32 [0.0]\n"
        "%ol = INDEX f32* %out, %iw\n%lo = LOAD f32 %ol\n%v = ADD f32 %lo, %lw\n%sel = WHERE f32 %eq, %v, "
        "%fz");
    CHECK(apply_stage(scatter_reduce(), k) == expect(k));
  }
  SUBCASE("a max instead of a sum") {
    std::string k = gradient_kernel();
    k.replace(k.find("reduce ADD"), 10, "reduce MAX");
    CHECK(apply_stage(scatter_reduce(), k) == expect(k));
  }
}
