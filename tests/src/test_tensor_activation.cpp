// erf, gelu, silu, softplus, leaky_relu, var/std, triu/tril and masked_fill against a table of
// PyTorch's values and Float64 gradients (tests/data/ops_table.json, made once by
// tests/data/make_ops_table.py), float64 finite differences, and their errors.
#include "gradcheck.hpp"
#include "src/tensor_node.hpp"
#include "torch_table.hpp"

#include <doctest/doctest.h>
#include <loom/loom.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <numbers>
#include <set>
#include <string>

using namespace loom;
using nlohmann::json;
using test::table_number;
using test::table_tensor;
using test::table_values;

namespace {

Tensor run_op(const json& c, const Tensor& x) {
  const std::string op = c["op"];
  const json& a = c["args"];
  if (op == "erf") return x.erf();
  if (op == "gelu") return x.gelu(a["approximate"].get<std::string>());
  if (op == "silu") return x.silu();
  if (op == "softplus") return x.softplus(a["beta"], a["threshold"]);
  if (op == "leaky_relu") return x.leaky_relu(a["negative_slope"]);
  if (op == "var" || op == "std") {
    const auto dims = a["dims"].get<std::vector<int>>();
    return op == "var" ? x.var(dims, a["correction"], a["keepdim"])
                       : x.std(dims, a["correction"], a["keepdim"]);
  }
  if (op == "triu") return x.triu(a["k"]);
  if (op == "tril") return x.tril(a["k"]);
  if (op == "masked_fill") return x.masked_fill(table_tensor(c["mask"]), table_number(a["value"]));
  if (op == "floor") return x.floor();
  if (op == "ceil") return x.ceil();
  if (op == "trunc") return x.trunc();
  if (op == "round") return x.round(a["decimals"]);
  if (op == "log1p") return x.log1p();
  if (op == "expm1") return x.expm1();
  if (op == "any") return x.any(a["dims"].get<std::vector<int>>(), a["keepdim"].get<bool>());
  if (op == "sort") return x.sort(a["dim"], a["descending"].get<bool>()).first;
  if (op == "argsort") return x.argsort(a["dim"], a["descending"].get<bool>());
  if (op == "norm")
    return x.norm(table_number(a["p"]), a["dims"].get<std::vector<int>>(), a["keepdim"].get<bool>());
  if (op == "clamp_min") return x.clamp_min(a["bound"]);
  if (op == "clamp_max") return x.clamp_max(a["bound"]);
  if (op == "all") return x.all(a["dims"].get<std::vector<int>>(), a["keepdim"].get<bool>());
  FAIL("unknown op " << op);
  return x;
}

// Relative `rtol`, plus `atol` times the input's scale (an absolute error of a few ulps of 1 per
// unit of |x|, as in 1 + erf(x) near erf = -1). Selections (triu, masked_fill, leaky_relu),
// rounding and any/all must be exact; log1p and expm1 are within 3 ulps of the exact value
// (tests/src/test_tensor_elementwise_math.cpp), PyTorch's within 1.
struct Tolerance {
  double rtol, atol;
};
Tolerance tolerance(const std::string& op, const std::string& dt) {
  static const std::set<std::string> exact = {"triu", "tril",  "masked_fill", "leaky_relu", "floor",
                                              "ceil", "trunc", "round",       "any",        "all"};
  if (exact.contains(op)) return {0, 0};
  const bool f32 = dt == "float32";
  if (op == "log1p" || op == "expm1") return f32 ? Tolerance{5e-7, 0} : Tolerance{9e-16, 0};
  if (op == "norm") return f32 ? Tolerance{2e-6, 0} : Tolerance{1e-14, 0};
  if (op == "var" || op == "std") return f32 ? Tolerance{2e-6, 0} : Tolerance{1e-14, 0};
  return f32 ? Tolerance{3e-7, 1.2e-7} : Tolerance{4e-16, 4.5e-16};
}

void check_close(const std::vector<double>& got, const json& want, Tolerance tol, double scale,
                 const char* what) {
  REQUIRE(got.size() == want["values"].size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = table_number(want["values"][i]);
    INFO(what, " element ", i, ": loom ", got[i], ", PyTorch ", w);
    if (std::isinf(w) && std::string(what) == "softplus value")
      CHECK(got[i] == table_number(want["x"][i]));  // docs/semantics.md: loom's softplus does not overflow
    else if (std::isnan(w))
      CHECK(std::isnan(got[i]));
    else if (std::isinf(w) || tol.rtol == 0)
      CHECK(got[i] == w);
    else
      CHECK(std::abs(got[i] - w) <= tol.rtol * std::abs(w) + tol.atol * scale);
  }
}

const json& table() {
  static const json t = test::read_table(LOOM_TEST_DATA "/ops_table.json");
  return t;
}

void check_table(const std::string& op) {
  int n = 0;
  for (const json& c : table()["cases"]) {
    if (c["op"] != op) continue;
    ++n;
    const std::string dt = c["x"]["dtype"];
    CAPTURE(c["args"].dump());
    CAPTURE(dt);
    CAPTURE(c["x"]["shape"].dump());
    Tensor x = table_tensor(c["x"]);
    double scale = 1;
    for (double v : table_values(x))
      if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
    const Tensor y = run_op(c, x);
    CHECK(y.shape() == c["y"]["shape"].get<std::vector<int64_t>>());
    CHECK(to_string(y.dtype()) == to_string(table_tensor(c["y"]).dtype()));
    bool finite = true;
    for (const json& v : c["y"]["values"]) finite = finite && !v.is_string();
    json want = c["y"];
    if (op == "softplus") want["x"] = c["x"]["values"];
    check_close(table_values(y), want, tolerance(op, dt), scale,
                op == "softplus" ? "softplus value" : "value");
    // Gradients where PyTorch's value is inf or NaN differ (docs/semantics.md): var's where
    // N - correction <= 0, softplus's where PyTorch's exp overflows.
    const bool degenerate = (op == "var" || op == "std" || op == "softplus") && !finite;
    if (c.contains("grad") && y.numel() > 0 && !degenerate) {
      x.requires_grad_();
      const Tensor g = gradient(run_op(c, x).sum(), {x})[0];
      // log1p' and expm1' are relative to their own size over 60 binades of x, not to x's scale.
      const double grad_scale = op == "log1p" || op == "expm1" ? 0 : scale;
      check_close(table_values(g), c["grad"], {1e-13, 1e-15}, grad_scale, "gradient");
    }
  }
  CHECK(n > 0);
}

}  // namespace

