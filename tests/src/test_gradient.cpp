// Every gradient rule of src/gradient.cpp, and every differentiable function of
// docs/api.md, against central finite differences in Float64 on random inputs
// kept away from kinks (the kinks are test_gradient_kinks.cpp's).
#include "gradcheck.hpp"

#include "src/tensor_node.hpp"

using namespace loom;
using test::gradcheck;
using test::gradcheck1;
using test::Input;
using Ts = std::vector<Tensor>;

TEST_CASE("elementwise primitives: neg, exp2, log2, sin, sqrt, reciprocal") {
  gradcheck1([](const Tensor& x) { return -x; }, {{2, 3}});
  gradcheck1([](const Tensor& x) { return x.exp2(); }, {{2, 3}});
  gradcheck1([](const Tensor& x) { return x.log2(); }, {{2, 3}, 0.2, 3});
  gradcheck1([](const Tensor& x) { return x.sin(); }, {{2, 3}, -8, 8});
  gradcheck1([](const Tensor& x) { return x.sqrt(); }, {{2, 3}, 0.1, 4});
  gradcheck1([](const Tensor& x) { return x.reciprocal(); }, {{2, 3}, 0.3, 3});
  gradcheck1([](const Tensor& x) { return x.reciprocal(); }, {{2, 3}, -3, -0.3});
}

TEST_CASE("binary primitives: add, sub, mul, div with broadcasting") {
  const std::vector<Input> in{{{2, 3}}, {{3}, 0.5, 2}};
  gradcheck([](const Ts& x) { return x[0] + x[1]; }, in);
  gradcheck([](const Ts& x) { return x[0] - x[1]; }, in);
  gradcheck([](const Ts& x) { return x[0] * x[1]; }, in);
  gradcheck([](const Ts& x) { return x[0] / x[1]; }, in);
  gradcheck([](const Ts& x) { return x[1] / x[0]; }, {{{2, 3}, 0.5, 2}, {{3}}});
}

TEST_CASE("primitives the front end builds only inside composites: MULACC, TRUNC, COPY") {
  auto prim = [](Op op, const Ts& x) {
    std::vector<UOpPtr> src;
    for (const Tensor& t : x) src.push_back(t.node()->uop);
    return detail::make_tensor(op == Op::COPY ? UOp::make(op, src[0]->dtype, src) : alu(op, src));
  };
  gradcheck([&](const Ts& x) { return prim(Op::MULACC, x); }, {{{2, 3}}, {{2, 3}}, {{2, 3}}});
  // trunc is a step function: derivative 0 away from the integers.
  gradcheck1([&](const Tensor& x) { return prim(Op::TRUNC, {x}) + x * 2; }, {{6}, -3, 3, 0.02});
  gradcheck1([&](const Tensor& x) { return prim(Op::COPY, {x}).exp(); }, {{4}});
}

TEST_CASE("maximum and minimum away from ties, both operands") {
  gradcheck([](const Ts& x) { return x[0].maximum(x[1]); }, {{{3, 4}}, {{4}}});
  gradcheck([](const Ts& x) { return x[0].minimum(x[1]); }, {{{3, 4}}, {{3, 1}}});
  gradcheck1([](const Tensor& x) { return x.maximum(0.5); }, {{8}, -2, 2, 0.05, 0.5});
}

TEST_CASE("pow: tensor exponents, negative bases with integer exponents, scalar exponents") {
  gradcheck([](const Ts& x) { return x[0].pow(x[1]); }, {{{2, 3}, 0.2, 3}, {{2, 3}, -2, 2}});
  // x^3 on [-5, 5] (polyfit's cubic) as x*x*x, and the general POW for other whole exponents.
  gradcheck1([](const Tensor& x) { return x.pow(3.0); }, {{8}, -5, 5});
  gradcheck1([](const Tensor& x) { return x.pow(5.0); }, {{8}, -2, 2});
  gradcheck1([](const Tensor& x) { return x.pow(4.0); }, {{8}, -2, 2});
  gradcheck(
      [](const Ts& x) {
        return x[0].pow(Tensor::from_vector<double>({2, 3, -1, 4}, {4}));
      },
      {{{4}, -3, -0.5}});
  gradcheck1([](const Tensor& x) { return x.pow(2.5); }, {{6}, 0.2, 3});
  gradcheck1([](const Tensor& x) { return x.pow(-1.5); }, {{6}, 0.2, 3});
  gradcheck1([](const Tensor& x) { return x.pow(-2.0); }, {{6}, 0.2, 3});
  gradcheck1([](const Tensor& x) { return x.pow(0.5); }, {{6}, 0.2, 3});
  gradcheck1([](const Tensor& x) { return x.square(); }, {{6}});
}

