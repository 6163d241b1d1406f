// nn::scaled_dot_product_attention: is_causal, masks and enable_gqa against a float64
// reference written as loops (tests/support/attention_reference.hpp) from T = 1 to 2048,
// forward and gradients; PyTorch's values and Float64 gradients on small cases
// (tests/data/attention_table.json, made once by tests/data/make_attention_table.py);
// central finite differences; the causal mask as index arithmetic; and the errors.
#include "gradcheck.hpp"
#include "ir/uop.hpp"
#include "support/attention_reference.hpp"
#include "support/error_message.hpp"
#include "torch_table.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>

using namespace loom;
using test::check_message;
using test::error_of;
using test::json;

namespace {

const json& attention_table() {
  static const json t = test::read_table(LOOM_TEST_DATA "/attention_table.json");
  return t;
}

std::vector<float> uniform(size_t n, std::mt19937_64& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// max |got - want| <= tol * max(1, max |want|): a norm-wise bound, one check per tensor. The
// scale is the tensor's own, since a gradient's entries may be near 0 where its sums cancel.
void check_close(const std::vector<float>& got, const std::vector<double>& want, double tol,
                 const char* what) {
  REQUIRE(got.size() == want.size());
  double scale = 1, err = 0;
  size_t worst = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::isnan(got[i]) ? INFINITY : std::abs(got[i] - want[i]);
    if (e > err) err = e, worst = i;
  }
  INFO(what, ": largest error ", err, " at element ", worst, " (loom ", got.empty() ? 0.0 : got[worst],
       ", reference ", want.empty() ? 0.0 : want[worst], "), scale ", scale);
  CHECK(err <= tol * scale);
}

// Float64 against the reference: within 1e-12 of max(1, |want|), element by element.
void check_f64(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(what, " element ", i, ": loom ", got[i], ", reference ", want[i]);
    CHECK(std::abs(got[i] - want[i]) <= 1e-12 * std::max(1.0, std::abs(want[i])));
  }
}

// A key-padding mask [B, 1, 1, T]: batch b sees its first T - (b + 1) * T / 4 keys (at least one).
int64_t valid_keys(int64_t b, int64_t T) { return std::max<int64_t>(1, T - (b + 1) * T / 4); }

Tensor padding_mask(int64_t B, int64_t T) {
  std::vector<bool> m;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < T; ++j) m.push_back(j < valid_keys(b, T));
  return Tensor::from_vector<bool>(m, {B, 1, 1, T});
}

}  // namespace

// ---- the accuracy test
// --------------------------------------------------------------------------------

TEST_CASE(
    "attention in Float32 matches the float64 formula for T = 1 to 2048, causal or not, padded or not") {
  // Forward and the gradients of sum(y * w) for q, k and v, against the reference's loops
  // on the same (Float32-rounded) numbers. Up to T = 64: 2 batches of 2 heads; at 1000 and
  // 2048 one head, so the test stays a few seconds (and affordable under ASan) while the
  // softmax still sums 2048 terms. E = 16. Measured with cold kernel caches (LOOM_CACHE_DIR=off,
  // load 3.5 on 2 cores): 2.9 s in Release, 11 s under ASan and UBSan (-O1), 876 MB resident.
  //
  // Tolerance: the Float32 sums of q.k (16 terms), of the softmax's T terms and of p v (T
  // terms), and in the backward of p dP over T keys and of dS q over T queries, each err by
  // a few units of 2^-24 times their terms' magnitude, growing about with the square root
  // of the terms' count when the roundings are random. Measured (2026-12-03): the largest
  // error is 1.9e-6 of the tensor's scale (dk, causal, T = 2048), 3.5e-7 at T = 64; 2e-5
  // leaves a factor of 10 for other machines' vector widths and summation orders. A causal
  // mask one key off is still caught at T = 2048: with one key too many in rows 1501 on, the
  // reference differs from loom by 1.3e-3 to 6e-2 of the scale (tried), 60 times 2e-5 or more.
  const double tol = 2e-5;
  for (const int64_t T : {1, 7, 64, 1000, 2048}) {
    const int64_t B = T <= 64 ? 2 : 1, H = T <= 64 ? 2 : 1, E = 16;
    std::mt19937_64 rng(static_cast<uint64_t>(T));
    const auto n = static_cast<size_t>(B * H * T * E);
    const std::vector<float> qv = uniform(n, rng, -2, 2), kv = uniform(n, rng, -2, 2),
                             vv = uniform(n, rng, -2, 2), wv = uniform(n, rng, -1, 1);
    const Shape shape{B, H, T, E};
    for (const bool causal : {false, true})
      for (const bool padded : {false, true}) {
        CAPTURE(T);
        CAPTURE(causal);
        CAPTURE(padded);
        Tensor q = Tensor::from_vector<float>(qv, shape), k = Tensor::from_vector<float>(kv, shape),
               v = Tensor::from_vector<float>(vv, shape);
        q.requires_grad_(), k.requires_grad_(), v.requires_grad_();
        // PyTorch takes is_causal or a mask, not both: causal and padded is the two masks and-ed.
        Tensor mask;
        if (padded)
          mask = causal
                     ? padding_mask(B, T) & (Tensor::arange(T).unsqueeze(0) <= Tensor::arange(T).unsqueeze(1))
                     : padding_mask(B, T);
        const Tensor y = nn::scaled_dot_product_attention(q, k, v, mask, std::nullopt, causal && !padded);
        const std::vector<Tensor> g = gradient((y * Tensor::from_vector<float>(wv, shape)).sum(), {q, k, v});
        realize({y, g[0], g[1], g[2]});
        const test::AttentionReference want =
            test::attention_reference({B * H, T, T, E, E}, widen(qv), widen(kv), widen(vv), widen(wv),
                                      1 / std::sqrt(double(E)), [&](int64_t bh, int64_t i, int64_t j) {
                                        return (!causal || j <= i) && (!padded || j < valid_keys(bh / H, T));
                                      });
        check_close(y.to_vector<float>(), want.out, tol, "output");
        check_close(g[0].to_vector<float>(), want.dq, tol, "dq");
        check_close(g[1].to_vector<float>(), want.dk, tol, "dk");
        check_close(g[2].to_vector<float>(), want.dv, tol, "dv");
      }
  }
}

