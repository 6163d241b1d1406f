// loom::Autocast: the lower-precision ops (matmul, Linear, conv) multiply operands rounded to
// the autocast dtype and accumulate in Float32, the Float32-list ops (reductions, norms,
// softmax, losses) take half inputs in Float32, gradients reach Float32 parameters in Float32,
// and a Capture keys its recordings on the state. Expected values are hand-derived from the
// rounded operands, and every result is also checked against the reference interpreter.
#include "check.hpp"
#include "support/error_message.hpp"
#include "support/small_regression.hpp"

#include <loom/autocast.hpp>
#include <loom/capture.hpp>
#include <loom/debug.hpp>
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

TEST_CASE("matmul under Autocast multiplies bf16-rounded operands and accumulates in Float32") {
  const Tensor a = f32({tie_even, 2, 3, tie_up}, {2, 2}).realize();
  const Tensor b = f32({1, 0.5, 0.25, 1 + 0x1p-10}, {2, 2}).realize();
  // Rounded: a' = [[1, 2], [3, 1.015625]], b' = [[1, 0.5], [0.25, 1]].
  Tensor c;
  {
    Autocast ac(DType::BFloat16);
    c = a.matmul(b);
  }
  CHECK(c.dtype() == DType::Float32);
  check_values(c, {1 + 0.5, 0.5 + 2, 3 + 0.25390625, 1.5 + 1.015625});
  // Outside the scope the same product is Float32's.
  check_values(
      a.matmul(b),
      {tie_even + 0.5, tie_even * 0.5 + 2 * (1 + 0x1p-10), 3 + tie_up * 0.25, 1.5 + tie_up * (1 + 0x1p-10)},
      1);
}

TEST_CASE("the Float32 accumulator and result: 301 ones sum to 301, which bf16 cannot hold") {
  const Tensor a = Tensor::ones({1, 301}).realize(), b = Tensor::ones({301, 1}).realize();
  Autocast ac(DType::BFloat16);
  const Tensor c = a.matmul(b);
  CHECK(c.dtype() == DType::Float32);
  check_values(c, {301});  // a bf16 accumulator stops at 256; a bf16 result would be 300
}

TEST_CASE("matmul under Float16 autocast rounds to float16: 1 + 2^-12 to 1 and 2049 to 2048") {
  const Tensor a = f32({1 + 0x1p-12, 2049}, {1, 2}).realize(), b = f32({1, 1}, {2, 1}).realize();
  Autocast ac(DType::Float16);
  check_values(a.matmul(b), {2049});  // Float32 gives 2050 + 2^-12
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

TEST_CASE("Linear under Autocast: rounded input, weight and bias, a Float32 result, Float32 gradients") {
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
  CHECK(y.dtype() == DType::Float32);
  check_values(y, {1 + 1 - 3 + 0.10009765625, 2 + 2.03125 + 0.75 - 0.2001953125,
                   1 + 0.25 - 0.25 + 0.10009765625, 2 + 0.5078125 + 0.0625 - 0.2001953125});
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

TEST_CASE("Linear refuses mixed dtypes outside Autocast and accepts them inside") {
  nn::Linear fc(2, 1);
  const Tensor x = Tensor::ones({1, 2}).cast(DType::BFloat16);
  test::check_message(test::error_of([&] { fc.forward(x); }), {"Linear", "BFloat16", "Float32"});
  Autocast ac(DType::BFloat16);
  CHECK(fc.forward(x).dtype() == DType::Float32);
}

TEST_CASE("conv2d and Conv2d under Autocast: rounded operands and bias, Float32 sums") {
  // x' = [1, 2, 3, 4] (4 + 2^-6 is a tie and rounds to the even 4), w' = [1, 0.5, 0.25, 1].
  const Tensor x = f32({a1, 2, 3, 4 + 0x1p-6}, {1, 1, 2, 2});
  const Tensor w = f32({1, 0.5, 0.25, tie_even}, {1, 1, 2, 2});
  const Tensor b = f32({0.1}, {1});
  const double want = 1 + 1 + 0.75 + 4 + 0.10009765625;
  {
    const Tensor xg = x.detach().requires_grad_(), wg = w.detach().requires_grad_(),
                 bg = b.detach().requires_grad_();
    Tensor y;
    {
      Autocast ac(DType::BFloat16);
      y = nn::functional::conv2d(xg, wg, bg);
    }
    CHECK(y.dtype() == DType::Float32);
    check_values(y, {want});
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
  const std::vector<double> autocast_values{1.5, 2.5, 3.25390625, 2.515625};
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
