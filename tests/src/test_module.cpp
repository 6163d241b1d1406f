// loom::nn::Module: registration by member pointer (safe across copies and
// moves), dotted names, train/eval, state dicts and their errors, Sequential.
#include "check.hpp"
#include "support/error_message.hpp"

#include <loom/format.hpp>
#include <loom/nn.hpp>

#include <unistd.h>
#include <filesystem>

using namespace loom;
using test::check_message;
using test::error_of;
using test::values;

namespace {

struct MLP : nn::Module {
  nn::Linear fc1{3, 4}, fc2{4, 2};
  nn::Dropout drop{0.25};
  MLP() : Module("MLP") {
    register_module("fc1", &MLP::fc1);
    register_module("drop", &MLP::drop);
    register_module("fc2", &MLP::fc2);
  }
  Tensor forward(const Tensor& x) const override { return fc2(drop(fc1(x).relu())); }
};

std::vector<std::string> names(const NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [n, t] : named) out.push_back(n);
  return out;
}

bool same(const Tensor& a, const Tensor& b) { return a.node() == b.node(); }

// What an optimizer requires of its parameters: distinct leaves.
void optim_ready(const std::vector<Tensor>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(params[i].requires_grad());
    for (size_t j = 0; j < i; ++j) CHECK(!same(params[i], params[j]));
  }
}

}  // namespace

TEST_CASE("named_parameters uses PyTorch's dotted names, depth first in registration order") {
  MLP m;
  CHECK(names(m.named_parameters()) ==
        std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  CHECK(names(m.named_parameters("net")) ==
        std::vector<std::string>{"net.fc1.weight", "net.fc1.bias", "net.fc2.weight", "net.fc2.bias"});
  CHECK(same(m.parameters()[0], m.fc1.weight));
  CHECK(same(m.parameters()[3], m.fc2.bias));
  nn::Sequential seq(nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 2, false), nn::BatchNorm1d(2));
  CHECK(names(seq.named_parameters()) ==
        std::vector<std::string>{"0.weight", "0.bias", "2.weight", "3.weight", "3.bias"});
  CHECK(names(seq.named_buffers()) ==
        std::vector<std::string>{"3.running_mean", "3.running_var", "3.num_batches_tracked"});
  CHECK(names(seq.state_dict()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "3.weight",
                                                            "3.bias", "3.running_mean", "3.running_var",
                                                            "3.num_batches_tracked"});
  CHECK(seq.named_children().size() == 4);
  CHECK(seq.named_children()[2].first == "2");
}

TEST_CASE("a copied or moved module lists its own members; a rebound member is what it lists") {
  std::vector<MLP> models;
  models.emplace_back();
  models.emplace_back();
  models.reserve(16);  // moves both: their registries must follow
  for (const MLP& m : models) {
    CHECK(same(m.parameters()[0], m.fc1.weight));
    CHECK(same(m.parameters()[2], m.fc2.weight));
  }
  CHECK(!same(models[0].parameters()[0], models[1].parameters()[0]));
  MLP copy = models[0];  // shares the parameters, as Tensor copies do
  CHECK(same(copy.parameters()[0], models[0].fc1.weight));
  copy.fc1.weight = Tensor::zeros({4, 3}).requires_grad_();
  CHECK(same(copy.parameters()[0], copy.fc1.weight));
  CHECK(!same(copy.parameters()[0], models[0].fc1.weight));
}

