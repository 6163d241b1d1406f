// BFloat16 and Float16 through the Tensor API (include/loom/half.hpp, docs/semantics.md
// "Half-precision dtypes"): promotion, printing, conversion, and elementwise, reduce
// and movement ops compiled and checked bit for bit against the reference
// interpreter (its rounding is tests/support/half_reference.hpp's) and hand values.
#include "src/check.hpp"

#include <doctest/doctest.h>

#include <loom/nn.hpp>
#include <loom/nn_functional.hpp>

#include <functional>
#include <sstream>

using namespace loom;
using namespace loom::test;

namespace {
const std::vector<DType>& halves() {
  static const std::vector<DType> d{DType::BFloat16, DType::Float16};
  return d;
}
}  // namespace

TEST_CASE("half: dtypes' sizes, names and PyTorch's promotion") {
  CHECK(DType::BFloat16.itemsize() == 2);
  CHECK(DType::Float16.itemsize() == 2);
  CHECK((DType::BFloat16.is_float() && DType::Float16.is_half() && !DType::Float32.is_half()));
  CHECK(to_string(DType::BFloat16.vec(8)) == "bf16x8");
  CHECK(parse_dtype("f16x4*") == DType::Float16.vec(4).ptr_to());
  CHECK(scalar_name(Scalar::Float16) == "Float16");
  CHECK(promote(DType::BFloat16, DType::Float16) == DType::Float32);
  CHECK(promote(DType::Float16, DType::BFloat16) == DType::Float32);
  CHECK(promote(DType::BFloat16, DType::Float32) == DType::Float32);
  CHECK(promote(DType::Int64, DType::Float16) == DType::Float16);
  CHECK(promote(DType::BFloat16, DType::BFloat16) == DType::BFloat16);
  const Tensor b = Tensor::ones({2}, DType::BFloat16), h = Tensor::ones({2}, DType::Float16);
  CHECK((b + h).dtype() == DType::Float32);
  CHECK((b * 2.5).dtype() == DType::BFloat16);  // a scalar constant: the tensor's dtype wins
  CHECK((h + 1).dtype() == DType::Float16);
  CHECK((Tensor::ones({2}, DType::Int32) + b).dtype() == DType::BFloat16);
  CHECK((Tensor::ones({2}, DType::Float64) + h).dtype() == DType::Float64);
}

TEST_CASE("half: printing, as PyTorch's repr of the rounded values") {
  std::ostringstream os;
  os << Tensor::from_vector<float>({1.0f, 0.1f, 2.5f}, {3}).cast(DType::BFloat16);
  // torch.tensor([1.0, 0.1, 2.5]).bfloat16(): tensor([1.0000, 0.1001, 2.5000], dtype=torch.bfloat16)
  CHECK(os.str() == "tensor([1.0000, 0.1001, 2.5000], shape=[3], dtype=BFloat16)");
  std::ostringstream f16;
  f16 << Tensor::full({2}, 65520.0, DType::Float16);
  CHECK(f16.str() == "tensor([inf, inf], shape=[2], dtype=Float16)");
}

TEST_CASE("half: from_vector, to_vector, full and cast round to nearest even") {
  const Tensor t = Tensor::from_vector<float>({0.1f, 65504.0f, 65520.0f, 0x1p-24f, 0x1p-25f}, {5});
  std::vector<uint16_t> f16, bf16;
  for (float16 x : t.cast(DType::Float16).to_vector<float16>()) f16.push_back(x.bits);
  for (bfloat16 x : t.cast(DType::BFloat16).to_vector<bfloat16>()) bf16.push_back(x.bits);
  CHECK(f16 == std::vector<uint16_t>{0x2e66, 0x7bff, 0x7c00, 0x0001, 0x0000});
  CHECK(bf16 == std::vector<uint16_t>{0x3dcd, 0x4780, 0x4780, 0x3380, 0x3300});
  const Tensor v = Tensor::from_vector<bfloat16>({bfloat16(1.5f), bfloat16::from_bits(0x7fc0)}, {2});
  CHECK(v.dtype() == DType::BFloat16);
  const std::vector<float> back = v.cast(DType::Float32).to_vector<float>();
  CHECK(back[0] == 1.5f);
  CHECK(std::isnan(back[1]));
  CHECK(Tensor::full({1}, 0.1, DType::BFloat16).to_vector<bfloat16>()[0].bits == 0x3dcd);
  check_ref(t.cast(DType::Float16).cast(DType::Int32));  // through float32: [0, 65504, INT_MAX, 0, 0]
  check_values(Tensor::from_vector<int32_t>({257, 259, -3}, {3}).cast(DType::BFloat16), {256, 260, -3});
}

TEST_CASE("half: elementwise ops compute in float32 and round once") {
  for (DType dt : halves()) {
    INFO(scalar_name(dt.scalar));
    const double tiny = dt == DType::BFloat16 ? 0x1p-8 : 0x1p-11;
    const Tensor one = make(dt, {1, 1, 1}, {3}), t = make(dt, {tiny, 3 * tiny, 0.5}, {3});
    check_values(one + t, {1, 1 + 4 * tiny, 1.5});  // ties to even
    const Tensor a = make(dt, iota(24, 0.37, -4), {4, 6}), b = make(dt, iota(24, -0.21, 3), {4, 6});
    check_ref(a + b);
    check_ref(a * b);
    check_ref(a / b);
    check_ref(a - b * 3);
    check_ref(a.maximum(b));
    check_ref(relu(a));
    check_ref(a.lt(b));
    check_ref(where(a.gt(0), a, b));
    check_ref((a * b + a) * b);  // each op rounds, fused or not
    check_ref(a.exp(), 1);
    check_ref(a.abs().sqrt());
    check_ref(a.tanh(), 1);
  }
}