// ---- semantics: is_causal, L != S, GQA
// -------------------------------------------------------------------------

TEST_CASE(
    "is_causal is PyTorch's lower-triangular L x S mask, aligned top-left, for L = S, L < S and L > S") {
  // Float64 against the reference: query i sees keys 0..i; with more queries than keys the
  // queries from S on see every key.
  for (const auto& [L, S] : {std::pair<int64_t, int64_t>{5, 5}, {3, 6}, {6, 3}, {1, 4}}) {
    CAPTURE(L);
    CAPTURE(S);
    const int64_t n = 2, E = 3, Ev = 2;
    std::mt19937_64 rng(static_cast<uint64_t>(L * 10 + S));
    auto draw = [&](int64_t count) { return widen(uniform(static_cast<size_t>(count), rng, -2, 2)); };
    const std::vector<double> qv = draw(n * L * E), kv = draw(n * S * E), vv = draw(n * S * Ev),
                              wv = draw(n * L * Ev);
    Tensor q = Tensor::from_vector<double>(qv, {n, L, E}), k = Tensor::from_vector<double>(kv, {n, S, E}),
           v = Tensor::from_vector<double>(vv, {n, S, Ev});
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_();
    const Tensor y = nn::scaled_dot_product_attention(q, k, v, {}, 0.8, true);
    const std::vector<Tensor> g =
        gradient((y * Tensor::from_vector<double>(wv, {n, L, Ev})).sum(), {q, k, v});
    const test::AttentionReference want = test::attention_reference(
        {n, L, S, E, Ev}, qv, kv, vv, wv, 0.8, [](int64_t, int64_t i, int64_t j) { return j <= i; });
    check_f64(y.to_vector<double>(), want.out, "output");
    check_f64(g[0].to_vector<double>(), want.dq, "dq");
    check_f64(g[1].to_vector<double>(), want.dk, "dk");
    check_f64(g[2].to_vector<double>(), want.dv, "dv");
  }
}