TEST_CASE("activations match PyTorch's values and gradients") {
  for (const char* op : {"erf", "gelu", "silu", "softplus", "leaky_relu"}) {
    CAPTURE(op);
    check_table(op);
  }
}

TEST_CASE("var and std match PyTorch over dims, corrections (N - correction <= 0 too) and keepdim") {
  check_table("var");
  check_table("std");
}

TEST_CASE("triu, tril and masked_fill match PyTorch on every dtype, broadcasting and empty shapes") {
  check_table("triu");
  check_table("tril");
  check_table("masked_fill");
}

TEST_CASE("rounding, log1p, expm1, any, all, sort, norm and one-sided clamps match PyTorch") {
  for (const char* op : {"floor", "ceil", "trunc", "round", "log1p", "expm1", "any", "all", "sort", "argsort",
                         "norm", "clamp_min", "clamp_max"}) {
    CAPTURE(op);
    check_table(op);
  }
}

TEST_CASE("the new ops' gradients match Float64 finite differences") {
  using test::gradcheck1;
  using test::Input;
  gradcheck1([](const Tensor& x) { return x.erf(); }, Input{{3, 7}, -4, 4});
  gradcheck1([](const Tensor& x) { return x.erf(); }, Input{{9}, -0.6, 0.6});
  gradcheck1([](const Tensor& x) { return x.gelu(); }, Input{{3, 5}, -5, 5});
  gradcheck1([](const Tensor& x) { return x.gelu("tanh"); }, Input{{3, 5}, -5, 5});
  gradcheck1([](const Tensor& x) { return x.silu(); }, Input{{11}, -8, 8});
  gradcheck1([](const Tensor& x) { return x.softplus(); }, Input{{11}, -30, 30, 0.01, 20});
  gradcheck1([](const Tensor& x) { return x.softplus(2, 3); }, Input{{11}, -4, 4, 0.01, 1.5});
  gradcheck1([](const Tensor& x) { return x.leaky_relu(0.1); }, Input{{11}, -2, 2, 0.01, 1e9});
  gradcheck1([](const Tensor& x) { return x.var(); }, Input{{4, 3}});
  gradcheck1([](const Tensor& x) { return x.var({0, 2}, 0, true); }, Input{{2, 3, 5}});
  gradcheck1([](const Tensor& x) { return x.std(1); }, Input{{3, 4}});
  gradcheck1([](const Tensor& x) { return x.std({0}, 2.0); }, Input{{5, 2}});
  gradcheck1([](const Tensor& x) { return x.triu(1) * x.tril(-1).transpose(); }, Input{{4, 4}});
  gradcheck1([](const Tensor& x) { return x.masked_fill(x.gt(0.5), -3.0) * x; },
             Input{{3, 4}, -2, 2, 0.01, 0.5});
}

