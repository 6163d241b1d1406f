// loom::Autocast: the lower-precision ops (matmul, Linear, conv) multiply operands rounded to
// the autocast dtype, accumulate in Float32 and round the result once to the autocast dtype
// (torch.autocast's), the Float32-list ops (reductions, norms, softmax, losses) take half
// inputs in Float32, gradients reach Float32 parameters in Float32, and a Capture keys its
// recordings on the state. Expected values are hand-derived from the rounded operands and
// compared exactly (a rounding off by one bf16 ulp fails), and every result is also checked
// against the reference interpreter.
#include "check.hpp"
#include "ir/target.hpp"
#include "support/error_message.hpp"
#include "support/small_regression.hpp"

#include <loom/autocast.hpp>
#include <loom/capture.hpp>
#include <loom/debug.hpp>
#include <loom/gradient.hpp>
#include <loom/nn.hpp>
#include <loom/nn_functional.hpp>
#include <loom/optim.hpp>

#include <cmath>
#include <vector>

using namespace loom;
using test::check_ref;
using test::check_values;
using test::make;
using test::values;

namespace {

// 1 + 2^-9 rounds to 1 in bf16 (below half of bf16's ulp 2^-7 at 1); 1 + 2^-8 is a tie and
// rounds to the even 1; 1 + 3 2^-8 is a tie between 1 + 2^-7 and 1 + 2^-6 and rounds to the
// even 1 + 2^-6 = 1.015625.
const double a1 = 1 + 0x1p-9, tie_even = 1 + 0x1p-8, tie_up = 1 + 3 * 0x1p-8;

Tensor f32(const std::vector<double>& v, Shape s) { return make(DType::Float32, v, std::move(s)); }

// The reference interpreter's values, then the hand-derived ones, equal to the bit.
void check_exact(const Tensor& t, DType dtype, const std::vector<double>& expected) {
  CHECK(t.dtype() == dtype);
  CHECK(check_ref(t) == expected);
}

}  // namespace

TEST_CASE("Autocast scopes nest, a disabled scope turns autocast off, and only half dtypes are accepted") {
  CHECK(!autocast_dtype());
  {
    Autocast outer(DType::BFloat16);
    CHECK(autocast_dtype() == DType::BFloat16);
    {
      Autocast inner(DType::Float16);
      CHECK(autocast_dtype() == DType::Float16);
      {
        Autocast off(DType::BFloat16, false);
        CHECK(!autocast_dtype());
      }
      CHECK(autocast_dtype() == DType::Float16);
    }
    CHECK(autocast_dtype() == DType::BFloat16);
  }
  CHECK(!autocast_dtype());
  test::check_message(test::error_of([] { Autocast bad(DType::Float32); }),
                      {"Autocast", "BFloat16 or Float16", "got Float32"});
  CHECK(!autocast_dtype());
}

TEST_CASE("matmul under Autocast multiplies bf16-rounded operands, sums in Float32 and rounds the result") {
  const Tensor a = f32({tie_even, 2, 3, tie_up}, {2, 2}).realize();
  const Tensor b = f32({1, 0.5, 0.25, 1 + 0x1p-10}, {2, 2}).realize();
  // Rounded: a' = [[1, 2], [3, 1.015625]], b' = [[1, 0.5], [0.25, 1]].
  Tensor c;
  {
    Autocast ac(DType::BFloat16);
    c = a.matmul(b);
  }
  // 3 + 0.25390625 rounds to bf16's 3.25 (its ulp at 3 is 2^-6); the others are bf16 values.
  check_exact(c, DType::BFloat16, {1 + 0.5, 0.5 + 2, 3.25, 1.5 + 1.015625});
  // Outside the scope the same product is Float32's.
  check_values(
      a.matmul(b),
      {tie_even + 0.5, tie_even * 0.5 + 2 * (1 + 0x1p-10), 3 + tie_up * 0.25, 1.5 + tie_up * (1 + 0x1p-10)},
      1);
}

TEST_CASE("the Float32 accumulator, rounded once: 301 ones sum to 301, whose bf16 is 300") {
  const Tensor a = Tensor::ones({1, 301}).realize(), b = Tensor::ones({301, 1}).realize();
  Autocast ac(DType::BFloat16);
  // A bf16 accumulator would stop at 256 (256 + 1 rounds back to 256); 301 is a tie between
  // bf16's 300 and 302 and rounds to the even 300.
  check_exact(a.matmul(b), DType::BFloat16, {300});
}

