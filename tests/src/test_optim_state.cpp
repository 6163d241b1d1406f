// Optimizer state dicts: a run stopped after 5 steps, saved to a checkpoint
// file with its model and scheduler, and resumed in fresh objects equals an
// uninterrupted run bit for bit; bad state dicts are errors naming the keys.
#include "check.hpp"
#include "support/error_message.hpp"

#include <loom/format.hpp>
#include <loom/lr_scheduler.hpp>
#include <loom/nn.hpp>
#include <loom/optim.hpp>

#include <unistd.h>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>

using namespace loom;
using test::check_message;
using test::error_of;

namespace {

nn::Sequential make_net() {
  return nn::Sequential(nn::Linear(4, 8), nn::BatchNorm1d(8), nn::ReLU(), nn::Linear(8, 2));
}

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

void train(nn::Sequential& net, optim::Optimizer& opt, optim::LRScheduler& sched, const Tensor& x,
           const Tensor& y, int steps) {
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    nn::mse(net(x), y).backward();
    opt.step();
    sched.step();
  }
}

NamedTensors prefixed(const std::string& prefix, const NamedTensors& named) {
  NamedTensors out;
  for (const auto& [k, v] : named) out.emplace_back(prefix + k, v);
  return out;
}
std::map<std::string, Tensor> section(const std::map<std::string, Tensor>& all, const std::string& prefix) {
  std::map<std::string, Tensor> out;
  for (const auto& [k, v] : all)
    if (k.starts_with(prefix)) out.emplace(k.substr(prefix.size()), v);
  return out;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() == DType::Int64) return a.to_vector<int64_t>() == b.to_vector<int64_t>();
  const auto x = a.to_vector<float>(), y = b.to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE(
    "a run resumed from a checkpoint of model, optimizer and scheduler equals the uninterrupted run "
    "bitwise") {
  const std::vector<std::pair<const char*, MakeOpt>> kinds{
      {"SGD momentum",
       [](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(std::move(p), 0.05, 0.9, 1e-3); }},
      {"Adam",
       [](std::vector<Tensor> p) { return std::make_unique<optim::Adam>(std::move(p), 0.01, 0.8, 0.99); }},
      {"AdamW", [](std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(std::move(p), 0.01); }}};
  manual_seed(42);
  const Tensor x = Tensor::randn({16, 4}).realize(), y = Tensor::randn({16, 2}).realize();
  const auto path =
      std::filesystem::temp_directory_path() / fmt::format("loom_test_{}_resume.safetensors", ::getpid());
  for (const auto& [kind, make_opt] : kinds) {
    CAPTURE(kind);
    manual_seed(1);
    nn::Sequential whole = make_net();
    auto whole_opt = make_opt(whole.parameters());
    optim::CosineAnnealingLR whole_sched(*whole_opt, 7);
    train(whole, *whole_opt, whole_sched, x, y, 10);

    manual_seed(1);
    nn::Sequential first = make_net();
    auto first_opt = make_opt(first.parameters());
    optim::CosineAnnealingLR first_sched(*first_opt, 7);
    train(first, *first_opt, first_sched, x, y, 5);
    NamedTensors all = prefixed("model.", first.state_dict());
    for (auto& e : prefixed("optim.", first_opt->state_dict())) all.push_back(e);
    for (auto& e : prefixed("sched.", first_sched.state_dict())) all.push_back(e);
    save(path, all);

    manual_seed(99);  // other initial values: everything must come from the file
    nn::Sequential resumed = make_net();
    auto resumed_opt = make_opt(resumed.parameters());
    resumed_opt->set_lr(0.5);
    optim::CosineAnnealingLR resumed_sched(*resumed_opt, 7);
    const auto loaded = load(path);
    resumed.load_state_dict(section(loaded, "model."));
    resumed_opt->load_state_dict(section(loaded, "optim."));
    resumed_sched.load_state_dict(section(loaded, "sched."));
    CHECK(resumed_opt->steps() == 5);
    CHECK(resumed_opt->lr() == first_opt->lr());
    train(resumed, *resumed_opt, resumed_sched, x, y, 5);

    CHECK(resumed_opt->lr() == whole_opt->lr());
    CHECK(resumed_opt->steps() == 10);
    const auto want = whole.state_dict(), got = resumed.state_dict();
    REQUIRE(want.size() == got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      CAPTURE(want[i].first);
      CHECK(bitwise_equal(got[i].second, want[i].second));
    }
    const auto want_opt = whole_opt->state_dict(), got_opt = resumed_opt->state_dict();
    for (size_t i = 0; i < want_opt.size(); ++i) {
      CAPTURE(want_opt[i].first);
      if (want_opt[i].second.dtype() == DType::Float64)
        CHECK(want_opt[i].second.to_vector<double>() == got_opt[i].second.to_vector<double>());
      else
        CHECK(bitwise_equal(got_opt[i].second, want_opt[i].second));
    }
  }
  std::filesystem::remove(path);
}

TEST_CASE("optimizer state dicts name their keys as PyTorch's, flattened, and reject bad ones by name") {
  Tensor a = Tensor::zeros({2, 3}).requires_grad_(), b = Tensor::zeros({3}).requires_grad_();
  optim::SGD sgd({a, b}, 0.1, 0.9);
  std::vector<std::string> keys;
  for (const auto& [k, v] : sgd.state_dict()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"param_groups.0.lr", "param_groups.0.momentum",
                                         "param_groups.0.weight_decay", "steps", "state.0.momentum_buffer",
                                         "state.1.momentum_buffer"});
  optim::Adam adam({a, b});
  keys.clear();
  for (const auto& [k, v] : adam.state_dict()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{
                    "param_groups.0.lr", "param_groups.0.betas.0", "param_groups.0.betas.1",
                    "param_groups.0.eps", "param_groups.0.weight_decay", "steps", "state.step",
                    "state.0.exp_avg", "state.0.exp_avg_sq", "state.1.exp_avg", "state.1.exp_avg_sq"});
  const NamedTensors sd = sgd.state_dict();
  std::map<std::string, Tensor> state(sd.begin(), sd.end());
  auto missing = state;
  missing.erase("state.1.momentum_buffer");
  missing.emplace("state.2.momentum_buffer", Tensor::zeros({1}));
  check_message(error_of([&] { sgd.load_state_dict(missing); }),
                {"SGD.load_state_dict", "missing keys [state.1.momentum_buffer]",
                 "unexpected keys [state.2.momentum_buffer]"});
  auto misshaped = state;
  misshaped["state.0.momentum_buffer"] = Tensor::zeros({3, 2});
  check_message(error_of([&] { sgd.load_state_dict(misshaped); }),
                {"SGD.load_state_dict", "'state.0.momentum_buffer'", "[3, 2]", "[2, 3]"});
  auto bad_hyper = state;
  bad_hyper["param_groups.0.momentum"] = Tensor::scalar(-1, DType::Float64);
  check_message(error_of([&] { sgd.load_state_dict(bad_hyper); }), {"SGD", "momentum", "-1"});
  CHECK(sgd.state_dict()[1].second.item<double>() == 0.9);  // a failed load changes nothing
  check_message(error_of([&] { adam.load_state_dict(state); }), {"Adam.load_state_dict", "missing keys"});
  // Without momentum in the file, SGD drops its buffers; with it, it makes them.
  optim::SGD plain({a, b}, 0.1);
  plain.load_state_dict(state);
  CHECK(plain.state_dict().size() == 6);
}
