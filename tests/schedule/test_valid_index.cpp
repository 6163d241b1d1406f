// valid_index: a guarded access's address simplified where its guard holds.
#include "schedule/valid_index.hpp"
#include "stage_testing.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace loom;
using loom::testing::apply_stage;

namespace {

// out[c, t] = c >= 512 ? b[(t / 256) * 65536 + (c - 512) * 256 + t % 256] : 0 for c < 768,
// t < 2048: the piece of a concatenation along c read from v's gradient stored [8, 256, 256]
// with t innermost, its address as rangeify writes it (divisions of c + 256 t - 512).
// `guard` defines %g.
std::string concatenated_piece(const std::string& guard) {
  return R"(
%nc = CONST i64 [768]
%c = RANGE i64 %nc [axis 0 loop]
%nt = CONST i64 [2048]
%t = RANGE i64 %nt [axis 1 loop]
%k256 = CONST i64 [256]
%k65536 = CONST i64 [65536]
%kneg = CONST i64 [-512]
%t256 = MUL i64 %t, %k256
%ct = ADD i64 %c, %t256
%flat = ADD i64 %ct, %kneg
%blk = IDIV i64 %flat, %k65536
%blko = MUL i64 %blk, %k65536
%col = MOD i64 %flat, %k256
%colo = MUL i64 %col, %k256
%row = IDIV i64 %flat, %k256
%rowm = MOD i64 %row, %k256
%a0 = ADD i64 %blko, %colo
%addr = ADD i64 %a0, %rowm
)" + guard +
         R"(
%b = DEFINE_GLOBAL f32* [1]
%ib = INDEX f32* %b, %addr, %g
%lb = LOAD f32 %ib
%zero = CONST f32 [0.0]
%v = WHERE f32 %g, %lb, %zero
%out = DEFINE_GLOBAL f32* [0]
%cs = MUL i64 %c, %nt
%io0 = ADD i64 %cs, %t
%io = INDEX f32* %out, %io0
%st = STORE f32 %io, %v
%e = END f32 %st, %c, %t
%sink = SINK bool %e
)";
}

UOpPtr read_index(const UOpPtr& kernel) {
  for (const auto& u : toposort(kernel))
    if (u->op == Op::INDEX && u->src.size() == 3) return u;
  return nullptr;
}

int64_t divisions(const UOpPtr& u) {
  int64_t n = 0;
  for (const auto& x : toposort(u)) n += x->op == Op::IDIV || x->op == Op::MOD;
  return n;
}

UOpPtr range_with_axis(const UOpPtr& kernel, int64_t axis) {
  for (const auto& u : toposort(kernel))
    if (u->op == Op::RANGE && u->get<AxisArg>().id == axis) return u;
  return nullptr;
}

int64_t at(const UOpPtr& address, const UOpPtr& c, const UOpPtr& t, int64_t cv, int64_t tv) {
  const UOpPtr v =
      simplify(substitute(address, {{c, const_int(DType::Int64, cv)}, {t, const_int(DType::Int64, tv)}}));
  REQUIRE(v->is_const());
  return v->const_int();
}

}  // namespace

TEST_CASE("under c >= 512 the piece's address loses the divisions of c: a stride along c and t") {
  const std::string text = concatenated_piece("%k511 = CONST i64 [511]\n%g = CMPLT bool %k511, %c");
  const UOpPtr before = parse_text(text);
  const UOpPtr after = apply_stage(valid_index(), text);
  const UOpPtr read = read_index(after);
  REQUIRE(read);
  const UOpPtr c = range_with_axis(after, 0), t = range_with_axis(after, 1);
  CHECK(divisions(read->src[1]) == 2);  // t / 256 and t % 256 only
  // The address where the guard holds, as the unsimplified one gives it.
  const UOpPtr old_address = read_index(before)->src[1];
  const UOpPtr bc = range_with_axis(before, 0), bt = range_with_axis(before, 1);
  for (const int64_t cv : {512, 513, 600, 767})
    for (const int64_t tv : {0, 1, 255, 256, 1000, 2047}) {
      CAPTURE(cv);
      CAPTURE(tv);
      const int64_t want = (tv / 256) * 65536 + (cv - 512) * 256 + tv % 256;
      CHECK(at(old_address, bc, bt, cv, tv) == want);
      CHECK(at(read->src[1], c, t, cv, tv) == want);
    }
}