TEST_CASE("a tied weight or a module used twice is listed once; state_dict keeps every name") {
  auto shared = std::make_shared<nn::Linear>(2, 2);
  nn::Sequential seq;
  seq.push_back(shared).push_back(nn::ReLU()).push_back(shared);
  CHECK(names(seq.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias"});
  CHECK(names(seq.state_dict()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  optim_ready(seq.parameters());
}

TEST_CASE("train and eval reach every submodule") {
  MLP m;
  CHECK(m.is_training());
  CHECK(m.drop.is_training());
  m.eval();
  CHECK(!m.is_training());
  CHECK(!m.drop.is_training());
  CHECK(!m.fc1.is_training());
  m.train();
  CHECK(m.drop.is_training());
  nn::Sequential seq(nn::Linear(2, 2), nn::Dropout(0.5));
  seq.eval();
  CHECK(!seq[1].is_training());
}

TEST_CASE("Sequential chains its modules, is indexable, and checks indices and types") {
  manual_seed(3);
  nn::Sequential seq(nn::Linear(3, 4), nn::GELU("tanh"), nn::Linear(4, 2));
  const Tensor x = Tensor::randn({5, 3});
  const auto& l0 = seq.at<nn::Linear>(0);
  const auto& l2 = seq.at<nn::Linear>(2);
  CHECK(values(seq(x)) == values(l2(l0(x).gelu("tanh"))));
  CHECK(seq.size() == 3);
  check_message(error_of([&] { seq[3]; }), {"Sequential", "index 3", "3 modules"});
  check_message(error_of([&] { seq.at<nn::Linear>(1); }), {"Sequential", "module 1", "GELU"});
  nn::Sequential empty;
  CHECK(values(empty(x)) == values(x));
  empty.push_back(nn::ReLU());
  CHECK(values(empty(x)) == values(x.relu()));
}

TEST_CASE(
    "state_dict round-trips through a checkpoint; load_state_dict names missing, extra and misshaped keys") {
  manual_seed(5);
  nn::Sequential a(nn::Linear(3, 4), nn::BatchNorm1d(4)), b(nn::Linear(3, 4), nn::BatchNorm1d(4));
  {
    NoGrad no_grad;
    Tensor rm = a.at<nn::BatchNorm1d>(1).running_mean;
    rm.assign(Tensor::from_vector<float>({1, 2, 3, 4}, {4}));
    rm.realize();
  }
  const auto path =
      std::filesystem::temp_directory_path() / fmt::format("loom_test_{}_module.safetensors", ::getpid());
  save(path, a.state_dict());
  auto state = load(path);
  std::filesystem::remove(path);
  const auto result = b.load_state_dict(state);
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
  for (size_t i = 0; i < a.state_dict().size(); ++i) {
    CAPTURE(a.state_dict()[i].first);
    CHECK(values(b.state_dict()[i].second) == values(a.state_dict()[i].second));
  }
  CHECK(b.parameters()[0].requires_grad());

  auto missing = state;
  missing.erase("0.bias");
  missing.emplace("extra.weight", Tensor::zeros({1}));
  check_message(error_of([&] { b.load_state_dict(missing); }),
                {"Sequential.load_state_dict", "missing keys [0.bias]", "unexpected keys [extra.weight]"});
  const auto loose = b.load_state_dict(missing, false);
  CHECK(loose.missing_keys == std::vector<std::string>{"0.bias"});
  CHECK(loose.unexpected_keys == std::vector<std::string>{"extra.weight"});
  auto misshaped = state;
  misshaped["0.weight"] = Tensor::zeros({3, 4});
  check_message(error_of([&] { b.load_state_dict(misshaped, false); }),
                {"Sequential.load_state_dict", "'0.weight'", "[3, 4]", "[4, 3]"});
}

TEST_CASE("registration rejects duplicate and dotted names, and a module without a forward says so") {
  struct Bad : nn::Module {
    Tensor w;
    explicit Bad(int which) : Module("Bad") {
      register_parameter("w", &Bad::w);
      if (which == 0) register_buffer("w", &Bad::w);
      if (which == 1) register_parameter("a.b", &Bad::w);
    }
  };
  check_message(error_of([] { Bad(0); }), {"Bad", "'w'", "already registered"});
  check_message(error_of([] { Bad(1); }), {"Bad", "'a.b'"});
  Bad ok(2);
  check_message(error_of([&] { ok(Tensor::zeros({1})); }), {"Bad", "no forward"});
}