TEST_CASE("matmul under Float16 autocast rounds to float16: 1 + 2^-12 to 1 and 2049 to 2048") {
  const Tensor a = f32({1 + 0x1p-12, 2049}, {1, 2}).realize(), b = f32({1, 1}, {2, 1}).realize();
  Autocast ac(DType::Float16);
  // 1 + 2049 rounded: 1 + 2048 = 2049, a tie between float16's 2048 and 2050, to the even 2048.
  // Unrounded operands would give 2050 + 2^-12, float16's 2050.
  check_exact(a.matmul(b), DType::Float16, {2048});
}

TEST_CASE("the rounding casts fuse into the matmul's kernel: one kernel, as the Float32 matmul") {
  const Tensor a = Tensor::randn({64, 48}).realize(), b = Tensor::randn({48, 32}).realize();
  auto kernels_of = [](Tensor t) {
    const auto before = counters().kernels_executed;
    t.realize();
    return counters().kernels_executed - before;
  };
  const uint64_t plain = kernels_of(a.matmul(b));
  Autocast ac(DType::BFloat16);
  const Tensor c = a.matmul(b);
  test::check_ref(a.matmul(b));  // the values: the reference interpreter's rounded operands
  CHECK(kernels_of(c) == plain);
  CHECK(plain == 1);
}

TEST_CASE(
    "Linear under Autocast: rounded input, weight and bias, one rounding of the sum, Float32 gradients") {
  nn::Linear fc(3, 2);
  fc.weight = f32({tie_even, 0.5, -1, 2, tie_up, 0.25}, {2, 3}).requires_grad_();
  fc.bias = f32({0.1, -0.2}, {2}).requires_grad_();
  const Tensor x = f32({a1, 2, 3, 1, 0.5, 0.25}, {2, 3}).requires_grad_();
  // x' = [[1, 2, 3], [1, 0.5, 0.25]], W' = [[1, 0.5, -1], [2, 1.015625, 0.25]],
  // b' = [bf16(0.1), bf16(-0.2)] = [0.10009765625, -0.2001953125].
  Tensor y;
  {
    Autocast ac(DType::BFloat16);
    y = fc.forward(x);
  }
  // x' W'^T + b' in Float32, rounded once to bf16: -0.89990234375, 4.5810546875,
  // 1.10009765625 and 2.3701171875 round to -0.8984375, 4.59375, 1.1015625 and 2.375.
  check_exact(y, DType::BFloat16, {-0.8984375, 4.59375, 1.1015625, 2.375});
  y.sum().backward();  // outside the scope, as torch.autocast's recipe
  // dW = x'^T summed over the batch, dx = W' summed over the outputs, db = the batch size; each
  // passes the bf16 copy's cast, so it is bf16-rounded (these values are exact there).
  CHECK(fc.weight.grad().dtype() == DType::Float32);
  CHECK(fc.bias.grad().dtype() == DType::Float32);
  CHECK(x.grad().dtype() == DType::Float32);
  check_values(fc.weight.grad(), {2, 2.5, 3.25, 2, 2.5, 3.25});
  check_values(fc.bias.grad(), {2, 2});
  check_values(x.grad(), {3, 1.515625, -0.75, 3, 1.515625, -0.75});
}

// PyTorch's addmm adds the bias to the Float32 sum and rounds once. x' W'^T = 1 + 3 2^-9 and
// b = 2^-8: once, 1 + 5 2^-9 rounds to 1 + 2^-7 (129.25 ulps of 2^-7); rounded twice, the
// product's 1 + 2^-7 plus 2^-8 is a tie that rounds to the even 1 + 2^-6.
TEST_CASE("Linear under Autocast rounds x W^T + b once") {
  nn::Linear fc(2, 1);
  fc.weight = f32({1, 1}, {1, 2});
  fc.bias = f32({0x1p-8}, {1});
  Autocast ac(DType::BFloat16);
  check_exact(fc.forward(f32({1, 3 * 0x1p-9}, {1, 2})), DType::BFloat16, {1 + 0x1p-7});
}

