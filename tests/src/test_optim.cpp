// loom::optim: each optimizer's updates against PyTorch's formulas computed by
// hand in float64, learning-rate changes, skipped parameters, errors, and the
// step as one schedule that updates every parameter in its own buffer.
#include "check.hpp"
#include "support/error_message.hpp"

#include <cmath>
#include <functional>

using namespace loom;
using test::buffer_address;
using test::check_message;
using test::error_of;
using test::values;

namespace {

// A loss whose gradient is known in closed form: sum(a/2 p^2 + c p) has gradient a p + c.
const std::vector<double> p0{1, -2, 0.5, 3}, a{0.5, 1, 2, 0.1}, c{0.3, -0.2, 0, 1};

Tensor quadratic_loss(const Tensor& p) {
  const Tensor ta = Tensor::from_vector<double>(a, {4}).cast(p.dtype());
  const Tensor tc = Tensor::from_vector<double>(c, {4}).cast(p.dtype());
  return (ta * 0.5 * p.square() + tc * p).sum();
}
std::vector<double> gradient_at(const std::vector<double>& p) {
  std::vector<double> g(p.size());
  for (size_t i = 0; i < p.size(); ++i) g[i] = a[i] * p[i] + c[i];
  return g;
}

// Runs `steps` updates of `opt` on the quadratic; `lr_at(step)` (1-based) is set before each.
void run(optim::Optimizer& opt, Tensor& p, int steps, const std::function<double(int)>& lr_at) {
  for (int s = 1; s <= steps; ++s) {
    opt.set_lr(lr_at(s));
    opt.zero_grad();
    quadratic_loss(p).backward();
    opt.step();
  }
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])),
                  "element " << i << ": got " << got[i] << ", expected " << want[i]);
}

double lr_schedule(int step) { return step < 3 ? 0.1 : 0.05; }

}  // namespace

TEST_CASE("SGD: p -= lr (g + wd p), with momentum buf = m buf + g, lr changed between steps") {
  for (auto [momentum, wd] : {std::pair{0.0, 0.0}, {0.9, 0.0}, {0.9, 0.01}, {0.0, 0.1}}) {
    CAPTURE(momentum);
    CAPTURE(wd);
    Tensor p = Tensor::from_vector<double>(p0, {4}).cast(DType::Float32).requires_grad_();
    optim::SGD opt({p}, 1.0, momentum, wd);
    run(opt, p, 4, lr_schedule);
    std::vector<double> want = p0, buf(4, 0);
    for (int s = 1; s <= 4; ++s) {
      const auto g = gradient_at(want);
      for (size_t i = 0; i < 4; ++i) {
        double d = g[i] + wd * want[i];
        if (momentum != 0) d = buf[i] = s == 1 ? d : momentum * buf[i] + d;
        want[i] -= lr_schedule(s) * d;
      }
    }
    check_close(values(p), want, 2e-6);
    CHECK(opt.steps() == 4);
    CHECK(opt.lr() == 0.05);
  }
}

TEST_CASE("Adam and AdamW follow PyTorch's bias-corrected update, Float32 and Float64") {
  const double b1 = 0.8, b2 = 0.95, eps = 1e-6;
  for (bool decoupled : {false, true})
    for (DType dt : {DType::Float32, DType::Float64}) {
      CAPTURE(decoupled);
      const double wd = decoupled ? 0.05 : 0.02;
      Tensor p = Tensor::from_vector<double>(p0, {4}).cast(dt).requires_grad_();
      std::unique_ptr<optim::Optimizer> opt;
      if (decoupled)
        opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{p}, 1.0, b1, b2, eps, wd);
      else
        opt = std::make_unique<optim::Adam>(std::vector<Tensor>{p}, 1.0, b1, b2, eps, wd);
      run(*opt, p, 5, lr_schedule);
      std::vector<double> want = p0, m(4, 0), v(4, 0);
      for (int t = 1; t <= 5; ++t) {
        const double lr = lr_schedule(t);
        auto g = gradient_at(want);
        for (size_t i = 0; i < 4; ++i) {
          if (decoupled)
            want[i] *= 1 - lr * wd;
          else
            g[i] += wd * want[i];
          m[i] = b1 * m[i] + (1 - b1) * g[i];
          v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
          const double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
          want[i] -= lr / (1 - std::pow(b1, t)) * m[i] / denom;
        }
      }
      check_close(values(p), want, dt == DType::Float32 ? 2e-6 : 1e-13);
    }
}

