// The autodiff API of src/autograd.cpp: leaves, backward() and accumulation,
// zero_grad, detach, NoGrad, loom::gradient, the graph kept behind a realized
// tensor, and the errors.
#include "check.hpp"

#include <loom/loom.hpp>

using namespace loom;

namespace {
Tensor vec(std::vector<float> v) {
  const auto n = static_cast<int64_t>(v.size());
  return Tensor::from_vector<float>(v, {n});
}
std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }
}  // namespace

TEST_CASE("backward on a scalar loss fills grad() of every leaf it depends on") {
  Tensor w = vec({1, 2, 3}).requires_grad_(), b = vec({0.5f}).requires_grad_();
  const Tensor x = vec({4, 5, 6});  // not a leaf: gets no gradient
  CHECK(w.requires_grad());
  CHECK_FALSE(x.requires_grad());
  const Tensor loss = ((w * x).sum() + b.sum() * 2);
  CHECK(loss.requires_grad());
  loss.backward();
  CHECK(values(w.grad()) == std::vector<float>{4, 5, 6});
  CHECK(values(b.grad()) == std::vector<float>{2});
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(w.grad().requires_grad());  // gradients are detached, as PyTorch's .grad
}

TEST_CASE("gradients accumulate over uses and across backward() calls until zero_grad") {
  Tensor w = vec({1, 2}).requires_grad_();
  (w * w + w).sum().backward();  // 2w + 1, w used three times
  CHECK(values(w.grad()) == std::vector<float>{3, 5});
  const Tensor first = w.grad();  // the same gradient tensor: it sees the accumulation
  (w * 10).sum().backward();
  CHECK(values(w.grad()) == std::vector<float>{13, 15});
  CHECK(values(first) == std::vector<float>{13, 15});
  w.zero_grad();
  CHECK_FALSE(w.grad().defined());
  (w * 3).sum().backward();
  CHECK(values(w.grad()) == std::vector<float>{3, 3});
}

TEST_CASE("backward after the loss was realized: the graph behind it is kept, then released") {
  Tensor w = vec({1, 2, 3}).requires_grad_();
  Tensor loss = (w * w).sum();
  CHECK(loss.item<float>() == 14);  // printing the loss first, as users do
  loss.backward();
  CHECK(values(w.grad()) == std::vector<float>{2, 4, 6});
  // Like PyTorch without retain_graph, the graph went with the first backward().
  CHECK_THROWS_WITH_AS(loss.backward(), doctest::Contains("released by an earlier backward()"), Error);
  CHECK_THROWS_WITH_AS(gradient(loss, {w}),
                       doctest::Contains("gradient: the graph behind this tensor was released"), Error);
  // A lazy loss keeps its graph in itself: backward() twice accumulates twice.
  w.zero_grad();
  const Tensor lazy = (w * 2).sum();
  lazy.backward();
  lazy.backward();
  CHECK(values(w.grad()) == std::vector<float>{4, 4, 4});
}

TEST_CASE("a tensor realized inside the graph passes the gradient to the leaves behind it") {
  Tensor w = vec({1, 2}).requires_grad_();
  Tensor loss;
  {
    Tensor h = w * 3;
    h.realize();  // e.g. printed; h's handle dies, the loss's graph holds its buffer
    loss = (h * h).sum();
  }
  loss.backward();
  CHECK(values(w.grad()) == std::vector<float>{18, 36});  // d(9 w^2)/dw
}

TEST_CASE("a leaf never merges with an equal constant") {
  Tensor p = Tensor::zeros({3}).requires_grad_();
  const Tensor other = Tensor::zeros({3});  // the same constant p was made from
  (p * 2 + other * 5).sum().backward();
  CHECK(values(p.grad()) == std::vector<float>{2, 2, 2});
  // A leaf made from another leaf's values is a leaf of its own.
  Tensor a = vec({1, 2}).requires_grad_();
  Tensor b = a.detach();
  b.requires_grad_();
  (a * 3 + b * 7).sum().backward();
  CHECK(values(a.grad()) == std::vector<float>{3, 3});
  CHECK(values(b.grad()) == std::vector<float>{7, 7});
  // A view of a leaf is computed from it, as in PyTorch: requires_grad_() changes nothing.
  a.zero_grad();
  Tensor view = a.reshape({2});
  view.requires_grad_();
  (view * 5).sum().backward();
  CHECK(values(a.grad()) == std::vector<float>{5, 5});
  CHECK_FALSE(view.grad().defined());
}

