// loom::nn: layers, losses, attention and initialisers against hand-computed
// values, their errors, and their gradients against hand-derived formulas and
// central finite differences in Float64.
#include "check.hpp"
#include "gradcheck.hpp"
#include "support/error_message.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <numeric>

using namespace loom;
using test::check_message;
using test::check_values;
using test::error_of;
using test::make;
using test::values;

namespace {

std::vector<double> random_values(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])),
                  "element " << i << ": got " << got[i] << ", expected " << want[i]);
}

// Every value of t lies in [lo, hi], and they spread over it (not all equal).
void check_within(const Tensor& t, double lo, double hi) {
  const auto v = values(t);
  const auto [mn, mx] = std::minmax_element(v.begin(), v.end());
  CHECK(*mn >= lo);
  CHECK(*mx <= hi);
  CHECK(*mx - *mn > 0.5 * (hi - lo));
}

}  // namespace

// ---- layers: values ------------------------------------------------------------------------

TEST_CASE("Linear computes x W^T + b, with PyTorch's default init bounds and leaf parameters") {
  manual_seed(3);
  nn::Linear fc(4, 3);
  CHECK(fc.weight.shape() == Shape{3, 4});
  CHECK(fc.bias.shape() == Shape{3});
  CHECK(fc.weight.requires_grad());
  CHECK(fc.bias.requires_grad());
  check_within(fc.weight, -0.5, 0.5);  // 1/sqrt(in) = 0.5
  check_within(fc.bias, -0.5, 0.5);
  const auto w = values(fc.weight), b = values(fc.bias);
  const std::vector<double> x{1, -2, 0.5, 3, 0, 1, -1, 2};  // [2, 4]
  std::vector<double> want;
  for (int r = 0; r < 2; ++r)
    for (int o = 0; o < 3; ++o) {
      double s = b[o];
      for (int i = 0; i < 4; ++i) s += x[r * 4 + i] * w[o * 4 + i];
      want.push_back(s);
    }
  check_close(values(fc(make(DType::Float32, x, {2, 4}))), want, 1e-6);

  nn::Linear plain(4, 3, false);
  CHECK(!plain.bias.defined());
  CHECK(plain.parameters().size() == 1);
  const auto named = fc.named_parameters("fc1");
  REQUIRE(named.size() == 2);
  CHECK(named[0].first == "fc1.weight");
  CHECK(named[1].first == "fc1.bias");
  CHECK(named[0].second.node() == fc.weight.node());  // the parameter itself, not a copy
  CHECK(fc.named_parameters()[1].first == "bias");
}

TEST_CASE("Linear applies to any leading axes") {
  nn::Linear fc(2, 5);
  const Tensor x = Tensor::randn({3, 4, 2});
  const Tensor y = fc(x);
  CHECK(y.shape() == Shape{3, 4, 5});
  check_close(values(y), values(fc(x.reshape({12, 2})).reshape({3, 4, 5})), 1e-6);
}

TEST_CASE("Embedding picks rows of its N(0, 1) table for any index shape, Int32 or Int64") {
  manual_seed(5);
  nn::Embedding emb(10, 3);
  CHECK(emb.weight.shape() == Shape{10, 3});
  const auto w = values(emb.weight);
  double mean = std::accumulate(w.begin(), w.end(), 0.0) / 30;
  CHECK(std::abs(mean) < 0.6);
  const Tensor idx = make(DType::Int64, {4, 0, 9, 4}, {2, 2});
  const Tensor y = emb(idx);
  CHECK(y.shape() == Shape{2, 2, 3});
  std::vector<double> want;
  for (int i : {4, 0, 9, 4})
    for (int j = 0; j < 3; ++j) want.push_back(w[i * 3 + j]);
  CHECK(values(y) == want);
  CHECK(values(emb(make(DType::Int32, {9}, {1}))) == std::vector<double>(w.begin() + 27, w.end()));
}