TEST_CASE("Adam's defaults are PyTorch's; AdamW's weight decay defaults to 0.01") {
  Tensor p = Tensor::from_vector<float>({2}, {1}).requires_grad_();
  optim::Adam adam({p});
  CHECK(adam.lr() == 1e-3);
  (p * 3).sum().backward();
  adam.step();  // the first step moves by lr * sign(g) (up to eps)
  CHECK(values(p)[0] == doctest::Approx(2 - 1e-3).epsilon(1e-6));
  Tensor q = Tensor::from_vector<float>({2}, {1}).requires_grad_();
  optim::AdamW adamw({q});
  (q * 3).sum().backward();
  adamw.step();
  CHECK(values(q)[0] == doctest::Approx(2 * (1 - 1e-3 * 1e-2) - 1e-3).epsilon(1e-6));
}

TEST_CASE("a parameter without a gradient is left alone; zero_grad clears every gradient") {
  Tensor used = Tensor::from_vector<float>({1, 1}, {2}).requires_grad_();
  Tensor unused = Tensor::from_vector<float>({5, 5}, {2}).requires_grad_();
  optim::SGD opt({used, unused}, 0.5, 0.9);
  (used * 2).sum().backward();
  opt.step();
  CHECK(values(used) == std::vector<double>{0, 0});
  CHECK(values(unused) == std::vector<double>{5, 5});
  CHECK(values(used.grad()) == std::vector<double>{2, 2});  // the gradient the step used, still readable
  opt.zero_grad();
  CHECK(!used.grad().defined());
  CHECK(!unused.grad().defined());
}

TEST_CASE("a step is one schedule that updates parameters and state in their own buffers") {
  Tensor w = Tensor::randn({8, 4}).requires_grad_(), b = Tensor::zeros({4}).requires_grad_();
  const Tensor x = Tensor::randn({16, 8});
  optim::Adam opt({w, b}, 1e-2);
  for (int step = 0; step < 3; ++step) {
    const void *w_at = buffer_address(w), *b_at = buffer_address(b);
    const auto before = counters();
    opt.zero_grad();
    Tensor loss = (x.matmul(w) + b).relu().square().mean();
    loss.backward();
    opt.step();
    const Counters now = counters();  // one realize, planned or replayed: forward, backward, update
    CHECK(now.schedule_cache_hits + now.schedule_cache_misses - before.schedule_cache_hits -
              before.schedule_cache_misses ==
          1);
    CHECK(buffer_address(w) == w_at);
    CHECK(buffer_address(b) == b_at);
    const auto after = counters();
    loss.item<float>();  // realized by the step: reading it runs nothing
    CHECK(counters().kernels_executed == after.kernels_executed);
  }
}