TEST_CASE("Linear refuses mixed dtypes outside Autocast and accepts them inside") {
  nn::Linear fc(2, 1);
  const Tensor x = Tensor::ones({1, 2}).cast(DType::BFloat16);
  test::check_message(test::error_of([&] { fc.forward(x); }), {"Linear", "BFloat16", "Float32"});
  Autocast ac(DType::BFloat16);
  CHECK(fc.forward(x).dtype() == DType::BFloat16);
}

TEST_CASE("conv2d and Conv2d under Autocast: rounded operands and bias, Float32 sums, one rounding") {
  // x' = [1, 2, 3, 4] (4 + 2^-6 is a tie and rounds to the even 4), w' = [1, 0.5, 0.25, 1].
  const Tensor x = f32({a1, 2, 3, 4 + 0x1p-6}, {1, 1, 2, 2});
  const Tensor w = f32({1, 0.5, 0.25, tie_even}, {1, 1, 2, 2});
  const Tensor b = f32({0.1}, {1});
  // 1 + 1 + 0.75 + 4 + 0.10009765625 = 6.85009765625 rounds to 6.84375 (ulp 2^-5 at 6).
  const double want = 6.84375;
  {
    const Tensor xg = x.detach().requires_grad_(), wg = w.detach().requires_grad_(),
                 bg = b.detach().requires_grad_();
    Tensor y;
    {
      Autocast ac(DType::BFloat16);
      y = nn::functional::conv2d(xg, wg, bg);
    }
    check_exact(y, DType::BFloat16, {want});
    // Through conv2d's own gradient and the rounding casts: dx = w', dw = x', db = 1, in Float32.
    y.sum().backward();
    CHECK(xg.grad().dtype() == DType::Float32);
    CHECK(wg.grad().dtype() == DType::Float32);
    check_values(xg.grad(), {1, 0.5, 0.25, 1});
    check_values(wg.grad(), {1, 2, 3, 4});
    check_values(bg.grad(), {1});
  }
  nn::Conv2d conv(1, 1, {2, 2});
  conv.weight = w;
  conv.bias = b;
  Autocast ac(DType::BFloat16);
  check_values(conv.forward(x.cast(DType::BFloat16)), {want});
  check_values(nn::functional::conv1d(f32({a1, 3}, {1, 1, 2}), f32({tie_even, 0.5}, {1, 1, 2})), {1 + 1.5});
}

TEST_CASE("scaled_dot_product_attention under Autocast rounds q, k, v and a float mask, and returns bf16") {
  const Tensor q = Tensor::randn({2, 3, 8, 16}).realize(), k = Tensor::randn({2, 3, 8, 16}).realize(),
               v = Tensor::randn({2, 3, 8, 16}).realize(), mask = Tensor::randn({8, 8}).realize();
  const auto bf16 = [](const Tensor& t) { return t.cast(DType::BFloat16); };
  Autocast ac(DType::BFloat16);
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    const Tensor m = causal ? Tensor() : mask;
    // A Float32 k beside a bf16 q (a cache of another dtype) is rounded too, not refused.
    const Tensor y = nn::scaled_dot_product_attention(bf16(q), k, v, m, std::nullopt, causal);
    CHECK(y.dtype() == DType::BFloat16);
    const std::vector<double> got = check_ref(y);
    const Tensor rounded = nn::scaled_dot_product_attention(bf16(q), bf16(k), bf16(v), causal ? m : bf16(m),
                                                            std::nullopt, causal);
    CHECK(got == values(rounded));
    // Within bf16's rounding of Float32's attention.
    Tensor full;
    {
      Autocast off(DType::BFloat16, false);
      full = nn::scaled_dot_product_attention(q, k, v, m, std::nullopt, causal).realize();
    }
    const std::vector<double> want = values(full);
    for (size_t i = 0; i < got.size(); ++i)
      CHECK(std::abs(got[i] - want[i]) <= 0x1p-5 * (1 + std::abs(want[i])));
  }
}