TEST_CASE("LayerNorm and RMSNorm normalise the last axis like PyTorch") {
  const std::vector<double> x{1, 2, 3, 4, -1, 0, 0, 5};  // [2, 4]
  nn::LayerNorm ln(4);
  std::vector<double> want;
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < 4; ++i) mean += x[r * 4 + i] / 4;
    for (int i = 0; i < 4; ++i) var += std::pow(x[r * 4 + i] - mean, 2) / 4;
    for (int i = 0; i < 4; ++i) want.push_back((x[r * 4 + i] - mean) / std::sqrt(var + 1e-5));
  }
  check_close(values(ln(make(DType::Float32, x, {2, 4}))), want, 2e-6);
  CHECK(values(ln.weight) == std::vector<double>(4, 1));
  CHECK(values(ln.bias) == std::vector<double>(4, 0));

  nn::RMSNorm rms(4, 1e-6);
  want.clear();
  for (int r = 0; r < 2; ++r) {
    double ms = 0;
    for (int i = 0; i < 4; ++i) ms += x[r * 4 + i] * x[r * 4 + i] / 4;
    for (int i = 0; i < 4; ++i) want.push_back(x[r * 4 + i] / std::sqrt(ms + 1e-6));
  }
  check_close(values(rms(make(DType::Float32, x, {2, 4}))), want, 2e-6);
  CHECK(nn::LayerNorm(4, 1e-5, false).parameters().empty());
  CHECK(nn::RMSNorm(4).named_parameters("n")[0].first == "n.weight");
}

// ---- functions: values -------------------------------------------------------------------------

TEST_CASE("scaled_dot_product_attention: softmax(q k^T * scale + mask) v, Bool and float masks") {
  const std::vector<double> q{1, 0, 0, 1}, k{1, 0, 0, 1, 1, 1},
      v{1, 2, 3, 4, 5, 6};  // q [2,2], k [3,2], v [3,2]
  auto expected = [&](double scale, const std::vector<double>& add) {
    std::vector<double> out;
    for (int i = 0; i < 2; ++i) {
      double s[3], total = 0;
      for (int j = 0; j < 3; ++j) {
        s[j] = std::exp((q[i * 2] * k[j * 2] + q[i * 2 + 1] * k[j * 2 + 1]) * scale + add[i * 3 + j]);
        total += s[j];
      }
      for (int c = 0; c < 2; ++c) {
        double a = 0;
        for (int j = 0; j < 3; ++j) a += s[j] / total * v[j * 2 + c];
        out.push_back(a);
      }
    }
    return out;
  };
  const Tensor tq = make(DType::Float32, q, {2, 2}), tk = make(DType::Float32, k, {3, 2}),
               tv = make(DType::Float32, v, {3, 2});
  check_close(values(nn::scaled_dot_product_attention(tq, tk, tv)),
              expected(1 / std::sqrt(2.0), {0, 0, 0, 0, 0, 0}), 1e-6);
  const Tensor causal = make(DType::Bool, {1, 0, 0, 1, 1, 0}, {2, 3});
  check_close(values(nn::scaled_dot_product_attention(tq, tk, tv, causal, 2.0)),
              expected(2.0, {0, -INFINITY, -INFINITY, 0, 0, -INFINITY}), 1e-6);
  const std::vector<double> bias{0.5, -1, 0, 0, 2, -0.5};
  check_close(values(nn::scaled_dot_product_attention(tq, tk, tv, make(DType::Float32, bias, {2, 3}))),
              expected(1 / std::sqrt(2.0), bias), 1e-6);
  // Leading axes broadcast: a batch of 2 heads against shared k and v.
  const Tensor y = nn::scaled_dot_product_attention(tq.unsqueeze(0).expand({2, 2, 2}), tk, tv);
  CHECK(y.shape() == Shape{2, 2, 2});
}

TEST_CASE("cross_entropy is the mean of -log softmax at the label; mse the mean squared difference") {
  const std::vector<double> logits{2, 1, 0.5, -1, 0, 3};  // [2, 3]
  const Tensor l = make(DType::Float32, logits, {2, 3});
  double want = 0;
  const int labels[] = {0, 2};
  for (int r = 0; r < 2; ++r) {
    double lse = 0;
    for (int c = 0; c < 3; ++c) lse += std::exp(logits[r * 3 + c]);
    want -= (logits[r * 3 + labels[r]] - std::log(lse)) / 2;
  }
  check_close(values(nn::cross_entropy(l, make(DType::Int32, {0, 2}, {2}))), {want}, 1e-6);
  check_close(values(nn::cross_entropy(l, make(DType::Int64, {0, 2}, {2}))), {want}, 1e-6);
  CHECK(nn::cross_entropy(l, make(DType::Int32, {0, 2}, {2})).shape() == Shape{});
  check_values(nn::mse(make(DType::Float32, {1, 2, 3}, {3}), make(DType::Float32, {1, 0, 7}, {3})),
               {20.0 / 3}, 2);
  // PyTorch broadcasts the target (with a warning): [3, 1] against [3] is a [3, 3] difference.
  CHECK(nn::mse(Tensor::ones({3, 1}), Tensor::zeros({3})).item<float>() == 1.0f);
}

// ---- errors ---------------------------------------------------------------------------------------

