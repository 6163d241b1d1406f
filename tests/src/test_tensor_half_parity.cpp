// The ops of tests/data/ops_table.json and nn_table.json (and the composites they leave out:
// softmax, log_softmax, logsumexp, sum, mean, layer_norm, cross_entropy, matmul, ...) rerun in
// BFloat16 and Float16 against PyTorch (tests/data/half_table.json, made once by
// tests/data/make_half_table.py). docs/semantics.md, "Half-precision dtypes": an op on half
// tensors computes in Float32 and rounds once. So each element of loom's result must be
// - the Float32 result PyTorch computed on the widened inputs, rounded once to the half dtype,
//   bit for bit, where loom and PyTorch compute the same Float32 value (tolerance 0 below);
// - otherwise (loom's own transcendental functions, sums in another order) the rounding of some
//   Float32 value within the op's stated Float32 tolerance of PyTorch's: bit-equal unless
//   PyTorch's Float32 result lies that close to a midpoint between two half values, and then
//   one of those two;
// - and bit-equal to PyTorch's own half result wherever PyTorch rounds once (and the element is
//   not at such a midpoint). Where PyTorch 1.13 rounds intermediate results (its bf16 layer_norm,
//   gelu(tanh), silu, matmul, batch_norm, bilinear interpolate, mean, log_softmax, ...),
//   loom keeps the single rounding (as current PyTorch does) and the test counts those elements.
#include "torch_table.hpp"

#include "ir/target.hpp"

#include <loom/half.hpp>
#include <loom/nn.hpp>
#include <loom/nn_functional.hpp>

#include <bit>
#include <map>

using namespace loom;
namespace F = loom::nn::functional;
using test::json;