TEST_CASE("a leaf's views and reshapes of views carry the gradient to it") {
  Tensor w = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  (w.reshape({3, 2}).reshape({6}) * Tensor::arange(6).cast(DType::Float32)).sum().backward();
  CHECK(values(w.grad()) == std::vector<float>{0, 1, 2, 3, 4, 5});
  CHECK(w.grad().shape() == Shape{2, 3});
}

TEST_CASE("detach and NoGrad cut the graph") {
  Tensor w = vec({1, 2}).requires_grad_();
  CHECK_FALSE(w.detach().requires_grad());
  (w * w.detach()).sum().backward();
  CHECK(values(w.grad()) == std::vector<float>{1, 2});
  w.zero_grad();
  Tensor target;
  {
    NoGrad guard;
    CHECK_FALSE(grad_enabled());
    target = w * 10;  // e.g. a target network's output
    CHECK_FALSE(target.requires_grad());
  }
  CHECK(grad_enabled());
  ((w - target) * (w - target)).sum().backward();  // 2 (w - target), target constant
  CHECK(values(w.grad()) == std::vector<float>{-18, -36});
  CHECK(values(target) == std::vector<float>{10, 20});  // values are unchanged
}

TEST_CASE("an optimizer-style update under NoGrad, then the next step's backward") {
  Tensor w = vec({1, -2}).requires_grad_();
  for (int step = 0; step < 3; ++step) {
    (w * w).sum().backward();
    {
      NoGrad guard;
      w.assign(w - w.grad() * 0.25f);
    }
    w.zero_grad();
    w.realize();
  }
  CHECK(values(w) == std::vector<float>{0.125f, -0.25f});  // w halves each step
  CHECK(w.requires_grad());
}

TEST_CASE("loom::gradient: lazy, zeros where the target does not depend, differentiable again") {
  const Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3}), unrelated = Tensor::ones({2}, DType::Float64);
  const Tensor y = (x * x * x).sum();
  const std::vector<Tensor> g = gradient(y, {x, unrelated});
  CHECK(g[0].to_vector<double>() == std::vector<double>{3, 12, 27});
  CHECK(g[1].to_vector<double>() == std::vector<double>{0, 0});
  CHECK(g[1].shape() == Shape{2});
  // The gradient is a graph like any other: its gradient is the second derivative.
  const Tensor x2 = Tensor::from_vector<double>({1, 2, 3}, {3});
  const Tensor g1 = gradient((x2 * x2 * x2).sum(), {x2})[0];
  CHECK(gradient(g1.sum(), {x2})[0].to_vector<double>() == std::vector<double>{6, 12, 18});
  // With respect to a lazy reshape: graphs built from it reshape its source directly.
  const Tensor r = x.reshape({3, 1});
  CHECK(gradient((r.reshape({1, 3}) * r.transpose()).sum(), {r})[0].to_vector<double>() ==
        std::vector<double>{2, 4, 6});
  // With respect to an intermediate, and to its input through every path.
  const Tensor h = x.exp();
  const std::vector<Tensor> gh = gradient((h * x).sum(), {h, x});
  CHECK(gh[0].to_vector<double>() == std::vector<double>{1, 2, 3});
  const auto gx = gh[1].to_vector<double>();
  for (int i = 0; i < 3; ++i) CHECK(gx[i] == doctest::Approx(std::exp(i + 1.0) * (i + 2)));
}

