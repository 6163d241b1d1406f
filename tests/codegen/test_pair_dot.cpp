// PairDot (codegen/pair_dot.hpp): bfloat16 products summed two terms a step on the
// Target's pair-dot instruction (vdpbf16ps). Its products are exact in float32 and it adds
// each pair's earlier k first, so the result equals a float32 sum of the same terms in the
// order of k, bit for bit (outside float32's subnormals, which the instruction reads and
// writes as 0). tests/src/test_tensor_half_matmul.cpp checks whole programs.
#include "codegen/codegen.hpp"
#include "codegen/heuristic.hpp"
#include "codegen/run_kernel.hpp"
#include "ir/target.hpp"
#include "support/ordered_matmul.hpp"

#include <loom/half.hpp>

#include <doctest/doctest.h>

#include <algorithm>

using namespace loom;
using namespace loom::test;

TEST_CASE("pair_dot: the heuristic sums a product of bfloat16 pairs on the pair-dot unit, then tiles it") {
  // out[i, j] = sum_k a[i, k] b[k, j] with both read from copies laid out in pairs as
  // schedule/panel_packing.cpp lays them, k = 2q + t: A[i / 6, q, i % 6, 1 - t] and
  // B[jo, q, ji, 1 - t] with j = 32 jo + ji.
  const int64_t m = 12, k = 64, n = 64;
  const auto f32 = DType::Float32, bf16 = DType::BFloat16;
  auto out = global(0, f32), pa = global(1, bf16), pb = global(2, bf16);
  auto i = make_range(m, 0), jo = make_range(n / 32, 1), ji = make_range(32, 4);
  auto q = make_range(k / 2, 2, AxisKind::Reduce), t = make_range(2, 3, AxisKind::Reduce);
  const UOpPtr later_first = const_int(DType::Int64, 1) - t;
  auto a_at = (i / 6) * (k * 6) + q * 12 + (i % 6) * 2 + later_first;
  auto b_at = jo * (k * 32) + q * 64 + ji * 2 + later_first;
  auto widen = [&](const UOpPtr& x) { return UOp::make(Op::CAST, f32, {x}); };
  const UOpPtr sum = reduce(Op::ADD, widen(load(pa, a_at)) * widen(load(pb, b_at)), {q, t});
  const UOpPtr kernel = sink({end(store(index(out, i * n + jo * 32 + ji), sum), {i, jo, ji})});
  Target with_dot = with_vector_bytes(current_target(), 64);
  with_dot.isa.avx512f = with_dot.isa.avx512bw = with_dot.isa.avx512vl = with_dot.isa.avx512bf16 = true;
  const std::vector<Opt> opts = heuristic_opts(kernel, with_dot);
  REQUIRE(!opts.empty());
  CHECK(opts.front() == Opt{OptKind::PairDot, 3, 2});
  CHECK(std::any_of(opts.begin(), opts.end(), [](const Opt& o) { return o.kind == OptKind::MatmulTile; }));
  // Without the instruction: no pair_dot (and the Opt refuses such a Target).
  Target without = with_dot;
  without.isa.avx512bf16 = false;
  const std::vector<Opt> plain = heuristic_opts(kernel, without);
  CHECK(std::none_of(plain.begin(), plain.end(), [](const Opt& o) { return o.kind == OptKind::PairDot; }));
  CHECK_THROWS_AS(apply_opts(kernel, {{OptKind::PairDot, 3, 2}}, without), Error);

  // The optimised kernel, lowered: one DOT2 per accumulator, and the same values as the
  // interpreter's kernel (float32 sums of exact products in the order of k, so the same bits).
  const UOpPtr optimised = apply_opts(kernel, opts, with_dot);
  const UOpPtr lowered = split_vectors(lower_reduce(expand_lanes(optimised), 64), 64);
  int64_t dots = 0;
  for (const auto& u : toposort(lowered)) dots += u->op == Op::DOT2;
  CHECK(dots > 0);
  const auto av = bf16_values(static_cast<size_t>(m * k), 5), bv = bf16_values(static_cast<size_t>(k * n), 6);
  Aligned<uint16_t> a_pack(static_cast<size_t>(m * k)), b_pack(static_cast<size_t>(k * n));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t s = 0; s < k; ++s)
      a_pack.data()[(r / 6) * (k * 6) + (s / 2) * 12 + (r % 6) * 2 + 1 - s % 2] =
          bfloat16(av[static_cast<size_t>(r * k + s)]).bits;
  for (int64_t s = 0; s < k; ++s)
    for (int64_t c = 0; c < n; ++c)
      b_pack.data()[(c / 32) * (k * 32) + (s / 2) * 64 + (c % 32) * 2 + 1 - s % 2] =
          bfloat16(bv[static_cast<size_t>(s * n + c)]).bits;
  Aligned<float> got(static_cast<size_t>(m * n));
  check_same_results(kernel, lowered, {got, a_pack, b_pack});
  if (!host_pair_dot()) return;
  run_all(compile_kernel_for(optimised, "pair_dot_tile", "native").fn, optimised, {got, a_pack, b_pack});
  CHECK(bits(got.values()) == bits(ordered_matmul(av, bv, 1, m, k, n)));
}
