#pragma once
// Reads the tables PyTorch made once (tests/data/*.json: numbers, with "nan" and "inf" as strings,
// and tensors as shape, dtype and values). Also reads tests/data/nn_table.json (made by
// tests/data/make_nn_table.py), or another table of its format, and checks
// an op's outputs and Float64 gradients against it. Each case holds the inputs, the outputs, a
// weight w per element of the first output, and PyTorch's gradient of sum(y * w) for each Float64
// input, in order.
#include <doctest/doctest.h>
#include <loom/loom.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace loom::test {

using nlohmann::json;

inline double table_number(const json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    return s == "inf" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  }
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  return v.get<double>();
}

inline Tensor table_tensor(const json& j) {
  const Shape shape = j["shape"].get<std::vector<int64_t>>();
  const std::string dt = j["dtype"];
  std::vector<double> v;
  for (const json& e : j["values"]) v.push_back(table_number(e));
  if (dt == "float32") return Tensor::from_vector<float>(std::vector<float>(v.begin(), v.end()), shape);
  if (dt == "float64") return Tensor::from_vector<double>(v, shape);
  if (dt == "int64") return Tensor::from_vector<int64_t>(std::vector<int64_t>(v.begin(), v.end()), shape);
  if (dt == "int32") return Tensor::from_vector<int32_t>(std::vector<int32_t>(v.begin(), v.end()), shape);
  std::vector<bool> b;
  for (double x : v) b.push_back(x != 0);
  return Tensor::from_vector<bool>(b, shape);
}

inline std::vector<double> table_values(const Tensor& t) {
  auto as_double = [](const auto& v) { return std::vector<double>(v.begin(), v.end()); };
  if (t.dtype() == DType::Float32) return as_double(t.to_vector<float>());
  if (t.dtype() == DType::Float64) return t.to_vector<double>();
  if (t.dtype() == DType::Int64) return as_double(t.to_vector<int64_t>());
  if (t.dtype() == DType::Int32) return as_double(t.to_vector<int32_t>());
  return as_double(t.to_vector<bool>());
}

inline json read_table(const char* path) {
  std::ifstream f(path);
  REQUIRE(f.good());
  return json::parse(f);
}

inline const json& nn_table() {
  static const json t = read_table(LOOM_TEST_DATA "/nn_table.json");
  return t;
}

// |got - want| <= rtol * |want| + atol * scale, NaN where NaN, infinities equal.
inline void check_table_values(const std::vector<double>& got, const json& want, double rtol, double atol,
                               double scale, const char* what) {
  REQUIRE(got.size() == want["values"].size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = table_number(want["values"][i]);
    INFO(what, " element ", i, ": loom ", got[i], ", PyTorch ", w);
    if (std::isnan(w))
      CHECK(std::isnan(got[i]));
    else if (std::isinf(w) || rtol == 0)
      CHECK(got[i] == w);
    else
      CHECK(std::abs(got[i] - w) <= rtol * std::abs(w) + atol * scale);
  }
}

using TableOp = std::function<std::vector<Tensor>(const json& args, const std::vector<Tensor>& inputs)>;

// Runs every case of `op` in `table` (nn_table.json unless given) through `run` and checks each
// output's shape, dtype and values, then the gradient of sum(y * w) for each Float64 input.
// Float32 values within rtol32 (the sums run in another order than PyTorch's), Float64 within
// 1e-12, integers exactly. Returns the case count.
inline int check_torch_table(const std::string& op, const TableOp& run, double rtol32 = 1e-5,
                             const json& table = nn_table()) {
  int n = 0;
  for (const json& c : table["cases"]) {
    if (c["op"] != op) continue;
    ++n;
    CAPTURE(op);
    CAPTURE(c["args"].dump());
    CAPTURE(c["inputs"][0]["shape"].dump());
    std::vector<Tensor> inputs;
    double scale = 1;
    for (const json& j : c["inputs"]) {
      inputs.push_back(table_tensor(j));
      for (const json& v : j["values"])
        if (!v.is_string() && !v.is_boolean()) scale = std::max(scale, std::abs(v.get<double>()));
    }
    const std::vector<Tensor> outs = run(c["args"], inputs);
    REQUIRE(outs.size() == c["outputs"].size());
    for (size_t i = 0; i < outs.size(); ++i) {
      const json& want = c["outputs"][i];
      CHECK(outs[i].shape() == want["shape"].get<std::vector<int64_t>>());
      const std::string dt = want["dtype"];
      CHECK(to_string(outs[i].dtype()) == to_string(table_tensor(want).dtype()));
      const bool integral = dt != "float32" && dt != "float64";
      check_table_values(table_values(outs[i]), want,
                         integral          ? 0
                         : dt == "float32" ? rtol32
                                           : 1e-12,
                         integral          ? 0
                         : dt == "float32" ? rtol32
                                           : 1e-12,
                         scale, "value");
    }
    if (!c.contains("grads")) continue;
    std::vector<Tensor> leaves;
    for (Tensor& t : inputs)
      if (t.dtype() == DType::Float64) leaves.push_back(t.requires_grad_());
    const Tensor y = run(c["args"], inputs)[0];
    const Tensor w = table_tensor(c["w"]);
    if (y.numel() == 0) continue;
    const std::vector<Tensor> grads = gradient((y * w).sum(), leaves);
    REQUIRE(grads.size() == c["grads"].size());
    for (size_t i = 0; i < grads.size(); ++i) {
      CAPTURE(i);
      check_table_values(table_values(grads[i]), c["grads"][i], 1e-11, 1e-11, scale, "gradient");
    }
  }
  return n;
}

}  // namespace loom::test