TEST_CASE("a realized label or index out of range, and bad shapes or dtypes, are errors naming them") {
  const Tensor logits = Tensor::zeros({3, 4});
  check_message(error_of([&] {
                  nn::cross_entropy(logits, make(DType::Int32, {0, 4, 1}, {3}));
                }),
                {"cross_entropy", "labels", "value 4", "position 1", "[0, 4)"});
  check_message(error_of([&] {
                  nn::cross_entropy(logits, make(DType::Int64, {-1, 0, 1}, {3}));
                }),
                {"cross_entropy", "value -1", "position 0"});
  check_message(error_of([&] {
                  nn::cross_entropy(logits, make(DType::Int32, {0, 1}, {2}));
                }),
                {"cross_entropy", "[3, 4]", "[2]"});
  check_message(error_of([&] {
                  nn::cross_entropy(logits, make(DType::Float32, {0, 1, 2}, {3}));
                }),
                {"cross_entropy", "Float32", "Int32 or Int64"});
  check_message(error_of([&] {
                  nn::cross_entropy(Tensor::zeros({3, 4}, DType::Int32), Tensor::zeros({3}, DType::Int32));
                }),
                {"cross_entropy", "Int32"});
  // A lazy label cannot be read without running its graph: no error, and it matches no class.
  CHECK(error_of([&] { nn::cross_entropy(logits, make(DType::Int32, {0, 4, 1}, {3}) + 0); }).empty());

  nn::Embedding emb(5, 2);
  check_message(error_of([&] { emb(make(DType::Int32, {1, 5}, {2})); }), {"Embedding", "value 5", "[0, 5)"});
  check_message(error_of([&] { emb(make(DType::Float32, {1}, {1})); }), {"Embedding", "Float32"});
  nn::Linear fc(3, 2);
  check_message(error_of([&] { fc(Tensor::ones({2, 4})); }), {"Linear", "[2, 4]", "3"});
  nn::LayerNorm ln(3);
  check_message(error_of([&] { ln(Tensor::ones({3, 2})); }), {"LayerNorm", "[3, 2]", "3"});
  check_message(error_of([&] { nn::RMSNorm(0); }), {"RMSNorm", "positive"});
  check_message(
      error_of([&] {
        nn::scaled_dot_product_attention(Tensor::ones({2, 3}), Tensor::ones({2, 4}), Tensor::ones({2, 4}));
      }),
      {"scaled_dot_product_attention", "[2, 3]", "[2, 4]"});
  Tensor vec = Tensor::zeros({3});
  check_message(error_of([&] { nn::kaiming_uniform_(vec); }), {"kaiming_uniform_", "2 dimensions", "[3]"});
  Tensor ints = Tensor::zeros({2, 2}, DType::Int32);
  check_message(error_of([&] { nn::normal_(ints); }), {"normal_", "Int32"});
}

TEST_CASE("layers and losses reject an input whose dtype differs from their parameters, naming both dtypes") {
  // As PyTorch: UInt8 pixels or Float64 data into Float32 weights is an error, never a silent promotion.
  nn::Linear fc(3, 2);
  check_message(error_of([&] {
                  fc(Tensor::ones({2, 3}, DType::UInt8));
                }),
                {"Linear", "input", "UInt8", "weight", "Float32", ".cast(DType::Float32)"});
  check_message(error_of([&] {
                  fc(Tensor::ones({2, 3}, DType::Float64));
                }),
                {"Linear", "input", "Float64", "weight", "Float32"});
  CHECK(fc(Tensor::ones({2, 3}, DType::UInt8).cast(DType::Float32)).dtype() == DType::Float32);
  nn::Linear fc64 = fc;  // Float64 parameters take Float64 inputs, and refuse Float32 ones
  fc64.weight = fc.weight.cast(DType::Float64);
  fc64.bias = fc.bias.cast(DType::Float64);
  CHECK(fc64(Tensor::ones({2, 3}, DType::Float64)).dtype() == DType::Float64);
  check_message(error_of([&] { fc64(Tensor::ones({2, 3})); }), {"Linear", "Float32", "Float64"});

  nn::LayerNorm ln(3);
  check_message(error_of([&] {
                  ln(Tensor::ones({2, 3}, DType::Float64));
                }),
                {"LayerNorm", "input", "Float64", "weight", "Float32"});
  CHECK(nn::LayerNorm(3, 1e-5, false)(Tensor::ones({2, 3}, DType::Float64)).dtype() == DType::Float64);
  nn::RMSNorm rms(3);
  check_message(error_of([&] {
                  rms(Tensor::ones({2, 3}, DType::Float64));
                }),
                {"RMSNorm", "input", "Float64", "weight", "Float32"});

  check_message(error_of([&] { nn::mse(Tensor::ones({3}), Tensor::ones({3}, DType::Float64)); }),
                {"mse", "target", "Float64", "pred", "Float32"});
  check_message(error_of([&] { nn::mse(Tensor::ones({3}), Tensor::ones({3}, DType::Int64)); }),
                {"mse", "target", "Int64", "pred", "Float32"});
  check_message(error_of([&] { nn::mse(Tensor::ones({3}), Tensor()); }), {"mse", "target", "undefined"});

  const Tensor q = Tensor::ones({2, 2}), k64 = Tensor::ones({3, 2}, DType::Float64);
  check_message(error_of([&] {
                  nn::scaled_dot_product_attention(q, k64, Tensor::ones({3, 2}));
                }),
                {"scaled_dot_product_attention", "k", "Float64", "q", "Float32"});
  check_message(error_of([&] {
                  nn::scaled_dot_product_attention(q, Tensor::ones({3, 2}), Tensor::ones({3, 2}),
                                                   Tensor::zeros({2, 3}, DType::Float64));
                }),
                {"scaled_dot_product_attention", "mask", "Float64", "q", "Float32"});
  // cross_entropy's labels are class indices: integers beside float logits, as in PyTorch.
  CHECK(nn::cross_entropy(Tensor::zeros({2, 3}, DType::Float64), make(DType::Int64, {0, 2}, {2})).dtype() ==
        DType::Float64);
}

