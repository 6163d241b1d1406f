// The one contraction analysis: a float sum over a product of loads classified into
// M, N, batch and K ranges, strides and windows, on hand-written kernels.
#include "ir/contraction.hpp"

#include "support/kernel_builders.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::kb;

namespace {

const DType f32 = DType::Float32;

UOpPtr load_at(const UOpPtr& buf, const UOpPtr& at) { return load(index(buf, at)); }

// out[t, i, j] = sum_k a(t, i, k) * b[t, k, j] (+ extra[t, i, j] with `epilogue`).
struct Matmul {
  UOpPtr store, t, i, j, k;
  std::vector<UOpPtr> outs() const { return {t, i, j}; }
};
Matmul matmul(int64_t batch, int64_t m, int64_t kk, int64_t n, bool a_transposed, bool epilogue = false) {
  Matmul mm;
  mm.t = make_range(batch, 0), mm.i = make_range(m, 1), mm.j = make_range(n, 2);
  mm.k = make_range(kk, 3, AxisKind::Reduce);
  const auto a_at = mm.t * (m * kk) + (a_transposed ? mm.k * m + mm.i : mm.i * kk + mm.k);
  const auto b_at = mm.t * (kk * n) + mm.k * n + mm.j;
  UOpPtr value = reduce(Op::ADD, load_at(global(1, f32), a_at) * load_at(global(2, f32), b_at), {mm.k});
  const auto out_at = mm.t * (m * n) + mm.i * n + mm.j;
  if (epilogue) value = value + load_at(global(3, f32), out_at);
  mm.store = store(index(global(0, f32), out_at), value);
  return mm;
}

}  // namespace

TEST_CASE("a batched matmul: M is a's own range, N b's, the batch both, K the sum's") {
  for (const bool transposed : {false, true}) {
    CAPTURE(transposed);
    const Matmul mm = matmul(2, 12, 8, 16, transposed);
    const auto c = contraction(mm.store, mm.outs(), mm.store->src[0]);
    REQUIRE(c);
    CHECK(c->product());
    CHECK(c->only(0) == std::vector<UOpPtr>{mm.i});
    CHECK(c->only(1) == std::vector<UOpPtr>{mm.j});
    CHECK(c->both() == std::vector<UOpPtr>{mm.t});
    CHECK(c->k == std::vector<UOpPtr>{mm.k});
    CHECK(c->contiguous(1, mm.j));  // b and the output step 1 along j
    CHECK(Contraction::stride(c->loads[0][0], mm.i) == (transposed ? 1 : 8));  // a[k * m + i], a[i * k + k]
    CHECK(Contraction::stride(c->loads[1][0], mm.k) == 16);
    CHECK(Contraction::stride(c->loads[0][0], mm.k) == (transposed ? 12 : 1));
    CHECK(c->windows().empty());  // a's rows do not overlap: no window
    CHECK(c->broadcast_both());
    CHECK_FALSE(c->reads_all_outputs());
    CHECK(c->ops == std::array<int64_t, 2>{0, 0});
  }
}

TEST_CASE("an epilogue that reads a buffer over every output range: a pass over it, not a tile") {
  const Matmul mm = matmul(1, 4, 4, 4, false, true);
  const auto c = contraction(mm.store, mm.outs());
  REQUIRE(c);
  CHECK(c->reads_all_outputs());
  CHECK(c->reads.size() == 3);
}

TEST_CASE(
    "a one-dimensional convolution: out[b, o, i] = sum_{c, w} x[b, c, i + w] * f[o, c, w] is a window") {
  const int64_t B = 2, C = 3, O = 4, L = 10, W = 3, out_len = L - W + 1;
  const auto b = make_range(B, 0), o = make_range(O, 1), i = make_range(out_len, 2);
  const auto c = make_range(C, 3, AxisKind::Reduce), w = make_range(W, 4, AxisKind::Reduce);
  const auto x = load_at(global(1, f32), b * (C * L) + c * L + i + w);
  const auto f = load_at(global(2, f32), o * (C * W) + c * W + w);
  const auto st =
      store(index(global(0, f32), b * (O * out_len) + o * out_len + i), reduce(Op::ADD, x * f, {c, w}));
  const auto con = contraction(st, {b, o, i}, st->src[0]);
  REQUIRE(con);
  CHECK(con->only(0) == std::vector<UOpPtr>{b, i});  // x's own: the batch and the positions
  CHECK(con->only(1) == std::vector<UOpPtr>{o});     // f's own: the output channels
  REQUIRE(con->windows().size() == 1);
  CHECK(con->windows()[0].out == i);
  CHECK(con->windows()[0].reduce == w);
  CHECK(con->contiguous(0, i));
}

TEST_CASE("windows: a stride-2 window of 3 overlaps, one of 2 (patches) does not") {
  for (const auto& [kernel, overlaps] : {std::pair{int64_t{3}, true}, std::pair{int64_t{2}, false}}) {
    CAPTURE(kernel);
    const auto i = make_range(8, 0), w = make_range(kernel, 1, AxisKind::Reduce);
    const auto x = load_at(global(1, f32), i * 2 + w), f = load_at(global(2, f32), w);
    const auto st = store(index(global(0, f32), i), reduce(Op::ADD, x * f, {w}));
    const auto c = contraction(st, {i});
    REQUIRE(c);
    CHECK(c->windows().size() == (overlaps ? 1u : 0u));
  }
}

TEST_CASE("a sum of loads alone is a contraction with no a; a max or an integer sum is none") {
  const auto i = make_range(4, 0), k = make_range(8, 1, AxisKind::Reduce);
  const auto x = load_at(global(1, f32), k * 4 + i);
  const auto sum = store(index(global(0, f32), i), reduce(Op::ADD, x, {k}));
  const auto c = contraction(sum, {i});
  REQUIRE(c);
  CHECK_FALSE(c->product());
  CHECK(c->only(1) == std::vector<UOpPtr>{i});
  CHECK_FALSE(c->broadcast_both());
  CHECK_FALSE(contraction(store(index(global(0, f32), i), reduce(Op::MAX, x, {k})), {i}));
  const auto n = load_at(global(1, DType::Int32), k * 4 + i);
  CHECK_FALSE(contraction(store(index(global(0, DType::Int32), i), reduce(Op::ADD, n, {k})), {i}));
}

TEST_CASE("a factor's cost and nested sums; given addresses (the tensor graph), the same classes") {
  const auto i = make_range(4, 0), j = make_range(4, 1), k = make_range(8, 2, AxisKind::Reduce);
  const auto a = load_at(global(1, f32), i * 8 + k), b = load_at(global(2, f32), k * 4 + j);
  const auto scaled = alu(Op::EXP2, {a * const_float(f32, 2.0)}) + const_float(f32, 1.0);
  const auto st = store(index(global(0, f32), i * 4 + j), reduce(Op::ADD, scaled * b, {k}));
  const auto c = contraction(st, {i, j});
  REQUIRE(c);
  CHECK(c->ops == std::array<int64_t, 2>{3, 0});
  CHECK(c->nested == std::array<bool, 2>{false, false});

  const Contraction t = contraction_of_addresses({i * 8 + k, k * 4 + j}, {4, 4}, {i, j}, {k});
  CHECK(t.only(0) == std::vector<UOpPtr>{i});
  CHECK(t.only(1) == std::vector<UOpPtr>{j});
  CHECK(Contraction::stride(t.loads[1][0], k) == 4);
  CHECK(t.broadcast_both());
}