TEST_CASE("a guard anded with others narrows each range it bounds; an address it cannot simplify stays") {
  // 511 < c and t < 4096 (the bounds t has already): the same address as under 511 < c alone.
  const UOpPtr anded = apply_stage(valid_index(), concatenated_piece(R"(%k4096 = CONST i64 [4096]
%tlt = CMPLT bool %t, %k4096
%k511 = CONST i64 [511]
%clo = CMPLT bool %k511, %c
%g = AND bool %clo, %tlt)"));
  CHECK(divisions(read_index(anded)->src[1]) == 2);
  // 99 < c leaves c - 512 negative for some c: nothing folds, the kernel is as the simplifier
  // leaves it. No guard at all: the same.
  const std::string loose = concatenated_piece("%k99 = CONST i64 [99]\n%g = CMPLT bool %k99, %c");
  CHECK(apply_stage(valid_index(), loose) == testing::expect(loose));
  CHECK(divisions(read_index(testing::expect(loose))->src[1]) > 2);
}

TEST_CASE("a load inside the address keeps its own guard: a gather's index read under a pad") {
  // out[i, j] = 0 < j < 3 ? table[(i * 2 + j - 1) / 2 * 4 + (i * 2 + j - 1) % 2 + index[i * 2 + j - 1] * 2]
  // : 0 (loom-fuzz seed 780584). The table's guard implies the index load's, so simplified under
  // it the load's guard would fold to true, and the load, which runs whatever the table's guard
  // says, would read index[-1] and index[4].
  const std::string text = R"(
%out = DEFINE_GLOBAL bool* [0]
%k2 = CONST i64 [2]
%i = RANGE i64 %k2 [axis 0 loop]
%k4 = CONST i64 [4]
%i4 = MUL i64 %i, %k4
%j = RANGE i64 %k4 [axis 1 loop]
%oi = ADD i64 %i4, %j
%o = INDEX bool* %out, %oi
%k3 = CONST i64 [3]
%jlt = CMPLT bool %j, %k3
%k0 = CONST i64 [0]
%jgt = CMPLT bool %k0, %j
%g = AND bool %jlt, %jgt
%index = DEFINE_GLOBAL i32* [1]
%i2 = MUL i64 %i, %k2
%ij = ADD i64 %i2, %j
%km1 = CONST i64 [-1]
%flat = ADD i64 %ij, %km1
%ii = INDEX i32* %index, %flat, %g
%li = LOAD i32 %ii
%at = CAST i64 %li
%inlo = CMPLT bool %at, %k2
%inhi = CMPLT bool %km1, %at
%in = AND bool %inlo, %inhi
%table = DEFINE_GLOBAL u8* [2]
%q = IDIV i64 %flat, %k2
%q4 = MUL i64 %q, %k4
%r = MOD i64 %flat, %k2
%qr = ADD i64 %q4, %r
%at2 = MUL i64 %at, %k2
%addr = ADD i64 %qr, %at2
%both = AND bool %g, %in
%it = INDEX u8* %table, %addr, %both
%lt = LOAD u8 %it
%z = CONST u8 [0]
%w = WHERE u8 %in, %lt, %z
%w2 = WHERE u8 %g, %w, %z
%b = CAST bool %w2
%f = CONST bool [0]
%v = WHERE bool %g, %b, %f
%st = STORE bool %o, %v
%e = END bool %st, %i, %j
%sink = SINK bool %e
)";
  const UOpPtr after = apply_stage(valid_index(), text);
  int index_loads = 0;
  for (const auto& u : toposort(after))
    if (u->op == Op::INDEX && u->src[0]->op == Op::DEFINE_GLOBAL &&
        u->src[0]->dtype.scalar == Scalar::Int32) {
      ++index_loads;
      REQUIRE(u->src.size() == 3);
      CHECK_FALSE(u->src[2]->is_const());  // still guarded by 0 < j < 3
    }
  CHECK(index_loads >= 1);
}