// ---- initialisers -------------------------------------------------------------------------------

TEST_CASE("initialisers follow torch.nn.init's bounds and gains, and replace the values now") {
  manual_seed(9);
  CHECK(nn::calculate_gain(nn::Nonlinearity::ReLU) == doctest::Approx(std::sqrt(2.0)));
  CHECK(nn::calculate_gain(nn::Nonlinearity::Tanh) == doctest::Approx(5.0 / 3));
  CHECK(nn::calculate_gain(nn::Nonlinearity::LeakyReLU, std::sqrt(5.0)) ==
        doctest::Approx(std::sqrt(1.0 / 3)));
  Tensor w = Tensor::zeros({64, 16, 2, 2});  // fan_in 64, fan_out 256
  nn::kaiming_uniform_(w, 0, nn::FanMode::FanIn, nn::Nonlinearity::ReLU);
  check_within(w, -std::sqrt(6.0 / 64), std::sqrt(6.0 / 64));
  nn::kaiming_uniform_(w, 0, nn::FanMode::FanOut, nn::Nonlinearity::ReLU);
  check_within(w, -std::sqrt(6.0 / 256), std::sqrt(6.0 / 256));
  nn::xavier_uniform_(w, 2);
  check_within(w, -2 * std::sqrt(6.0 / 320), 2 * std::sqrt(6.0 / 320));
  Tensor big = Tensor::zeros({200, 100});
  nn::normal_(big, 3, 0.5);
  const auto v = values(big);
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean) / static_cast<double>(v.size());
  CHECK(mean == doctest::Approx(3).epsilon(0.01));
  CHECK(std::sqrt(var) == doctest::Approx(0.5).epsilon(0.02));
  nn::uniform_(big, -3, -2);
  check_within(big, -3, -2);
  // A parameter keeps being a leaf after its values are replaced.
  nn::Linear fc(4, 4);
  nn::xavier_uniform_(fc.weight);
  CHECK(fc.weight.requires_grad());
  check_within(fc.weight, -std::sqrt(6.0 / 8), std::sqrt(6.0 / 8));
}

// ---- gradients: hand-derived formulas ------------------------------------------------------------

TEST_CASE("cross_entropy's gradient is (softmax(logits) - one_hot(labels)) / N") {
  const int n = 4, c = 5;
  const auto lv = random_values(n * c, 21, -3, 3);
  const std::vector<double> labels{3, 0, 4, 3};
  Tensor logits = make(DType::Float64, lv, {n, c}).requires_grad_();
  nn::cross_entropy(logits, make(DType::Int32, labels, {n})).backward();
  std::vector<double> want;
  for (int r = 0; r < n; ++r) {
    double total = 0;
    for (int k = 0; k < c; ++k) total += std::exp(lv[r * c + k]);
    for (int k = 0; k < c; ++k) want.push_back((std::exp(lv[r * c + k]) / total - (k == labels[r])) / n);
  }
  check_close(values(logits.grad()), want, 1e-12);
}