TEST_CASE(
    "Adam's update is one kernel per parameter writing its gradient, the parameter and both moments in "
    "place, with the values of one kernel per tensor") {
  // The quadratic's gradient a p + c is elementwise: elementwise_outputs joins it to the
  // update (4 outputs). A step runs that kernel, the loss's sum and the step count's
  // increment: 3 kernels, against 6 with the stage off (g, m, v, p, the sum, the count).
  for (bool decoupled : {false, true})
    for (DType dt : {DType::Float32, DType::Float64}) {
      CAPTURE(decoupled);
      std::vector<std::vector<double>> got;  // p, m, v: with the stage, then without
      for (const bool joined : {true, false}) {
        Context off{{"DISABLE", joined ? "" : "elementwise_outputs"}};
        Tensor p = Tensor::from_vector<double>(p0, {4}).cast(dt).realize().requires_grad_();
        std::unique_ptr<optim::Optimizer> opt;
        if (decoupled)
          opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{p}, 1.0, 0.8, 0.95, 1e-6, 0.05);
        else
          opt = std::make_unique<optim::Adam>(std::vector<Tensor>{p}, 1.0, 0.8, 0.95, 1e-6, 0.02);
        const auto state_of = [&](const std::string& key) {
          for (const auto& [k, t] : opt->state_dict())
            if (k == key) return t;
          FAIL("no state " << key);
          return Tensor();
        };
        const void* p_at = buffer_address(p);
        const void* m_at = buffer_address(state_of("state.0.exp_avg"));
        const void* v_at = buffer_address(state_of("state.0.exp_avg_sq"));
        for (int step = 1; step <= 5; ++step) {
          opt->set_lr(lr_schedule(step));
          opt->zero_grad();
          Tensor loss = quadratic_loss(p);
          loss.backward();
          const uint64_t before = counters().kernels_executed;
          opt->step();
          CHECK(counters().kernels_executed - before == (joined ? 3u : 6u));
        }
        CHECK(buffer_address(p) == p_at);  // every output in its own buffer: no copy
        CHECK(buffer_address(state_of("state.0.exp_avg")) == m_at);
        CHECK(buffer_address(state_of("state.0.exp_avg_sq")) == v_at);
        got.push_back(values(p));
        got.push_back(values(state_of("state.0.exp_avg")));
        got.push_back(values(state_of("state.0.exp_avg_sq")));
      }
      for (size_t i = 0; i < 3; ++i) CHECK(got[i] == got[i + 3]);  // bitwise
    }
}

TEST_CASE("optimizers reject bad hyper-parameters and parameters that are not leaves") {
  Tensor p = Tensor::ones({2}).requires_grad_();
  check_message(error_of([&] { optim::SGD({p}, -1); }), {"SGD", "learning rate", "-1"});
  check_message(error_of([&] { optim::SGD({p}, 0.1, -0.5); }), {"SGD", "momentum"});
  check_message(error_of([&] { optim::Adam({p}, 1e-3, 1.0); }), {"Adam", "beta1", "1"});
  check_message(error_of([&] { optim::AdamW({p}, 1e-3, 0.9, -0.1); }), {"AdamW", "beta2"});
  check_message(error_of([&] { optim::SGD(std::vector<Tensor>{}, 0.1); }), {"SGD", "empty"});
  check_message(error_of([&] { optim::SGD({Tensor::ones({3})}, 0.1); }), {"SGD", "[3]", "requires_grad_"});
  check_message(error_of([&] { optim::SGD({p, p}, 0.1); }), {"SGD", "twice"});
  optim::SGD opt({p}, 0.1);
  check_message(error_of([&] { opt.set_lr(NAN); }), {"SGD", "learning rate"});
}

TEST_CASE("clip_grad_norm_ scales gradients by max_norm / (total + 1e-6) when above, and returns the total") {
  Tensor p = Tensor::from_vector<double>({1, 2}, {2}).requires_grad_();
  Tensor q = Tensor::from_vector<double>({3}, {1}).requires_grad_();
  Tensor unused = Tensor::zeros({2}, DType::Float64).requires_grad_();
  (p * Tensor::from_vector<double>({3, 4}, {2})).sum().backward();  // grad [3, 4]
  (q * 12.0).sum().backward();  // grad [12]: total sqrt(9 + 16 + 144) = 13
  const Tensor total = optim::clip_grad_norm_({p, q, unused}, 6.5);
  const double coef = 6.5 / (13 + 1e-6);
  check_close(values(p.grad()), {3 * coef, 4 * coef}, 1e-14);
  check_close(values(q.grad()), {12 * coef}, 1e-14);
  CHECK(total.item<double>() == doctest::Approx(13).epsilon(1e-15));
  CHECK(!unused.grad().defined());
  // Below max_norm: unchanged; the norm is computed with the step's schedule.
  optim::SGD opt({p, q}, 0.1);
  opt.zero_grad();
  (p.sum() + q.sum()).backward();
  const Tensor small = optim::clip_grad_norm_(opt.params(), 10);
  opt.step();
  const Counters before = counters();
  CHECK(small.item<double>() == doctest::Approx(std::sqrt(3.0)).epsilon(1e-15));
  CHECK(counters().kernels_executed == before.kernels_executed);
  check_close(values(p.grad()), {1, 1}, 0);
  CHECK(optim::clip_grad_norm_({unused}, 1).item<float>() == 0);
  check_message(error_of([&] { optim::clip_grad_norm_({p}, -1); }), {"clip_grad_norm_", "max_norm", "-1"});
}