TEST_CASE("where: both branches, the condition from the data") {
  gradcheck([](const Ts& x) { return where(x[0] > x[1], x[0] * 2, x[1].exp()); }, {{{3, 4}}, {{4}}});
  gradcheck([](const Ts& x) { return x[0].gt(0).where(x[0], x[1]); }, {{{6}, -2, 2, 0.05}, {{6}}});
}

TEST_CASE("cast between float dtypes passes the gradient, rounded to the source dtype") {
  // Through Float32 the finite difference would measure rounding; the cast itself is the identity.
  gradcheck1([](const Tensor& x) { return (x.cast(DType::Float32).cast(DType::Float64) * 0 + x).exp(); },
             {{5}});
  const Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3});
  const Tensor g =
      gradient((x.cast(DType::Float32) * Tensor::from_vector<float>({1, 2, 3}, {3})).sum(), {x})[0];
  CHECK(g.dtype() == DType::Float64);
  CHECK(g.to_vector<double>() == std::vector<double>{1, 2, 3});
}

TEST_CASE("transcendental composites: exp, log, sqrt, rsqrt, sin, cos, tanh, sigmoid, exp2, log2") {
  gradcheck1([](const Tensor& x) { return x.exp(); }, {{2, 4}, -4, 4});
  gradcheck1([](const Tensor& x) { return x.log(); }, {{2, 4}, 0.1, 5});
  gradcheck1([](const Tensor& x) { return x.rsqrt(); }, {{2, 4}, 0.2, 5});
  gradcheck1([](const Tensor& x) { return x.cos(); }, {{2, 4}, -8, 8});
  gradcheck1([](const Tensor& x) { return x.tanh(); }, {{2, 4}, -3, 3});
  gradcheck1([](const Tensor& x) { return x.tanh(); }, {{2, 4}, -0.5, 0.5});  // the series branch
  gradcheck1([](const Tensor& x) { return x.sigmoid(); }, {{2, 4}, -6, 6});
  gradcheck1([](const Tensor& x) { return exp(x.sin()) * log(x.cos() + 2); }, {{2, 4}, -3, 3});
}

TEST_CASE("selections: relu, abs, sign, clamp away from their kinks") {
  gradcheck1([](const Tensor& x) { return x.relu(); }, {{8}, -2, 2, 0.05});
  gradcheck1([](const Tensor& x) { return relu(x); }, {{8}, -2, 2, 0.05});
  gradcheck1([](const Tensor& x) { return x.abs(); }, {{8}, -2, 2, 0.05});
  gradcheck1([](const Tensor& x) { return x.sign() + x; }, {{8}, -2, 2, 0.05});
  gradcheck1([](const Tensor& x) { return x.clamp(-0.7, 1.1); }, {{12}, -2, 2, 0.02, 0.1});
}

TEST_CASE("floor_div and % away from their steps") {
  // x // 0.7 is piecewise constant; x % 0.7 = x - 0.7 * floor(x / 0.7) has slope 1 in x.
  const Input x{{8}, -3, 3, 0.02, 0.7};
  gradcheck1([](const Tensor& t) { return t.floor_div(0.7) + t; }, x);
  gradcheck1([](const Tensor& t) { return t % 0.7; }, x);
  // And in the divisor: d(a % b)/db = -floor(a / b).
  gradcheck([](const Ts& t) { return t[0] % t[1]; },
            {{{4}, 0, 0, -1, 1, {1.3, -2.6, 3.4, 0.45}}, {{4}, 0, 0, -1, 1, {0.7, 0.9, -1.1, 0.3}}});
}

TEST_CASE("reductions: sum, mean, prod, max, min over axes and all, keepdim or not") {
  gradcheck1([](const Tensor& x) { return x.sum(); }, {{3, 4}});
  gradcheck1([](const Tensor& x) { return x.sum(1); }, {{3, 4}});
  gradcheck1([](const Tensor& x) { return x.sum({0, 2}, true); }, {{2, 3, 2}});
  gradcheck1([](const Tensor& x) { return x.mean(0); }, {{3, 4}});
  gradcheck1([](const Tensor& x) { return x.mean(); }, {{3, 4}});
  gradcheck1([](const Tensor& x) { return x.prod(1); }, {{3, 4}, 0.3, 2});
  gradcheck1([](const Tensor& x) { return x.prod(); }, {{2, 3}, -2, 2, 0.1});
  gradcheck1([](const Tensor& x) { return x.max(1); }, {{3, 4}});
  gradcheck1([](const Tensor& x) { return x.max(); }, {{3, 4}});
  gradcheck1([](const Tensor& x) { return x.min(0, true); }, {{3, 4}});
  gradcheck1([](const Tensor& x) { return x.min(); }, {{3, 4}});
}