TEST_CASE("enable_gqa repeats each k and v head to Hq / Hkv consecutive q heads, as repeat_interleave") {
  const int64_t Hq = 6, Hkv = 2, L = 3, S = 4, E = 2;
  std::mt19937_64 rng(5);
  auto draw = [&](int64_t count) { return widen(uniform(static_cast<size_t>(count), rng, -2, 2)); };
  const std::vector<double> qv = draw(Hq * L * E), kv = draw(Hkv * S * E), vv = draw(Hkv * S * E),
                            wv = draw(Hq * L * E);
  const Tensor q = Tensor::from_vector<double>(qv, {1, Hq, L, E}),
               k = Tensor::from_vector<double>(kv, {1, Hkv, S, E}),
               v = Tensor::from_vector<double>(vv, {1, Hkv, S, E});
  const Tensor y = nn::scaled_dot_product_attention(q, k, v, {}, std::nullopt, true, true);
  CHECK(y.shape() == Shape{1, Hq, L, E});
  // The reference sees the heads repeated by hand: q head h reads k/v head h / 3.
  std::vector<double> k_rep, v_rep;
  for (int64_t h = 0; h < Hq; ++h) {
    const auto from = static_cast<std::ptrdiff_t>(h / (Hq / Hkv) * S * E), to = from + S * E;
    k_rep.insert(k_rep.end(), kv.begin() + from, kv.begin() + to);
    v_rep.insert(v_rep.end(), vv.begin() + from, vv.begin() + to);
  }
  const test::AttentionReference want =
      test::attention_reference({Hq, L, S, E, E}, qv, k_rep, v_rep, wv, 1 / std::sqrt(2.0),
                                [](int64_t, int64_t i, int64_t j) { return j <= i; });
  check_f64(y.to_vector<double>(), want.out, "output");
  // Equal head counts repeat nothing: the same graph as without enable_gqa.
  CHECK(nn::scaled_dot_product_attention(q, q, q, {}, std::nullopt, false, true).node()->uop ==
        nn::scaled_dot_product_attention(q, q, q).node()->uop);
}

TEST_CASE("the causal mask is index arithmetic: no L x S buffer enters the graph") {
  // Built from two aranges compared, so the schedule may fuse it into the kernels that read
  // the scores (and a fused attention may skip the blocks above the diagonal); the graph's
  // only buffers are q, k and v.
  const Tensor q = Tensor::randn({1, 2, 64, 8}).realize(), k = Tensor::randn({1, 2, 64, 8}).realize(),
               v = Tensor::randn({1, 2, 64, 8}).realize();
  const Tensor y = nn::scaled_dot_product_attention(q, k, v, {}, std::nullopt, true);
  int buffers = 0, iotas = 0;
  for (const UOpPtr& u : toposort(y.node()->uop)) {
    buffers += u->op == Op::BUFFER;
    iotas += u->op == Op::IOTA;
  }
  CHECK(buffers == 3);
  CHECK(iotas >= 1);
  // The formula spelled out by the user, the weights masked again where the product reads
  // them, is the same graph (hash-consed), so is_causal costs nothing the formula would not;
  // the same mask given as a Bool mask gives the same values.
  const Tensor causal = Tensor::arange(64).unsqueeze(0) <= Tensor::arange(64).unsqueeze(1);
  const Tensor minus_inf = Tensor::scalar(-std::numeric_limits<double>::infinity()),
               zero = Tensor::scalar(0.0);
  const Tensor scores = q.matmul(k.transpose(-2, -1)) * (1 / std::sqrt(8.0));
  const Tensor formula = causal.where(causal.where(scores, minus_inf).softmax(-1), zero).matmul(v);
  CHECK(formula.node()->uop == y.node()->uop);
  const std::vector<float> got = y.to_vector<float>(),
                           masked = nn::scaled_dot_product_attention(q, k, v, causal).to_vector<float>();
  REQUIRE(got.size() == masked.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(masked[i]).epsilon(1e-6));
}

// ---- PyTorch's values and gradients, finite differences
// ---------------------------------------------------------

TEST_CASE("attention matches PyTorch: is_causal, Bool and float masks, scale, L != S, enable_gqa") {
  CHECK(test::check_torch_table(
            "scaled_dot_product_attention",
            [](const json& a, const std::vector<Tensor>& in) {
              const std::optional<double> scale =
                  a["scale"].is_null() ? std::nullopt : std::optional<double>(a["scale"].get<double>());
              return std::vector<Tensor>{nn::scaled_dot_product_attention(
                  in[0], in[1], in[2], in.size() > 3 ? in[3] : Tensor{}, scale, a["is_causal"].get<bool>(),
                  a["enable_gqa"].get<bool>())};
            },
            1e-5, attention_table()) == 19);
}