TEST_CASE("half: sums accumulate in float32") {
  for (DType dt : halves()) {
    INFO(scalar_name(dt.scalar));
    // 300 ones: a half accumulator would stop at 256 (bf16) or 2048 (f16, for 3000).
    check_values(Tensor::ones({300}, dt).sum(), {300});
    check_values(Tensor::ones({3000}, dt).sum(), {dt == DType::BFloat16 ? 3008.0 : 3000.0});
    const Tensor a = make(dt, iota(60, 0.13, -3), {5, 12});
    check_ref(a.sum({1}));
    check_ref(a.sum({0}));
    check_ref(a.mean({1}));
    check_ref(a.max({1}));
    check_ref(a.min({0}));
    check_ref(a.matmul(make(dt, iota(36, -0.07, 1), {12, 3})));
  }
}

// docs/semantics.md: an op loom builds from primitives but PyTorch runs as one kernel computes a
// half input in Float32 and rounds once, so its bits are those of the same op on the widened
// input, rounded (tests/src/test_tensor_half_parity.cpp checks them against PyTorch).
TEST_CASE("half: composite ops compute in float32 and round once") {
  namespace F = loom::nn::functional;
  for (DType dt : halves()) {
    INFO(scalar_name(dt.scalar));
    const Tensor x = make(dt, iota(48, 0.29, -5), {2, 24}), w = make(dt, iota(24, 0.05, 0.3), {24});
    const auto once = [&](const char* what, const std::function<Tensor(const Tensor&)>& f) {
      INFO(what);
      const Tensor got = f(x), want = f(x.cast(DType::Float32)).cast(dt);
      CHECK(got.dtype() == dt);
      CHECK(got.cast(DType::Float32).to_vector<float>() == want.cast(DType::Float32).to_vector<float>());
    };
    once("softmax", [](const Tensor& t) { return t.softmax(1); });
    once("log_softmax", [](const Tensor& t) { return t.log_softmax(0); });
    once("logsumexp", [](const Tensor& t) { return t.logsumexp(1); });
    once("var", [](const Tensor& t) { return t.var({1}); });
    once("std", [](const Tensor& t) { return t.std({0, 1}); });
    once("gelu", [](const Tensor& t) { return t.gelu("tanh"); });
    once("silu", [](const Tensor& t) { return t.silu(); });
    once("softplus", [](const Tensor& t) { return t.softplus(2, 5); });
    once("erf", [](const Tensor& t) { return t.erf(); });
    once("leaky_relu", [](const Tensor& t) { return t.leaky_relu(0.1); });
    once("LayerNorm", [&](const Tensor& t) {
      nn::LayerNorm ln(24);
      ln.weight = w.cast(t.dtype());
      ln.bias = (w * 0.5).cast(t.dtype());
      return ln(t);
    });
    once("RMSNorm", [&](const Tensor& t) {
      nn::RMSNorm rms(24, 1e-6);
      rms.weight = w.cast(t.dtype());
      return rms(t);
    });
    once("cross_entropy", [](const Tensor& t) {
      return nn::cross_entropy(t.reshape({4, 12}), Tensor::from_vector<int64_t>({0, 3, 11, 5}, {4}));
    });
    once("avg_pool2d", [](const Tensor& t) {
      return F::avg_pool2d(t.reshape({1, 2, 4, 6}), {3, 3}, {1, 1});
    });
    once("bilinear interpolate", [](const Tensor& t) {
      return F::interpolate(t.reshape({1, 2, 4, 6}), {5, 7}, std::nullopt, "bilinear");
    });
    once("conv2d", [&](const Tensor& t) {
      return F::conv2d(t.reshape({1, 2, 4, 6}), w.cast(t.dtype()).reshape({2, 1, 3, 4}), {}, {1, 1}, {1, 1},
                       {1, 1}, 2);
    });
  }
}

TEST_CASE("half: movement ops keep the bits") {
  for (DType dt : halves()) {
    INFO(scalar_name(dt.scalar));
    const Tensor a = make(dt, iota(24, 0.37, -4), {2, 3, 4});
    check_ref(a.permute({2, 0, 1}).contiguous());
    check_ref(a.flip({1}).contiguous());
    check_ref(a.reshape({6, 4}).shrink({{1, 5}, {0, 2}}).contiguous());
    check_ref(a.pad({{0, 0}, {1, 1}, {0, 2}}));
    check_ref(cat({a, a}, 2));
    check_ref(a.expand({2, 2, 3, 4}).contiguous());
  }
}

TEST_CASE("half: rand and randn draw in [0, 1) and round once") {
  for (DType dt : halves()) {
    const Tensor r = Tensor::rand({1000}, dt);
    CHECK(r.dtype() == dt);
    const std::vector<double> v = values(r);
    CHECK(*std::min_element(v.begin(), v.end()) >= 0.0);
    CHECK(*std::max_element(v.begin(), v.end()) < 1.0);
    CHECK(Tensor::randn({4}, dt).dtype() == dt);
  }
}