namespace {

const json& half_table() {
  static const json t = test::read_table(LOOM_TEST_DATA "/half_table.json");
  return t;
}

DType dtype_named(const std::string& name) {
  if (name == "bfloat16") return DType::BFloat16;
  if (name == "float16") return DType::Float16;
  if (name == "float32") return DType::Float32;
  if (name == "int64") return DType::Int64;
  REQUIRE(name == "bool");
  return DType::Bool;
}

// A table tensor; half values are written as the float each one is, so the cast is exact.
Tensor input_tensor(const json& j) {
  const DType dt = dtype_named(j["dtype"]);
  if (!dt.is_half()) return test::table_tensor(j);
  std::vector<float> v;
  for (const json& e : j["values"]) v.push_back(static_cast<float>(test::table_number(e)));
  return Tensor::from_vector<float>(v, j["shape"].get<std::vector<int64_t>>()).cast(dt);
}

// Rounds a float to the half dtype and back (to nearest, ties to even: include/loom/half.hpp).
float round_to(DType dt, float x) {
  return dt == DType::BFloat16 ? static_cast<float>(bfloat16(x)) : static_cast<float>(float16(x));
}

F::Size2d size2(const json& v) {
  const auto p = v.get<std::vector<int64_t>>();
  return p.empty() ? F::Size2d{} : F::Size2d{p[0], p[1]};
}
std::vector<int> ints(const json& v) { return v.get<std::vector<int>>(); }

using Run = std::function<std::vector<Tensor>(const json& a, const std::vector<Tensor>& in)>;
std::vector<Tensor> one(Tensor t) { return {std::move(t)}; }

// Each op of the table in loom, and the Float32 tolerance rtol * |PyTorch's Float32 result| +
// atol * scale within which loom's Float32 value may differ from PyTorch's before rounding:
// - 0 where both compute the same correctly rounded Float32 operations (one IEEE op, movement,
//   max, a where);
// - rtol 4e-6 (about 64 Float32 ulps) for loom's own transcendental functions and the composites
//   on them (exp, erf, tanh, softmax: a few ulps each, api.md "Transcendental functions");
//   log_softmax and logsumexp add atol 1e-7 where their result is near 0 (log of a sum near 1);
//   gelu adds 1e-7 |x|: its 1 + erf(x) cancels for x < -2, where both libraries' Float32 results
//   carry erf's absolute error (about u = 6e-8) times x / 2;
// - rtol 2e-6 and atol 2e-7 max |input| for sums, matmuls, convolutions and norms: another order
//   of summation (semantics.md: within K u sum |terms|, and about sqrt(K) u of it in practice for
//   the K <= 300 random terms here).
// What the absolute part of the tolerance scales with: 1; |x_i| of an elementwise op's input;
// the largest input magnitude of the case.
enum class Scale { One, Element, MaxInput };
struct OpSpec {
  Run run;
  double rtol = 0, atol = 0;
  Scale scale = Scale::One;
};

const std::map<std::string, OpSpec>& ops() {
  static const std::map<std::string, OpSpec> m = [] {
    std::map<std::string, OpSpec> o;
    o["erf"] = {[](const json&, const std::vector<Tensor>& in) { return one(in[0].erf()); }, 4e-6};
    o["gelu"] = {[](const json& a, const std::vector<Tensor>& in) {
                   return one(in[0].gelu(a["approximate"].get<std::string>()));
                 },
                 4e-6, 1e-7, Scale::Element};
    o["silu"] = {[](const json&, const std::vector<Tensor>& in) { return one(in[0].silu()); }, 4e-6};
    o["softplus"] = {[](const json& a, const std::vector<Tensor>& in) {
                       return one(in[0].softplus(a["beta"], a["threshold"]));
                     },
                     4e-6};
    o["leaky_relu"] = {[](const json& a, const std::vector<Tensor>& in) {
      return one(in[0].leaky_relu(a["negative_slope"]));
    }};
    o["exp"] = {[](const json&, const std::vector<Tensor>& in) { return one(in[0].exp()); }, 4e-6};
    o["tanh"] = {[](const json&, const std::vector<Tensor>& in) { return one(in[0].tanh()); }, 4e-6};
    o["sigmoid"] = {[](const json&, const std::vector<Tensor>& in) { return one(in[0].sigmoid()); }, 4e-6};
    o["log"] = {[](const json&, const std::vector<Tensor>& in) { return one(in[0].log()); }, 4e-6};
    o["sqrt"] = {[](const json&, const std::vector<Tensor>& in) { return one(in[0].sqrt()); }};
    // two correctly rounded steps, as PyTorch's CPU rsqrt (tensor_elementwise_math.cpp)
    o["rsqrt"] = {[](const json&, const std::vector<Tensor>& in) { return one(in[0].rsqrt()); }};
    o["reciprocal"] = {[](const json&, const std::vector<Tensor>& in) { return one(in[0].reciprocal()); }};
    o["mul_scalar"] = {
        [](const json& a, const std::vector<Tensor>& in) { return one(in[0] * a["value"].get<double>()); }};
    o["add_scalar"] = {
        [](const json& a, const std::vector<Tensor>& in) { return one(in[0] + a["value"].get<double>()); }};
    o["mul"] = {[](const json&, const std::vector<Tensor>& in) { return one(in[0] * in[1]); }};
    o["add"] = {[](const json&, const std::vector<Tensor>& in) { return one(in[0] + in[1]); }};
    o["div"] = {[](const json&, const std::vector<Tensor>& in) { return one(in[0] / in[1]); }};
    o["var"] = {[](const json& a, const std::vector<Tensor>& in) {
                  return one(in[0].var(ints(a["dims"]), a["correction"], a["keepdim"]));
                },
                2e-6, 2e-7, Scale::MaxInput};
    o["std"] = {[](const json& a, const std::vector<Tensor>& in) {
                  return one(in[0].std(ints(a["dims"]), a["correction"], a["keepdim"]));
                },
                2e-6, 2e-7, Scale::MaxInput};
    o["triu"] = {[](const json& a, const std::vector<Tensor>& in) { return one(in[0].triu(a["k"])); }};
    o["tril"] = {[](const json& a, const std::vector<Tensor>& in) { return one(in[0].tril(a["k"])); }};
    o["masked_fill"] = {[](const json& a, const std::vector<Tensor>& in) {
      return one(in[0].masked_fill(in[1], test::table_number(a["value"])));
    }};
    o["sum"] = {[](const json& a, const std::vector<Tensor>& in) { return one(in[0].sum(ints(a["dims"]))); },
                2e-6, 2e-7, Scale::MaxInput};
    o["mean"] = {
        [](const json& a, const std::vector<Tensor>& in) { return one(in[0].mean(ints(a["dims"]))); }, 2e-6,
        2e-7, Scale::MaxInput};
    o["softmax"] = {
        [](const json& a, const std::vector<Tensor>& in) { return one(in[0].softmax(a["axis"])); }, 4e-6};
    o["log_softmax"] = {
        [](const json& a, const std::vector<Tensor>& in) { return one(in[0].log_softmax(a["axis"])); }, 4e-6,
        1e-7};
    o["logsumexp"] = {
        [](const json& a, const std::vector<Tensor>& in) { return one(in[0].logsumexp(a["axis"])); }, 4e-6,
        1e-7};
    o["layer_norm"] = {[](const json& a, const std::vector<Tensor>& in) {
                         const int64_t d = in[0].shape().back();
                         nn::LayerNorm ln(d, a["eps"], a["affine"]);
                         if (a["affine"]) {
                           ln.weight = in[1];
                           ln.bias = in[2];
                         }
                         return one(ln.forward(in[0]));
                       },
                       2e-6, 2e-7, Scale::MaxInput};
    o["cross_entropy"] = {
        [](const json&, const std::vector<Tensor>& in) { return one(nn::cross_entropy(in[0], in[1])); }, 2e-6,
        2e-7, Scale::MaxInput};
    o["mse"] = {[](const json&, const std::vector<Tensor>& in) { return one(nn::mse(in[0], in[1])); }, 2e-6,
                2e-7, Scale::MaxInput};
    o["matmul"] = {[](const json&, const std::vector<Tensor>& in) { return one(in[0].matmul(in[1])); }, 2e-6,
                   2e-7, Scale::MaxInput};
    o["cumsum"] = {[](const json& a, const std::vector<Tensor>& in) { return one(in[0].cumsum(a["dim"])); },
                   2e-6, 2e-7, Scale::MaxInput};
    o["repeat"] = {[](const json& a, const std::vector<Tensor>& in) {
      return one(in[0].repeat(a["repeats"].get<std::vector<int64_t>>()));
    }};
    o["topk"] = {[](const json& a, const std::vector<Tensor>& in) {
      return one(in[0].topk(a["k"], a["dim"], a["largest"]).first);
    }};
    o["pad"] = {[](const json& a, const std::vector<Tensor>& in) {
      return one(F::pad(in[0], a["pad"].get<std::vector<int64_t>>(), a["mode"].get<std::string>(),
                        a["value"].get<double>()));
    }};
    o["conv2d"] = {
        [](const json& a, const std::vector<Tensor>& in) {
          return one(F::conv2d(in[0], in[1], a["bias"].get<bool>() ? in[2] : Tensor{}, size2(a["stride"]),
                               size2(a["padding"]), size2(a["dilation"]), a["groups"].get<int64_t>()));
        },
        2e-6, 2e-7, Scale::MaxInput};
    o["conv1d"] = {[](const json& a, const std::vector<Tensor>& in) {
                     return one(F::conv1d(in[0], in[1], in[2], a["stride"], a["padding"], a["dilation"],
                                          a["groups"].get<int64_t>()));
                   },
                   2e-6, 2e-7, Scale::MaxInput};
    o["conv_transpose2d"] = {
        [](const json& a, const std::vector<Tensor>& in) {
          return one(F::conv_transpose2d(in[0], in[1], in[2], size2(a["stride"]), size2(a["padding"]),
                                         size2(a["output_padding"]), a["groups"].get<int64_t>(),
                                         size2(a["dilation"])));
        },
        2e-6, 2e-7, Scale::MaxInput};
    o["max_pool2d"] = {[](const json& a, const std::vector<Tensor>& in) {
      return one(F::max_pool2d(in[0], size2(a["kernel"]), size2(a["stride"]), size2(a["padding"])));
    }};
    o["avg_pool2d"] = {
        [](const json& a, const std::vector<Tensor>& in) {
          return one(F::avg_pool2d(in[0], size2(a["kernel"]), size2(a["stride"]), size2(a["padding"]), false,
                                   a["count_include_pad"].get<bool>()));
        },
        2e-6, 2e-7, Scale::MaxInput};
    o["adaptive_avg_pool2d"] = {[](const json& a, const std::vector<Tensor>& in) {
                                  return one(F::adaptive_avg_pool2d(in[0], size2(a["output_size"])));
                                },
                                2e-6, 2e-7, Scale::MaxInput};
    o["batch_norm"] = {[](const json& a, const std::vector<Tensor>& in) {
                         Tensor mean = in[1].detach().clone(), var = in[2].detach().clone();
                         const bool affine = a["affine"].get<bool>();
                         const Tensor y = F::batch_norm(in[0], mean, var, affine ? in[3] : Tensor{},
                                                        affine ? in[4] : Tensor{}, a["training"].get<bool>(),
                                                        a["momentum"], a["eps"]);
                         return std::vector<Tensor>{y, mean, var};
                       },
                       2e-6, 2e-7, Scale::MaxInput};
    o["interpolate"] = {[](const json& a, const std::vector<Tensor>& in) {
                          const double scale = a["scale_factor"];
                          return one(F::interpolate(in[0], size2(a["size"]),
                                                    scale > 0 ? std::optional<double>(scale) : std::nullopt,
                                                    a["mode"].get<std::string>()));
                        },
                        2e-6, 2e-7, Scale::MaxInput};
    return o;
  }();
  return m;
}

// The digest of every result's bits of the test case below (see there).
constexpr uint64_t kHalfParityDigest = 0x33f08542f22abde9u;

struct Counts {
  int cases = 0, elements = 0, torch_equal = 0, torch_rounds_more = 0, midpoint = 0;
  uint64_t digest = 0xcbf29ce484222325u;  // FNV-1a of every result's bits, in order
};

void add_to_digest(uint64_t& digest, float v) {
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  for (int b = 0; b < 4; ++b) digest = (digest ^ ((bits >> (8 * b)) & 0xffu)) * 0x100000001b3u;
}

float as_float(const json& v) { return static_cast<float>(test::table_number(v)); }

// Checks every case of `op` in `dtype`; returns the counts.
Counts check_half_op(const std::string& op, const std::string& dtype, uint64_t digest) {
  const OpSpec& spec = ops().at(op);
  Counts n;
  n.digest = digest;
  for (const json& c : half_table()["cases"]) {
    if (c["op"] != op || c["dtype"] != dtype) continue;
    ++n.cases;
    CAPTURE(op);
    CAPTURE(dtype);
    CAPTURE(c["args"].dump());
    CAPTURE(c["inputs"][0]["shape"].dump());
    std::vector<Tensor> inputs;
    double max_input = 1;
    for (const json& j : c["inputs"]) {
      inputs.push_back(input_tensor(j));
      for (const json& v : j["values"])
        if (v.is_number()) max_input = std::max(max_input, std::abs(v.get<double>()));
    }
    const std::vector<Tensor> outs = spec.run(c["args"], inputs);
    REQUIRE(outs.size() == c["float32"].size());
    for (size_t o = 0; o < outs.size(); ++o) {
      CAPTURE(o);
      const json& ref = c["float32"][o];
      const DType dt = dtype_named(dtype);
      CHECK(outs[o].shape() == ref["shape"].get<std::vector<int64_t>>());
      REQUIRE(outs[o].dtype() == dt);
      const std::vector<float> got = outs[o].cast(DType::Float32).to_vector<float>();
      REQUIRE(got.size() == ref["values"].size());
      // PyTorch's own half result: the rounded Float32 one but where it says it differs.
      std::map<size_t, float> torch_differs;
      const bool has_torch = c.contains("torch");
      if (has_torch)
        for (const json& d : c["torch"][o]["differs"]) torch_differs[d[0].get<size_t>()] = as_float(d[1]);
      for (size_t i = 0; i < got.size(); ++i) {
        const float want32 = as_float(ref["values"][i]);
        INFO("element ", i, ": loom ", got[i], ", PyTorch's float32 ", want32);
        ++n.elements;
        add_to_digest(n.digest, got[i]);
        // PyTorch's own half value: its Float32 one rounded, unless it says otherwise.
        const auto it = torch_differs.find(i);
        const float torch_half = it != torch_differs.end() ? it->second : round_to(dt, want32);
        if (has_torch && (got[i] == torch_half || (std::isnan(got[i]) && std::isnan(torch_half))))
          ++n.torch_equal;
        if (has_torch && it != torch_differs.end()) ++n.torch_rounds_more;
        if (std::isnan(want32)) {
          CHECK(std::isnan(got[i]));
          continue;
        }
        if (std::isinf(want32)) {
          CHECK(got[i] == want32);
          continue;
        }
        const double scale = spec.scale == Scale::MaxInput  ? max_input
                             : spec.scale == Scale::Element ? std::abs(as_float(c["inputs"][0]["values"][i]))
                                                            : 1.0;
        const double tol = spec.rtol * std::abs(want32) + spec.atol * scale;
        const float lo = round_to(dt, static_cast<float>(want32 - tol));
        const float hi = round_to(dt, static_cast<float>(want32 + tol));
        CHECK(lo <= got[i]);
        CHECK(got[i] <= hi);
        if (lo != hi) ++n.midpoint;
        // Where PyTorch rounds its Float32 value once and that value is not near a midpoint, the
        // same bits as PyTorch's.
        if (has_torch && it == torch_differs.end() && lo == hi) CHECK(got[i] == torch_half);
      }
    }
  }
  return n;
}

}  // namespace