TEST_CASE("LayerNorm's gradients are the textbook formulas") {
  // With xh = (x - mean) / s, s = sqrt(var + eps), upstream g and gh = g * w, per row:
  // dx = (gh - mean(gh) - xh * mean(gh * xh)) / s,  dw = sum over rows of g * xh,  db = sum of g.
  const int rows = 3, d = 6;
  const auto xv = random_values(rows * d, 31, -2, 2), gv = random_values(rows * d, 32),
             wv = random_values(d, 33);
  nn::LayerNorm ln(d);
  ln.weight = make(DType::Float64, wv, {d}).requires_grad_();
  ln.bias = make(DType::Float64, random_values(d, 34), {d}).requires_grad_();
  Tensor x = make(DType::Float64, xv, {rows, d}).requires_grad_();
  (ln(x) * make(DType::Float64, gv, {rows, d})).sum().backward();
  std::vector<double> dx, dw(d, 0), db(d, 0);
  for (int r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < d; ++i) mean += xv[r * d + i] / d;
    for (int i = 0; i < d; ++i) var += std::pow(xv[r * d + i] - mean, 2) / d;
    const double s = std::sqrt(var + 1e-5);
    double mgh = 0, mghxh = 0;
    for (int i = 0; i < d; ++i) {
      const double xh = (xv[r * d + i] - mean) / s, gh = gv[r * d + i] * wv[i];
      mgh += gh / d;
      mghxh += gh * xh / d;
      dw[i] += gv[r * d + i] * xh;
      db[i] += gv[r * d + i];
    }
    for (int i = 0; i < d; ++i)
      dx.push_back((gv[r * d + i] * wv[i] - mgh - (xv[r * d + i] - mean) / s * mghxh) / s);
  }
  check_close(values(x.grad()), dx, 1e-10);
  check_close(values(ln.weight.grad()), dw, 1e-10);
  check_close(values(ln.bias.grad()), db, 1e-10);
}

// ---- gradients: finite differences (layers in Float64 by swapping in Float64 parameters) ----------

TEST_CASE("Linear, Embedding, LayerNorm and RMSNorm match central finite differences") {
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        nn::Linear fc(3, 4);
        fc.weight = t[1];
        fc.bias = t[2];
        return fc(t[0]);
      },
      {{{2, 3}}, {{4, 3}}, {{4}}});
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        nn::Embedding emb(5, 3);
        emb.weight = t[0];
        return emb(test::make(DType::Int32, {4, 0, 4, 2}, {2, 2}));
      },
      {{{5, 3}}});
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        nn::LayerNorm ln(5);
        ln.weight = t[1];
        ln.bias = t[2];
        return ln(t[0]);
      },
      {{{3, 5}}, {{5}}, {{5}}});
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        nn::RMSNorm rms(5);
        rms.weight = t[1];
        return rms(t[0]);
      },
      {{{3, 5}}, {{5}}});
}

TEST_CASE("attention, cross_entropy and mse match central finite differences") {
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        const Tensor causal = Tensor::arange(4).unsqueeze(0) <= Tensor::arange(3).unsqueeze(1);  // [3, 4]
        return nn::scaled_dot_product_attention(t[0], t[1], t[2], causal);
      },
      {{{2, 3, 4}}, {{2, 4, 4}}, {{2, 4, 2}}});
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        return nn::scaled_dot_product_attention(t[0], t[1], t[2], t[3], 0.7);
      },
      {{{3, 2}}, {{4, 2}}, {{4, 3}}, {{3, 4}}});
  test::gradcheck1(
      [](const Tensor& l) {
        return nn::cross_entropy(l, test::make(DType::Int32, {1, 0, 2}, {3}));
      },
      {{3, 4}, -3, 3});
  test::gradcheck([](const std::vector<Tensor>& t) { return nn::mse(t[0], t[1]); }, {{{2, 3}}, {{2, 3}}});
}

TEST_CASE("a layer's named parameters round-trip through a checkpoint into another layer") {
  manual_seed(4);
  nn::Linear a(3, 2), b(3, 2);
  const auto path =
      std::filesystem::temp_directory_path() / fmt::format("loom_test_{}_linear.safetensors", ::getpid());
  save(path, a.named_parameters("fc"));
  const auto state = load(path);
  std::filesystem::remove(path);
  {
    NoGrad no_grad;
    for (auto& [name, p] : b.named_parameters("fc")) p.assign(state.at(name));
  }
  const Tensor x = Tensor::randn({4, 3});
  CHECK(values(b(x)) == values(a(x)));
  CHECK(b.weight.requires_grad());
}