// ---- Float32 master weights of half parameters ---------------------------------------------------

namespace {
// One step of lr 1 on loss = sum(p * 2^-10): the gradient is 2^-10, a quarter of bf16's ulp
// 2^-8 just below 1, so a bf16 weight updated in place would stay 1 forever.
void tiny_step(optim::Optimizer& opt, const Tensor& p) {
  opt.zero_grad();
  (p * Tensor::scalar(0x1p-10, p.dtype())).sum().backward();
  opt.step();
}
double master_of(const optim::Optimizer& opt) {
  for (const auto& [key, t] : opt.state_dict())
    if (key == "state.0.master_param") return values(t)[0];
  FAIL("no master_param in the state dict");
  return 0;
}
}  // namespace

TEST_CASE("a bfloat16 parameter is updated through a Float32 master: small steps accumulate") {
  Tensor p = Tensor::ones({1}, DType::BFloat16).realize().requires_grad_();
  optim::SGD opt({p}, 1.0);
  // bf16's values next to 1 are 1 - 2^-8 and 1: 1 - 2^-10 rounds to 1, 1 - 2^-9 is a tie (the
  // even 1), 1 - 3 2^-10 is nearer 1 - 2^-8.
  const std::vector<double> want_p{1, 1, 1 - 0x1p-8, 1 - 0x1p-8};
  for (int s = 1; s <= 4; ++s) {
    INFO("step " << s);
    tiny_step(opt, p);
    CHECK(p.dtype() == DType::BFloat16);
    CHECK(values(p)[0] == want_p[s - 1]);
    CHECK(master_of(opt) == 1 - s * 0x1p-10);
  }
}

TEST_CASE("a half parameter assigned outside the optimizer restarts its master from the new value") {
  Tensor p = Tensor::ones({1}, DType::BFloat16).realize().requires_grad_();
  optim::SGD opt({p}, 1.0);
  tiny_step(opt, p);
  {
    NoGrad no_grad;
    p.assign(Tensor::full({1}, 0.5, DType::BFloat16)).realize();
  }
  tiny_step(opt, p);
  // 0.5 - 2^-10 is a tie between 0.5 and 0.5 - 2^-9 (bf16's ulp below 0.5): the even 0.5.
  CHECK(values(p)[0] == 0.5);
  CHECK(master_of(opt) == 0.5 - 0x1p-10);
  tiny_step(opt, p);
  CHECK(values(p)[0] == 0.5 - 0x1p-9);
  // A state dict without master_param (PyTorch's) restarts the master from the parameter.
  NamedTensors saved = opt.state_dict();
  std::map<std::string, Tensor> without;
  for (const auto& [key, t] : saved)
    if (key != "state.0.master_param") without.emplace(key, t);
  opt.load_state_dict(without);
  CHECK(master_of(opt) == 0.5 - 0x1p-9);
}

TEST_CASE("Adam keeps a float16 parameter's moments and master in Float32") {
  Tensor p = Tensor::ones({1}, DType::Float16).realize().requires_grad_();
  optim::Adam opt({p}, 1e-4);
  tiny_step(opt, p);
  for (const auto& [key, t] : opt.state_dict())
    if (key.starts_with("state.0.")) {
      INFO(key);
      CHECK(t.dtype() == DType::Float32);
    }
  // Adam's first step moves by lr (m / sqrt(v) = 1, less eps's 1e-5 relative): 1 - 1e-4 within two
  // Float32 ulps at 1 in the master, 1 in float16 (its ulp below 1 is 2^-11).
  CHECK(std::abs(master_of(opt) - (1 - 1e-4)) <= 2 * 0x1p-24);
  CHECK(values(p)[0] == 1.0);
}