TEST_CASE("softmax, log_softmax, logsumexp on each axis") {
  for (int axis : {0, 1, -1}) {
    gradcheck1([axis](const Tensor& x) { return x.softmax(axis); }, {{3, 4}, -3, 3});
    gradcheck1([axis](const Tensor& x) { return x.log_softmax(axis); }, {{3, 4}, -3, 3});
    gradcheck1([axis](const Tensor& x) { return x.logsumexp(axis); }, {{3, 4}, -3, 3});
  }
}

TEST_CASE("movement: reshape, permute, transpose, expand, pad, shrink, flip, squeeze, unsqueeze, flatten") {
  gradcheck1(
      [](const Tensor& x) {
        return x.reshape({4, 3}) * Tensor::arange(3).cast(DType::Float64);
      },
      {{2, 6}});
  gradcheck1([](const Tensor& x) { return x.permute({2, 0, 1}).reshape({-1}).exp(); }, {{2, 3, 2}});
  gradcheck1([](const Tensor& x) { return x.transpose().exp(); }, {{2, 3}});
  gradcheck1([](const Tensor& x) { return x.expand({4, 2, 3}).exp(); }, {{2, 1}});
  gradcheck1([](const Tensor& x) { return x.pad({{1, 2}, {0, 1}}).exp(); }, {{2, 3}});
  gradcheck1([](const Tensor& x) { return x.pad({{1, 0}, {2, 1}}, 3.5).exp(); }, {{2, 3}});
  gradcheck1([](const Tensor& x) { return x.shrink({{1, 3}, {0, 2}}).exp(); }, {{3, 4}});
  gradcheck1([](const Tensor& x) { return x.flip({0, 1}) * x; }, {{3, 4}});
  gradcheck1([](const Tensor& x) { return x.unsqueeze(1).squeeze(1).flatten().exp(); }, {{3, 4}});
}

TEST_CASE("slice with a step, cat and stack") {
  gradcheck1([](const Tensor& x) { return x.slice(1, 1, 7, 2).exp(); }, {{2, 8}});
  gradcheck([](const Ts& x) { return cat({x[0], x[1].exp(), x[0]}, 1); }, {{{2, 3}}, {{2, 2}}});
  gradcheck([](const Ts& x) { return stack({x[0], x[1] * x[0]}, 0); }, {{{2, 3}}, {{2, 3}}});
}

TEST_CASE("gather, index_select and one_hot products are differentiable in the values") {
  const Tensor idx = Tensor::from_vector<int32_t>({2, 0, 1, 2, 2, 1}, {2, 3});
  gradcheck1([&](const Tensor& x) { return x.gather(1, idx); }, {{2, 4}});
  gradcheck1(
      [&](const Tensor& x) {
        return x.gather(0, Tensor::from_vector<int64_t>({1, 0, 1, 1}, {2, 2}));
      },
      {{2, 3}});
  const Tensor rows = Tensor::from_vector<int64_t>({3, 0, 3, 1}, {4});
  gradcheck1([&](const Tensor& x) { return x.index_select(0, rows).exp(); }, {{4, 3}});
  gradcheck1([&](const Tensor& x) { return x.index_select(1, rows.slice(0, 0, 2)); }, {{2, 4}});
  const Tensor labels = Tensor::from_vector<int32_t>({1, 0, 2}, {3});
  gradcheck1(
      [&](const Tensor& x) { return (x.log_softmax(1) * labels.one_hot(3).cast(DType::Float64)).sum(1); },
      {{3, 3}});
}

TEST_CASE("matmul: 2-D, vector operands and broadcast batches") {
  gradcheck([](const Ts& x) { return x[0].matmul(x[1]); }, {{{3, 4}}, {{4, 2}}});
  gradcheck([](const Ts& x) { return matmul(x[0], x[1]); }, {{{4}}, {{4, 2}}});
  gradcheck([](const Ts& x) { return x[0].matmul(x[1]); }, {{{3, 4}}, {{4}}});
  gradcheck([](const Ts& x) { return x[0].matmul(x[1]); }, {{{2, 1, 2, 3}}, {{3, 3, 2}}});
}

