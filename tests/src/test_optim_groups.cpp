// Parameter groups (optim::ParamGroup, PyTorch's param_groups): each group updated with its
// own hyper-parameters exactly as an optimizer of that group alone would, learning-rate
// schedules per group from each group's own base, state dicts per group, and the errors.
#include "check.hpp"
#include "support/error_message.hpp"

#include <loom/lr_scheduler.hpp>
#include <loom/optim.hpp>

#include <functional>
#include <memory>

using namespace loom;
using test::check_message;
using test::error_of;
using test::values;

namespace {

Tensor param(std::vector<double> v) {
  const auto n = static_cast<int64_t>(v.size());
  return Tensor::from_vector<double>(std::move(v), {n}).cast(DType::Float32).realize().requires_grad_();
}

// A loss with a gradient that depends on the parameters: sum(p^3 / 3 + p) per parameter.
void backward(const std::vector<Tensor>& ps) {
  Tensor loss = Tensor::scalar(0.0f);
  for (const Tensor& p : ps) loss = loss + (p * p * p / 3.0 + p).sum();
  loss.backward();
}

struct Params {
  Tensor w = param({0.5, -1.0, 2.0}), b = param({0.25, -0.5}), e = param({1.0, 1.5, -2.0, 0.125});
  std::vector<Tensor> all() const { return {w, b, e}; }
};

// `steps` steps of each optimizer (one over every parameter); then every parameter's values.
std::vector<std::vector<float>> train(const std::vector<optim::Optimizer*>& opts,
                                      const std::vector<Tensor>& ps, int steps,
                                      const std::function<void(int)>& after_step = {}) {
  for (int s = 0; s < steps; ++s) {
    for (auto* o : opts) o->zero_grad();
    backward(ps);
    for (auto* o : opts) o->step();
    if (after_step) after_step(s);
  }
  std::vector<std::vector<float>> out;
  for (const Tensor& p : ps) out.push_back(p.to_vector<float>());
  return out;
}

}  // namespace

TEST_CASE("AdamW over two param groups equals an AdamW per group, bit for bit") {
  Params grouped, separate;
  optim::AdamW opt({{.params = {grouped.w, grouped.e}, .weight_decay = 0.1},
                    {.params = {grouped.b}, .lr = 0.03, .weight_decay = 0.0, .beta2 = 0.99}},
                   0.01);
  CHECK(opt.group_count() == 2);
  CHECK(opt.params().size() == 3);
  CHECK(opt.lr() == 0.01);
  CHECK(opt.lr(1) == 0.03);
  optim::AdamW decay({separate.w, separate.e}, 0.01, 0.9, 0.999, 1e-8, 0.1);
  optim::AdamW no_decay({separate.b}, 0.03, 0.9, 0.99, 1e-8, 0.0);
  const auto got = train({&opt}, grouped.all(), 4);
  const auto want = train({&decay, &no_decay}, separate.all(), 4);
  CHECK(got == want);
  CHECK(got[0] != std::vector<float>{0.5f, -1.0f, 2.0f});
}

TEST_CASE("SGD groups: momentum in one group only, a learning rate set per group or for all") {
  Params grouped, separate;
  optim::SGD opt({{.params = {grouped.w}}, {.params = {grouped.b, grouped.e}, .momentum = 0.9}}, 0.1);
  optim::SGD plain({separate.w}, 0.1), heavy({separate.b, separate.e}, 0.1, 0.9);
  const auto on_step = [](optim::Optimizer& o, int s) {
    if (s == 1) o.set_lr(1, 0.05);
    if (s == 2) o.set_lr(0.02);
  };
  const auto got = train({&opt}, grouped.all(), 4, [&](int s) { on_step(opt, s); });
  const auto want = train({&plain, &heavy}, separate.all(), 4, [&](int s) {
    if (s == 1) heavy.set_lr(0.05);
    if (s == 2) plain.set_lr(0.02), heavy.set_lr(0.02);
  });
  CHECK(got == want);
  // Hand-derived first step of w: p - 0.1 (p^2 + 1), no momentum buffer for its group.
  Params fresh;
  optim::SGD one({{.params = {fresh.w}}, {.params = {fresh.b}, .momentum = 0.9}}, 0.1);
  train({&one}, {fresh.w, fresh.b}, 1);
  const std::vector<double> w1 = values(fresh.w), hand{0.5 - 0.1 * (0.25 + 1), -1.0 - 0.1 * 2, 2.0 - 0.1 * 5};
  for (size_t i = 0; i < hand.size(); ++i) CHECK(w1[i] == doctest::Approx(hand[i]).epsilon(1e-6));
  std::vector<std::string> keys;
  for (const auto& [k, t] : one.state_dict()) keys.push_back(k);
  CHECK(std::count(keys.begin(), keys.end(), "state.1.momentum_buffer") == 1);
  CHECK(std::count(keys.begin(), keys.end(), "state.0.momentum_buffer") == 0);
  CHECK(std::count(keys.begin(), keys.end(), "param_groups.1.momentum") == 1);
}