TEST_CASE("BatchNorm2d under Autocast normalises a bf16 conv result in Float32") {
  nn::BatchNorm2d bn(3);
  const Tensor x = Tensor::randn({4, 3, 5, 5}).cast(DType::BFloat16).realize();
  const Tensor want = bn.forward(x.cast(DType::Float32)).realize();
  Autocast ac(DType::BFloat16);
  const Tensor y = bn.forward(x);
  CHECK(y.dtype() == DType::Float32);
  CHECK(check_ref(y) == values(want));
}

// A residual MLP block under Autocast, forward and weight gradients: every activation and
// every gradient of one ([N, H] elements, the largest buffers) is stored as bfloat16, so each
// product reads bfloat16 operands (the pair-dot unit's, where the Target has it) and moves
// half the bytes. The exceptions are each GELU's tanh, which its forward stores in Float32 for
// the backward (a transcendental is computed once). The gradients stay within a few percent
// of Float32's.
TEST_CASE("an Autocast MLP block stores its activations and their gradients as bfloat16") {
  const int64_t N = 512, D = 64, H = 256, layers = 2;
  const Tensor x0 = Tensor::randn({N, D}).realize();
  std::vector<nn::LayerNorm> norms;
  std::vector<nn::Linear> fc1, fc2;
  std::vector<Tensor> weights;
  for (int64_t l = 0; l < layers; ++l) {
    norms.emplace_back(D);
    fc1.emplace_back(D, H);
    fc2.emplace_back(H, D);
    weights.push_back(fc1.back().weight);
    weights.push_back(fc2.back().weight);
  }
  const auto grads_of = [&](bool autocast) {
    Autocast ac(DType::BFloat16, autocast);
    Tensor x = x0;
    for (int64_t l = 0; l < layers; ++l)
      x = x + fc2[l].forward(fc1[l].forward(norms[l].forward(x)).gelu("tanh"));
    return gradient((x * x).sum(), weights);
  };
  const std::vector<Tensor> grads = grads_of(true);
  int64_t bf16 = 0, f32 = 0;
  for (const auto& k : schedule_of(grads))
    for (size_t o = 0; o < k.outputs; ++o)
      if (k.buffers[o].numel >= N * H) (k.buffers[o].dtype == DType::BFloat16 ? bf16 : f32) += 1;
  // Without the pair-dot unit (AVX512_BF16) a product multiplies Float32 tiles, so the
  // weight gradient whose b is an [N, H] activation packs it widened, in Float32 panels:
  // one more Float32 buffer of that size per layer.
  const int64_t panels = current_target().pair_dot() ? 0 : layers;
  CHECK(f32 == layers + panels);
  CHECK(bf16 >= 4 * layers);
  const std::vector<Tensor> full = grads_of(false);
  for (size_t i = 0; i < grads.size(); ++i) {
    const std::vector<double> got = values(grads[i]), want = values(full[i]);
    double error = 0, norm = 0;
    for (size_t e = 0; e < got.size(); ++e)
      error += (got[e] - want[e]) * (got[e] - want[e]), norm += want[e] * want[e];
    CAPTURE(i);
    CHECK(std::sqrt(error / norm) < 0.03);
  }
}

TEST_CASE("reductions, softmax, norms and losses take half inputs in Float32 under Autocast") {
  const Tensor ones = Tensor::ones({301}, DType::BFloat16).realize();
  CHECK(values(ones.sum()) == std::vector<double>{300});  // outside: rounded to bf16 (301 is a tie)
  Autocast ac(DType::BFloat16);
  const Tensor s = ones.sum();
  CHECK(s.dtype() == DType::Float32);
  check_values(s, {301});
  const Tensor h = make(DType::BFloat16, {1, 2, 3, 4}, {1, 4}).realize();
  const Tensor h32 = make(DType::Float32, {1, 2, 3, 4}, {1, 4}).realize();
  CHECK(h.mean().dtype() == DType::Float32);
  check_values(h.mean(), {2.5});
  CHECK(h.var({1}).dtype() == DType::Float32);
  check_values(h.var({1}), {5.0 / 3}, 1);
  const Tensor sm = h.softmax(1);
  CHECK(sm.dtype() == DType::Float32);
  // Bit for bit the Float32 program's values; against the interpreter, within the row sum's
  // order (the kernel's, not the interpreter's sequential one: docs/semantics.md).
  const std::vector<double> want = values(h32.softmax(1).realize());
  CHECK(check_ref(sm, 4) == want);
  CHECK(h.log_softmax(1).dtype() == DType::Float32);
  CHECK(h.logsumexp(1).dtype() == DType::Float32);
  nn::LayerNorm ln(4);
  const Tensor y = ln.forward(h);
  CHECK(y.dtype() == DType::Float32);
  check_values(y, values(ln.forward(h32).realize()));
  nn::RMSNorm rms(4);
  CHECK(rms.forward(h).dtype() == DType::Float32);
  const Tensor labels = Tensor::from_vector<int64_t>({2}, {1});
  const Tensor ce = nn::cross_entropy(h, labels);
  CHECK(ce.dtype() == DType::Float32);
  CHECK(check_ref(ce, 4) == values(nn::cross_entropy(h32, labels).realize()));
  CHECK(nn::mse(h, h * 2).dtype() == DType::Float32);
  check_values(nn::mse(h, h * 2), {(1 + 4 + 9 + 16) / 4.0});
  const Tensor bn = nn::functional::batch_norm(h.reshape({2, 2}), {}, {}, {}, {}, true);
  CHECK(bn.dtype() == DType::Float32);
}

