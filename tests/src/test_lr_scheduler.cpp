// LR schedules against PyTorch's rates (tests/data/lr_table.json, made once by
// tests/data/make_lr_table.py), their errors, and the rate as a bound value:
// a schedule compiles no kernel and a Capture replays with the current rate.
#include "check.hpp"
#include "support/error_message.hpp"

#include <loom/capture.hpp>
#include <loom/lr_scheduler.hpp>
#include <loom/nn.hpp>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <functional>
#include <memory>

using namespace loom;
using test::check_message;
using test::error_of;

namespace {

std::vector<double> torch_rates(const std::string& name) {
  std::ifstream in(std::string(LOOM_TEST_DATA) + "/lr_table.json");
  REQUIRE(in);
  const auto table = nlohmann::json::parse(in);
  return table.at("cases").at(name).get<std::vector<double>>();
}

Tensor param() { return Tensor::zeros({1}).requires_grad_(); }

// The rate after construction and after each of `steps` steps.
std::vector<double> rates(optim::Optimizer& opt, optim::LRScheduler& s, size_t steps) {
  std::vector<double> out{opt.lr()};
  for (size_t i = 0; i < steps; ++i) {
    s.step();
    out.push_back(opt.lr());
    CHECK(s.get_last_lr() == opt.lr());
  }
  return out;
}

}  // namespace

TEST_CASE("StepLR, LinearLR, CosineAnnealingLR, OneCycleLR, SequentialLR and chaining give PyTorch's rates") {
  const auto check = [](const std::string& name, const std::function<std::vector<double>(optim::SGD&)>& run) {
    CAPTURE(name);
    optim::SGD opt({param()}, 0.1, 0.9);
    const auto want = torch_rates(name);
    const auto got = run(opt);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      CAPTURE(i);
      CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-15));  // the same formulas: equal up to libm's cos
    }
  };
  check("step", [](optim::SGD& o) {
    optim::StepLR s(o, 3, 0.5);
    return rates(o, s, 10);
  });
  check("linear", [](optim::SGD& o) {
    optim::LinearLR s(o, 0.25, 1.0, 4);
    return rates(o, s, 8);
  });
  check("cosine", [](optim::SGD& o) {
    optim::CosineAnnealingLR s(o, 5, 0.01);
    return rates(o, s, 14);
  });
  check("onecycle", [](optim::SGD& o) {
    optim::OneCycleLR s(o, 0.5, 12);
    return rates(o, s, 11);
  });
  check("onecycle_three_phase_linear", [](optim::SGD& o) {
    optim::OneCycleLR s(o, 0.5, 10, 0.25, "linear", 10, 100, true);
    return rates(o, s, 9);
  });
  check("sequential_warmup_cosine", [](optim::SGD& o) {
    optim::SequentialLR s(
        o,
        {std::make_shared<optim::LinearLR>(o, 0.1, 1.0, 3), std::make_shared<optim::CosineAnnealingLR>(o, 6)},
        {3});
    return rates(o, s, 10);
  });
  check("chained_linear_step", [](optim::SGD& o) {
    optim::ChainedScheduler s(
        {std::make_shared<optim::LinearLR>(o, 0.5, 1.0, 2), std::make_shared<optim::StepLR>(o, 2, 0.5)});
    return rates(o, s, 8);
  });
}

TEST_CASE("schedulers reject bad arguments, naming them") {
  optim::SGD opt({param()}, 0.1);
  check_message(error_of([&] { optim::StepLR(opt, 0); }), {"StepLR", "step_size", "0"});
  check_message(error_of([&] { optim::LinearLR(opt, 0); }), {"LinearLR", "start_factor"});
  check_message(error_of([&] { optim::LinearLR(opt, 0.5, 2); }), {"LinearLR", "end_factor"});
  check_message(error_of([&] { optim::CosineAnnealingLR(opt, 0); }), {"CosineAnnealingLR", "T_max"});
  check_message(error_of([&] { optim::OneCycleLR(opt, 1, 10, 0.3, "step"); }),
                {"OneCycleLR", "anneal_strategy"});
  optim::OneCycleLR one(opt, 1, 2);
  one.step();
  one.step();
  check_message(error_of([&] { one.step(); }), {"OneCycleLR", "total_steps 2"});
  optim::SGD other({param()}, 0.1);
  check_message(error_of([&] { optim::SequentialLR(opt, {std::make_shared<optim::StepLR>(other, 2)}, {}); }),
                {"SequentialLR", "another optimizer"});
  check_message(error_of([&] { optim::SequentialLR(opt, {std::make_shared<optim::StepLR>(opt, 2)}, {3}); }),
                {"SequentialLR", "milestones"});
}

TEST_CASE(
    "a schedule changes the rate without compiling a kernel, and a Capture replays with the current rate") {
  const auto make = [] {
    manual_seed(4);
    return nn::Sequential(nn::Linear(3, 5), nn::ReLU(), nn::Linear(5, 1));
  };
  manual_seed(8);
  const Tensor x = Tensor::randn({8, 3}).realize(), y = Tensor::randn({8, 1}).realize();
  nn::Sequential plain = make(), captured = make();
  optim::SGD plain_opt(plain.parameters(), 0.1, 0.9), captured_opt(captured.parameters(), 0.1, 0.9);
  optim::OneCycleLR plain_sched(plain_opt, 0.3, 20), captured_sched(captured_opt, 0.3, 20);
  const auto step = [&](nn::Sequential& net, optim::Optimizer& opt) {
    opt.zero_grad();
    const Tensor loss = nn::mse(net(x), y);
    loss.backward();
    opt.step();
    return std::vector<Tensor>{loss};
  };
  Capture capture([&](const std::vector<Tensor>&) { return step(captured, captured_opt); });
  uint64_t compiled_after_warmup = 0;
  for (int i = 0; i < 12; ++i) {
    if (i == 3) compiled_after_warmup = counters().kernels_compiled;
    step(plain, plain_opt);
    capture({x});
    plain_sched.step();
    captured_sched.step();
    CAPTURE(i);
    const auto a = plain.parameters(), b = captured.parameters();
    for (size_t k = 0; k < a.size(); ++k) {
      const auto va = a[k].to_vector<float>(), vb = b[k].to_vector<float>();
      CHECK(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) == 0);
    }
  }
  CHECK(capture.captured({x}));
  CHECK(counters().kernels_compiled == compiled_after_warmup);  // 9 rates later, no new kernel
  CHECK(plain_opt.lr() != 0.3 / 25);
}