TEST_CASE("a scheduler moves each group's rate from that group's own base, as PyTorch's") {
  Params p;
  optim::SGD opt({{.params = {p.w}}, {.params = {p.b}, .lr = 0.02}}, 0.1);
  optim::CosineAnnealingLR cosine(opt, 10, 0.001);
  Params q;
  optim::SGD alone0({q.w}, 0.1), alone1({q.b}, 0.02);
  optim::CosineAnnealingLR c0(alone0, 10, 0.001), c1(alone1, 10, 0.001);
  for (int s = 0; s < 12; ++s) {
    CHECK(opt.lr(0) == alone0.lr());
    CHECK(opt.lr(1) == alone1.lr());
    CHECK(cosine.get_last_lr(1) == c1.get_last_lr());
    cosine.step(), c0.step(), c1.step();
  }
  CHECK(cosine.base_lr(1) == 0.02);
  CHECK(opt.initial_lr(1) == 0.02);
  const NamedTensors state = cosine.state_dict();
  const auto base =
      std::find_if(state.begin(), state.end(), [](const auto& kv) { return kv.first == "base_lr"; });
  REQUIRE(base != state.end());
  CHECK(base->second.to_vector<double>() == std::vector<double>{0.1, 0.02});  // one per group
}

TEST_CASE("a grouped optimizer's state dict resumes bit for bit, its keys per group") {
  Params run, resumed;
  const auto make = [](const Params& p) {
    return std::make_unique<optim::Adam>(
        std::vector<optim::ParamGroup>{{.params = {p.w, p.b}, .weight_decay = 0.01},
                                       {.params = {p.e}, .lr = 0.05}},
        0.01);
  };
  auto whole = make(run);
  train({whole.get()}, run.all(), 5);
  auto first = make(resumed);
  train({first.get()}, resumed.all(), 2);
  std::map<std::string, Tensor> saved;
  for (auto& [k, t] : first->state_dict()) saved.emplace(k, t.clone().realize());
  for (const char* key : {"param_groups.0.lr", "param_groups.1.lr", "param_groups.0.weight_decay",
                          "param_groups.1.betas.0", "state.2.exp_avg", "state.step"})
    CHECK_MESSAGE(saved.contains(key), key);
  first.reset();
  auto second = make(resumed);
  second->load_state_dict(saved);
  CHECK(second->lr(1) == 0.05);
  const auto got = train({second.get()}, resumed.all(), 3);
  const auto want = train({}, run.all(), 0);
  CHECK(got == want);
  // Loading into an optimizer with one group fewer names the keys it does not know.
  Params other;
  optim::Adam one_group({other.w, other.b, other.e}, 0.01);
  check_message(error_of([&] { one_group.load_state_dict(saved); }),
                {"Adam.load_state_dict", "unexpected keys", "param_groups.1.lr"});
}

TEST_CASE("param groups' errors name the optimizer, the group and the option") {
  const Tensor p = param({1.0}), q = param({2.0});
  check_message(error_of([&] {
                  optim::SGD({{.params = {p}}, {.params = {q}, .beta1 = 0.5}}, 0.1);
                }),
                {"SGD", "param group 1 sets beta1", "does not take"});
  check_message(error_of([&] {
                  optim::Adam({{.params = {p}}, {.params = {}}}, 0.1);
                }),
                {"Adam", "param group 1 has no parameters"});
  check_message(error_of([&] {
                  optim::Adam({{.params = {p}}, {.params = {q}, .lr = -1.0}}, 0.1);
                }),
                {"Adam", "learning rate -1 of param group 1 is invalid"});
  check_message(error_of([&] {
                  optim::AdamW({{.params = {p}}, {.params = {q}, .beta2 = 1.0}}, 0.1);
                }),
                {"AdamW", "beta2 1 of param group 1"});
  check_message(error_of([&] { optim::SGD({{.params = {p}}, {.params = {p}}}, 0.1); }), {"SGD", "twice"});
  optim::SGD opt({{.params = {p}}, {.params = {q}}}, 0.1);
  check_message(error_of([&] { opt.set_lr(2, 0.1); }), {"SGD", "param group 2 does not exist", "has 2"});
  check_message(error_of([&] { (void)opt.lr(5); }), {"SGD", "param group 5"});
}