TEST_CASE("clone, contiguous and a realized intermediate pass the gradient") {
  gradcheck1([](const Tensor& x) { return x.clone().exp() * x.contiguous(); }, {{5}});
  gradcheck1(
      [](const Tensor& x) {
        Tensor h = (x * 3).exp();
        h.realize();  // read before the loss is built: the gradient flows through its graph
        return h * x;
      },
      {{5}});
}

TEST_CASE("a deep composite: a two-layer MLP with cross-entropy built from tensor ops") {
  const Tensor labels = Tensor::from_vector<int32_t>({1, 0, 2, 1}, {4});
  gradcheck(
      [&](const Ts& p) {
        const Tensor h = (p[0].matmul(p[1]) + p[2]).relu();
        const Tensor logits = h.matmul(p[3]);
        return -(logits.log_softmax(1) * labels.one_hot(3).cast(DType::Float64)).sum(1).mean();
      },
      {{{4, 2}}, {{2, 5}}, {{5}}, {{5, 3}}});
}

// ---- against hand-derived formulas --------------------------------------------------------------
namespace {
std::vector<double> draw_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-2, 2);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}
void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element ", i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12).scale(1e-12));
  }
}
constexpr int64_t R = 3, C = 5;  // rows and columns of the row-wise formulas
}  // namespace

TEST_CASE("formula: sum and mean give the weights, spread over the summed axes") {
  const auto xv = draw_values(R * C, 1), wv = draw_values(R, 2);
  const Tensor x = Tensor::from_vector<double>(xv, {R, C}), w = Tensor::from_vector<double>(wv, {R});
  std::vector<double> want_sum, want_mean;
  for (int64_t i = 0; i < R * C; ++i) {
    want_sum.push_back(wv[i / C]);
    want_mean.push_back(wv[i / C] / C);
  }
  check_close(gradient((x.sum(1) * w).sum(), {x})[0].to_vector<double>(), want_sum);
  check_close(gradient((x.mean(1) * w).sum(), {x})[0].to_vector<double>(), want_mean);
  check_close(gradient(x.mean(), {x})[0].to_vector<double>(), std::vector<double>(R * C, 1.0 / (R * C)));
}

TEST_CASE("formula: matmul, dA = G B^T and dB = A^T G") {
  constexpr int64_t M = 3, K = 4, N = 2;
  const auto av = draw_values(M * K, 3), bv = draw_values(K * N, 4), gv = draw_values(M * N, 5);
  const Tensor a = Tensor::from_vector<double>(av, {M, K}), b = Tensor::from_vector<double>(bv, {K, N});
  const Tensor g = Tensor::from_vector<double>(gv, {M, N});
  const auto grads = gradient((a.matmul(b) * g).sum(), {a, b});
  std::vector<double> da(M * K, 0), db(K * N, 0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        da[m * K + k] += gv[m * N + n] * bv[k * N + n];
        db[k * N + n] += av[m * K + k] * gv[m * N + n];
      }
  check_close(grads[0].to_vector<double>(), da);
  check_close(grads[1].to_vector<double>(), db);
}

namespace {
// Row-wise formulas over [R, C]: y = f(row), L = sum(y * w); returns dL/dx.
std::vector<double> softmax_rows(const std::vector<double>& x) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < R; ++r) {
    double m = -1e300, s = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, x[r * C + c]);
    for (int64_t c = 0; c < C; ++c) s += std::exp(x[r * C + c] - m);
    for (int64_t c = 0; c < C; ++c) y[r * C + c] = std::exp(x[r * C + c] - m) / s;
  }
  return y;
}
}  // namespace

TEST_CASE("formula: softmax, dx = y (w - sum(y w)); log_softmax, dx = w - softmax sum(w)") {
  const auto xv = draw_values(R * C, 6), wv = draw_values(R * C, 7);
  const Tensor x = Tensor::from_vector<double>(xv, {R, C}), w = Tensor::from_vector<double>(wv, {R, C});
  const auto y = softmax_rows(xv);
  std::vector<double> d_soft(R * C), d_log(R * C);
  for (int64_t r = 0; r < R; ++r) {
    double yw = 0, ws = 0;
    for (int64_t c = 0; c < C; ++c) {
      yw += y[r * C + c] * wv[r * C + c];
      ws += wv[r * C + c];
    }
    for (int64_t c = 0; c < C; ++c) {
      d_soft[r * C + c] = y[r * C + c] * (wv[r * C + c] - yw);
      d_log[r * C + c] = wv[r * C + c] - y[r * C + c] * ws;
    }
  }
  check_close(gradient((x.softmax(1) * w).sum(), {x})[0].to_vector<double>(), d_soft);
  check_close(gradient((x.log_softmax(1) * w).sum(), {x})[0].to_vector<double>(), d_log);
}