TEST_CASE("a step captured under Autocast replays only under Autocast") {
  const Tensor a = f32({tie_even, 2, 3, tie_up}, {2, 2}).realize();
  const Tensor b = f32({1, 0.5, 0.25, 1 + 0x1p-10}, {2, 2}).realize();
  Capture step([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].matmul(in[1])}; });
  const std::vector<double> autocast_values{1.5, 2.5, 3.25, 2.515625};
  {
    Autocast ac(DType::BFloat16);
    for (int i = 0; i < 3; ++i) CHECK(values(step({a, b})[0]) == autocast_values);
    CHECK(step.captured({a, b}));
  }
  CHECK(!step.captured({a, b}));
  const std::vector<double> plain = values(step({a, b})[0]);
  CHECK(plain != autocast_values);
  CHECK(plain == values(a.matmul(b).realize()));
  {
    Autocast ac(DType::Float16);  // another dtype is another signature too
    CHECK(!step.captured({a, b}));
  }
}

TEST_CASE("the same graph built in and out of Autocast compiles to different kernels") {
  const Tensor a = f32({tie_even, 2}, {1, 2}).realize(), b = f32({1, 1}, {2, 1}).realize();
  Tensor in_scope;
  {
    Autocast ac(DType::BFloat16);
    in_scope = a.matmul(b).realize();
  }
  CHECK(values(in_scope) == std::vector<double>{3});
  CHECK(values(a.matmul(b).realize()) == std::vector<double>{3 + 0x1p-8});
}

// A small MLP trained the same few steps in Float32 and under bf16 Autocast, from the same
// initial weights on the same data: the losses agree within 1 % at every step (bf16 keeps
// 8 significant bits, a relative rounding of 2^-9 on each operand; measured: 0.33 % at most),
// and both decrease.
TEST_CASE("an MLP trained under bf16 Autocast tracks its Float32 training within 1 %") {
  auto train = [](bool autocast) {
    testing::SmallRegression model(11);
    const std::vector<Tensor> params = model.parameters();
    optim::SGD opt(params, 0.1);
    std::vector<double> losses;
    for (int step = 0; step < 8; ++step) {
      opt.zero_grad();
      Tensor loss;
      {
        Autocast ac(DType::BFloat16, autocast);
        loss = model.loss();
      }
      CHECK(loss.dtype() == DType::Float32);
      loss.backward();
      opt.step();
      losses.push_back(values(loss)[0]);
    }
    for (const Tensor& p : params) {
      CHECK(p.dtype() == DType::Float32);
      CHECK(p.grad().dtype() == DType::Float32);
    }
    return losses;
  };
  const std::vector<double> full = train(false), mixed = train(true);
  CHECK(mixed[0] != full[0]);  // the rounding happened
  for (size_t i = 0; i < full.size(); ++i) {
    INFO("step " << i << ": float32 " << full[i] << ", autocast " << mixed[i]);
    CHECK(std::abs(mixed[i] - full[i]) <= 0.01 * full[i]);
  }
  CHECK(mixed.back() < 0.8 * mixed.front());
  CHECK(full.back() < 0.8 * full.front());
}