TEST_CASE("erf is odd, keeps -0 and NaN, and uses its own derivative") {
  const Tensor x = Tensor::from_vector<double>({-0.0, std::nan(""), -1e-300, 0.49999999999}, {4});
  const std::vector<double> v = x.erf().to_vector<double>();
  CHECK(std::signbit(v[0]));
  CHECK(std::isnan(v[1]));
  CHECK(v[2] == std::erf(-1e-300));
  CHECK(std::abs(v[3] - std::erf(0.49999999999)) <= 2e-16);
  // Float32's is one ERF node, lowered to the same method (ir/float_math.hpp's erf_f32).
  const Tensor x32 = Tensor::from_vector<float>({-0.0f, NAN, -1e-30f, INFINITY, -INFINITY}, {5});
  CHECK(x32.erf().node()->uop->op == Op::ERF);
  const std::vector<float> v32 = x32.erf().to_vector<float>();
  CHECK((std::signbit(v32[0]) && v32[0] == 0));
  CHECK(std::isnan(v32[1]));
  CHECK(v32[2] == -1e-30f * static_cast<float>(2 / std::sqrt(std::numbers::pi)));  // the series' x * p
  CHECK((v32[3] == 1 && v32[4] == -1));
  // The gradient is erf's own derivative, not that of the polynomials (which is off by ~1e-13).
  Tensor p = Tensor::from_vector<double>({-3.5, -1.2, -0.3, 0.1, 0.49, 0.51, 2.2, 5.5}, {8});
  p.requires_grad_();
  const std::vector<double> g = gradient(p.erf().sum(), {p})[0].to_vector<double>();
  const std::vector<double> pv = p.to_vector<double>();
  for (size_t i = 0; i < pv.size(); ++i) {
    const double want = 2 / std::sqrt(std::numbers::pi) * std::exp(-pv[i] * pv[i]);
    INFO("x = ", pv[i]);
    CHECK(std::abs(g[i] - want) <= 4e-16 * want);
  }
  // Float64 within 2 ulps of libm's erf over a fine grid; Float32 within 2.5 ulps of the rounded value.
  std::vector<double> grid;
  for (int i = -3000; i <= 3000; ++i) grid.push_back(i / 500.0 + 1e-7);
  const std::vector<double> e64 = Tensor::from_vector<double>(grid, {6001}).erf().to_vector<double>();
  const std::vector<float> e32 =
      Tensor::from_vector<float>(std::vector<float>(grid.begin(), grid.end()), {6001})
          .erf()
          .to_vector<float>();
  double worst64 = 0, worst32 = 0;
  for (size_t i = 0; i < grid.size(); ++i) {
    const double want = std::erf(grid[i]);
    worst64 =
        std::max(worst64, std::abs(e64[i] - want) / (std::nextafter(std::abs(want), 2.0) - std::abs(want)));
    const float f = static_cast<float>(grid[i]);
    const double want32 = std::erf(static_cast<double>(f));
    worst32 = std::max(
        worst32, std::abs(e32[i] - want32) / (std::nextafter(std::abs(static_cast<float>(want32)), 2.0f) -
                                              std::abs(static_cast<float>(want32))));
  }
  MESSAGE("erf: largest error ", worst64, " ulps (Float64), ", worst32, " ulps (Float32)");
  CHECK(worst64 <= 2);
  CHECK(worst32 <= 2.5);
}

TEST_CASE("the new ops reject bad input with a loom::Error naming the op") {
  const Tensor x = Tensor::ones({2, 3});
  CHECK_THROWS_WITH_AS(x.var(2), doctest::Contains("var: axis 2 is out of range"), Error);
  CHECK_THROWS_WITH_AS(x.var({1, -1}), doctest::Contains("var: dim 1 appears more than once"), Error);
  CHECK_THROWS_WITH_AS(Tensor::ones({3}, DType::Int32).var(),
                       doctest::Contains("var: expected a float tensor, got Int32"), Error);
  CHECK_THROWS_WITH_AS(Tensor::ones({3}, DType::Int32).std(),
                       doctest::Contains("std: expected a float tensor"), Error);
  CHECK_THROWS_WITH_AS(x.masked_fill(Tensor::ones({2}, DType::Bool), 1.0),
                       doctest::Contains("masked_fill: shapes [2] and [2, 3] cannot be broadcast"), Error);
  CHECK_THROWS_WITH_AS(x.masked_fill(Tensor::ones({3}, DType::UInt8), 1.0),
                       doctest::Contains("masked_fill: expected a Bool mask, got UInt8"), Error);
  CHECK_THROWS_WITH_AS(Tensor::ones({3}).triu(),
                       doctest::Contains("triu: expected a tensor of at least 2 dimensions, got shape [3]"),
                       Error);
  CHECK_THROWS_WITH_AS(Tensor::scalar(1).tril(), doctest::Contains("tril: expected a tensor of at least 2"),
                       Error);
  CHECK_THROWS_WITH_AS(x.gelu("erf"), doctest::Contains("gelu: unknown approximate \"erf\""), Error);
  for (auto f :
       {+[](const Tensor& t) { return t.gelu(); }, +[](const Tensor& t) { return t.silu(); },
        +[](const Tensor& t) { return t.softplus(); }, +[](const Tensor& t) { return t.leaky_relu(); }})
    CHECK_THROWS_WITH_AS(f(Tensor::ones({2}, DType::Int64)),
                         doctest::Contains("expected a float tensor, got Int64"), Error);
  CHECK(Tensor::from_vector<int32_t>({0, 1}, {2}).erf().dtype() == DType::Float32);
}