TEST_CASE(
    "attention's gradient matches central finite differences: is_causal, GQA, padding and causal masks") {
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        return nn::scaled_dot_product_attention(t[0], t[1], t[2], {}, std::nullopt, true);
      },
      {{{2, 3, 4}}, {{2, 5, 4}}, {{2, 5, 2}}});
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        return nn::scaled_dot_product_attention(t[0], t[1], t[2], {}, 0.6, true, true);
      },
      {{{1, 4, 3, 2}}, {{1, 2, 3, 2}}, {{1, 2, 3, 2}}});
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        const Tensor causal = Tensor::arange(4).unsqueeze(0) <= Tensor::arange(4).unsqueeze(1);
        return nn::scaled_dot_product_attention(t[0], t[1], t[2], padding_mask(2, 4) & causal, 1.3);
      },
      {{{2, 1, 4, 3}}, {{2, 1, 4, 3}}, {{2, 1, 4, 2}}});
}

// ---- errors
// ------------------------------------------------------------------------------------------------------

TEST_CASE("attention's bad input is an error naming the op and the shapes or dtypes") {
  const char* op = "scaled_dot_product_attention";
  const Tensor q = Tensor::ones({2, 4, 3, 8}), k = Tensor::ones({2, 4, 5, 8}), v = Tensor::ones({2, 4, 5, 6});
  check_message(
      error_of([&] {
        nn::scaled_dot_product_attention(q, k, v, Tensor::ones({3, 5}, DType::Bool), std::nullopt, true);
      }),
      {op, "[3, 5]", "is_causal"});
  check_message(error_of([&] {
                  nn::scaled_dot_product_attention(q, k, v, Tensor::ones({3, 4}, DType::Bool));
                }),
                {op, "mask [3, 4]", "[2, 4, 3, 5]"});
  // A mask with more axes than the scores would add a batch: refused, as PyTorch's in-place add does.
  check_message(error_of([&] {
                  nn::scaled_dot_product_attention(q, k, v, Tensor::zeros({7, 2, 4, 3, 5}));
                }),
                {op, "mask [7, 2, 4, 3, 5]", "[2, 4, 3, 5]"});
  check_message(error_of([&] {
                  nn::scaled_dot_product_attention(q, k, v, Tensor::ones({3, 5}, DType::Int32));
                }),
                {op, "mask", "Int32", "Bool or a float"});
  check_message(error_of([&] {
                  nn::scaled_dot_product_attention(q, Tensor::ones({3, 4, 5, 8}), v);
                }),
                {op, "[2, 4, 3, 8]", "[3, 4, 5, 8]", "[2, 4, 5, 6]", "broadcast"});
  check_message(error_of([&] {
                  nn::scaled_dot_product_attention(q, Tensor::ones({2, 4, 5, 7}), v);
                }),
                {op, "[2, 4, 3, 8]", "[2, 4, 5, 7]"});
  check_message(error_of([&] {
                  nn::scaled_dot_product_attention(q, k, Tensor::ones({2, 4, 6, 6}));
                }),
                {op, "[2, 4, 5, 8]", "[2, 4, 6, 6]"});
  check_message(error_of([&] {
                  nn::scaled_dot_product_attention(Tensor::ones({3, 8}, DType::Int32), k, v);
                }),
                {op, "Int32"});
  // Without enable_gqa, 4 query heads and 2 key heads do not broadcast; with it, 3 do not divide 4,
  // k and v must agree, and there must be a heads axis.
  const Tensor k2 = Tensor::ones({2, 2, 5, 8}), v2 = Tensor::ones({2, 2, 5, 6});
  check_message(error_of([&] { nn::scaled_dot_product_attention(q, k2, v2); }),
                {op, "[2, 2, 5, 8]", "broadcast"});
  CHECK(nn::scaled_dot_product_attention(q, k2, v2, {}, std::nullopt, false, true).shape() ==
        Shape{2, 4, 3, 6});
  check_message(error_of([&] {
                  nn::scaled_dot_product_attention(q, Tensor::ones({2, 3, 5, 8}), Tensor::ones({2, 3, 5, 6}),
                                                   {}, std::nullopt, false, true);
                }),
                {op, "enable_gqa", "[2, 3, 5, 8]", "[2, 4, 3, 8]"});
  check_message(
      error_of([&] {
        nn::scaled_dot_product_attention(q, k2, Tensor::ones({2, 1, 5, 6}), {}, std::nullopt, false, true);
      }),
      {op, "enable_gqa", "[2, 2, 5, 8]", "[2, 1, 5, 6]"});
  check_message(error_of([&] {
                  nn::scaled_dot_product_attention(Tensor::ones({3, 8}), Tensor::ones({5, 8}),
                                                   Tensor::ones({5, 6}), {}, std::nullopt, false, true);
                }),
                {op, "enable_gqa", "heads", "[3, 8]"});
}