TEST_CASE("errors name the op and say what was expected") {
  Tensor w = vec({1, 2}).requires_grad_();
  CHECK_THROWS_WITH_AS((w * 2).backward(),
                       doctest::Contains("backward: the tensor of shape [2] has 2 elements"), Error);
  CHECK_THROWS_WITH_AS(vec({1}).backward(),
                       doctest::Contains("does not depend on any tensor that requires a gradient"), Error);
  CHECK_THROWS_WITH_AS(Tensor::from_vector<int32_t>({1, 2}, {2}).requires_grad_(),
                       doctest::Contains("requires_grad_: the tensor has dtype Int32"), Error);
  CHECK_THROWS_WITH_AS((w * 2).requires_grad_(false), doctest::Contains("use detach()"), Error);
  CHECK_THROWS_WITH_AS(gradient(w, {w}), doctest::Contains("gradient: the tensor of shape [2]"), Error);
  CHECK_THROWS_WITH_AS(gradient(w.sum(), {Tensor::arange(3)}), doctest::Contains("wrt[0] has dtype Int32"),
                       Error);
  CHECK_THROWS_WITH_AS(Tensor().backward(), doctest::Contains("backward: the tensor is undefined"), Error);
  CHECK_THROWS_WITH_AS(Tensor().requires_grad_(),
                       doctest::Contains("requires_grad_: the tensor is undefined"), Error);
  CHECK_THROWS_WITH_AS(Tensor().requires_grad(), doctest::Contains("requires_grad: the tensor is undefined"),
                       Error);
  CHECK_THROWS_WITH_AS(Tensor().grad(), doctest::Contains("grad: the tensor is undefined"), Error);
  CHECK_THROWS_WITH_AS(Tensor().detach(), doctest::Contains("detach: the tensor is undefined"), Error);
  CHECK_THROWS_WITH_AS(gradient(w.sum(), {Tensor()}), doctest::Contains("gradient: the tensor is undefined"),
                       Error);
  CHECK_FALSE(Tensor::arange(3).requires_grad());
  // Integer values get no gradient: the path through a cast to an integer is cut.
  Tensor v = vec({1.5f, 2.5f}).requires_grad_();
  CHECK_THROWS_AS((v.cast(DType::Int32).cast(DType::Float32)).sum().backward(), Error);
}

TEST_CASE("requires_grad_ realizes a lazy tensor into a buffer of its own; off clears the mark") {
  Tensor w = Tensor::full({2}, 4).requires_grad_();
  CHECK(w.requires_grad());
  (w * w).sum().backward();
  CHECK(values(w.grad()) == std::vector<float>{8, 8});
  w.requires_grad_(false);
  CHECK_FALSE(w.requires_grad());
  CHECK_THROWS_AS((w * w).sum().backward(), Error);
}

TEST_CASE("backward then reading the loss computes the loss in the step's schedule") {
  Tensor w = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}).requires_grad_();
  const Tensor x = Tensor::from_vector<float>({1, 0, 0, 1}, {2, 2});
  const Tensor loss = x.matmul(w).exp().sum();
  loss.backward();
  const auto before = counters();
  {
    NoGrad guard;
    w.assign(w - w.grad() * 0.01f);
  }
  w.realize();  // the step: the loss is realized with it
  const auto after_step = counters();
  const float l = loss.item<float>();
  CHECK(counters().kernels_executed == after_step.kernels_executed);  // reading it ran nothing more
  auto realizes = [](const Counters& c) { return c.schedule_cache_hits + c.schedule_cache_misses; };
  CHECK(realizes(after_step) - realizes(before) == 1);
  CHECK(l == doctest::Approx(std::exp(1.0f) + std::exp(2.0f) + std::exp(3.0f) + std::exp(4.0f)));
}

TEST_CASE(
    "a training loop keeps live UOps and buffers flat, whether the loss is read before or after backward") {
  Tensor w = Tensor::from_vector<float>({0.5f, -0.25f, 1, 2}, {2, 2}).requires_grad_();
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  auto step = [&](int i) {
    const Tensor loss = (x.matmul(w).tanh() - 0.5f).square().mean();
    if (i % 2 == 0) loss.item<float>();
    loss.backward();
    {
      NoGrad guard;
      w.assign(w - w.grad() * 0.1f);
    }
    w.zero_grad();
    w.realize();
    if (i % 2 == 1) loss.item<float>();
  };
  for (int i = 0; i < 4; ++i) step(i);
  const auto at4 = counters();
  for (int i = 4; i < 20; ++i) step(i);
  const auto at20 = counters();
  CHECK(at20.live_uops == at4.live_uops);
  CHECK(at20.live_buffers == at4.live_buffers);
  CHECK(at20.kernel_cache_entries == at4.kernel_cache_entries);
}