TEST_CASE("formula: layer norm as tensor ops, dx = (w - mean(w) - y mean(w y)) / sigma") {
  const double eps = 1e-5;
  const auto xv = draw_values(R * C, 8), wv = draw_values(R * C, 9);
  const Tensor x = Tensor::from_vector<double>(xv, {R, C}), w = Tensor::from_vector<double>(wv, {R, C});
  const Tensor centered = x - x.mean(1, true);
  const Tensor y = centered * (centered.square().mean(1, true) + eps).rsqrt();
  std::vector<double> want(R * C);
  for (int64_t r = 0; r < R; ++r) {
    double mean = 0, var = 0, mw = 0, mwy = 0;
    for (int64_t c = 0; c < C; ++c) mean += xv[r * C + c] / C;
    for (int64_t c = 0; c < C; ++c) var += (xv[r * C + c] - mean) * (xv[r * C + c] - mean) / C;
    const double sigma = std::sqrt(var + eps);
    for (int64_t c = 0; c < C; ++c) {
      const double yc = (xv[r * C + c] - mean) / sigma;
      mw += wv[r * C + c] / C;
      mwy += wv[r * C + c] * yc / C;
    }
    for (int64_t c = 0; c < C; ++c)
      want[r * C + c] = (wv[r * C + c] - mw - (xv[r * C + c] - mean) / sigma * mwy) / sigma;
  }
  check_close(gradient((y * w).sum(), {x})[0].to_vector<double>(), want);
}

TEST_CASE("formula: the L2 norm, dx = x / |x|") {
  const auto xv = draw_values(R * C, 10);
  const Tensor x = Tensor::from_vector<double>(xv, {R * C});
  double sq = 0;
  for (double v : xv) sq += v * v;
  std::vector<double> want;
  for (double v : xv) want.push_back(v / std::sqrt(sq));
  check_close(gradient(x.square().sum().sqrt(), {x})[0].to_vector<double>(), want);
}

TEST_CASE("formula: Float32 exp and tanh, whose forms differ from Float64's: dx = y w and (1 - y^2) w") {
  const std::vector<float> xv{-3.5f, -0.75f, -1e-3f, 0.0f, 0.25f, 0.5443f, 2.0f, 9.0f};
  const std::vector<float> wv{1.0f, -2.0f, 0.5f, 3.0f, -1.0f, 0.25f, 2.0f, -0.5f};
  const Tensor x = Tensor::from_vector<float>(xv, {8}), w = Tensor::from_vector<float>(wv, {8});
  const auto dexp = gradient((x.exp() * w).sum(), {x})[0].to_vector<float>();
  const auto dtanh = gradient((x.tanh() * w).sum(), {x})[0].to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) {
    const double e = std::exp(double{xv[i]}), t = std::tanh(double{xv[i]});
    CHECK(dexp[i] == doctest::Approx(e * wv[i]).epsilon(1e-6));
    CHECK(dtanh[i] == doctest::Approx((1 - t * t) * wv[i]).epsilon(1e-6));
  }
}

// Each derivative as the gradient's rule computes it, g (here 3) first, so the floats agree.
struct UnaryNode {
  Op op;
  Tensor (Tensor::*method)() const;
  float (*derivative)(float y, float g);
};
const UnaryNode kUnaryNodes[] = {
    {Op::EXP, &Tensor::exp, [](float y, float g) { return g * y; }},
    {Op::SIGMOID, &Tensor::sigmoid, [](float y, float g) { return g * y * (1.0f - y); }},
    {Op::TANH, &Tensor::tanh, [](float y, float g) { return g * (1.0f - y * y); }},
};

TEST_CASE(
    "Float32 exp, sigmoid and tanh are one node each (codegen lowers them), with their own derivatives") {
  const Tensor x = Tensor::from_vector<float>({0.5f, -1.0f, 4.0f, 0.0f}, {4});
  for (const UnaryNode& u : kUnaryNodes) {
    CAPTURE(op_name(u.op));
    const Tensor y = (x.*u.method)();
    CHECK(y.node()->uop->op == u.op);
    CHECK(y.node()->uop->src[0] == x.node()->uop);
    const auto dx = gradient((y * 3.0f).sum(), {x})[0].to_vector<float>();
    const auto yv = y.to_vector<float>();
    for (size_t i = 0; i < dx.size(); ++i) CHECK(dx[i] == u.derivative(yv[i], 3.0f));
  }
  CHECK(x.sigmoid().to_vector<float>()[3] == 0.5f);
}