TEST_CASE("half parity: every op of the PyTorch tables, in bfloat16 and float16, rounds as PyTorch") {
  std::map<std::string, int> seen;
  for (const json& c : half_table()["cases"]) seen[c["op"]]++;
  uint64_t digest = Counts{}.digest;
  for (const auto& [op, count] : seen) {
    CAPTURE(op);
    REQUIRE(ops().count(op) == 1);
    for (const std::string dtype : {"bfloat16", "float16"}) {
      const Counts n = check_half_op(op, dtype, digest);
      digest = n.digest;
      CHECK(n.cases > 0);
      MESSAGE(op, " ", dtype, ": ", n.cases, " cases, ", n.elements, " elements, ", n.torch_equal,
              " bit-equal to PyTorch's half result, ", n.torch_rounds_more,
              " where PyTorch 1.13 rounds more than once, ", n.midpoint,
              " where the Float32 tolerance spans two half values");
    }
  }
  // The same bits on every Target: tests/CMakeLists.txt runs this case again at
  // LOOM_TARGET=x86-64-v3 (no AVX512_BF16, no AVX-512: the integer bfloat16 narrowing, 8 float
  // lanes), which must give this digest of every result's bits too. A deliberate change to
  // loom's Float32 arithmetic (a new exp polynomial, another summation order) changes it: check
  // that both runs agree, then update it. A Target without FMA (x86-64-v2) rounds each product of
  // a sum of products (docs/semantics.md), so its Float32 results, and rarely its half ones,
  // differ in the last bit: the digest is for Targets with FMA.
  if (current_target().isa.fma)
    CHECK(digest == kHalfParityDigest);
  else
    MESSAGE("no FMA on this Target: the digest of the results' bits is not compared");
}
