#pragma once
// loom::nn::Module: the base of every layer, as torch.nn.Module. docs/api.md,
// "Modules", is the reference.
//
// A module names its parameters, buffers and submodules once, in its
// constructor, by pointer to member:
//   struct MLP : nn::Module {
//     nn::Linear fc1{784, 256}, fc2{256, 10};
//     MLP() : Module("MLP") {
//       register_module("fc1", &MLP::fc1);
//       register_module("fc2", &MLP::fc2);
//     }
//     Tensor forward(const Tensor& x) const override { return fc2(fc1(x).relu()); }
//   };
// The registry keeps member pointers, never addresses, so a module copied or
// moved (into a vector, out of a function) lists its own members, and a member
// rebound (`fc.weight = other`) is what parameters() returns. Submodules a
// container owns (Sequential's) are held by shared_ptr: copies share them, as
// copies of a Tensor share its data.
#include <loom/checkpoint.hpp>
#include <loom/tensor.hpp>

#include <concepts>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace loom::nn {

class Module {
 public:
  virtual ~Module() = default;

  // The forward pass on one tensor (what Sequential chains). A module without
  // one throws loom::Error naming it.
  virtual Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  // Parameters and buffers of this module and every submodule, depth first in
  // registration order (own first), with PyTorch's dotted names ("0.weight",
  // "fc1.bias"); `prefix` is prepended with a dot. Undefined tensors (a Linear
  // without bias) are left out, and a tensor registered twice (a tied weight)
  // is listed once, under its first name; state_dict lists every name.
  std::vector<Tensor> parameters() const;
  NamedTensors named_parameters(const std::string& prefix = "") const;
  std::vector<Tensor> buffers() const;
  NamedTensors named_buffers(const std::string& prefix = "") const;
  // The direct submodules, by name.
  std::vector<std::pair<std::string, const Module*>> named_children() const;

  // Training mode (the default) or evaluation mode, for this module and every
  // submodule (Dropout and BatchNorm behave differently). Returns *this.
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  // Parameters then buffers, recursively, in named_parameters' order (what
  // loom::save takes).
  NamedTensors state_dict(const std::string& prefix = "") const;
  struct LoadResult {
    std::vector<std::string> missing_keys, unexpected_keys;
  };
  // Copies the values in (cast to each tensor's dtype, under NoGrad, realized
  // together). A wrong shape is always an error; with `strict`, so are missing
  // and unexpected keys. Without it they are returned.
  LoadResult load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);

  // What the module is ("Linear", "Sequential"), for errors.
  const std::string& type_name() const { return type_; }

 protected:
  explicit Module(std::string type_name) : type_(std::move(type_name)) {}
  // Copies and moves keep the registry: it holds member pointers, so it
  // describes the new object. Protected, so a Module is never sliced.
  Module(const Module&) = default;
  Module(Module&&) = default;
  Module& operator=(const Module&) = default;
  Module& operator=(Module&&) = default;

  template <class Self>
  requires std::derived_from<Self, Module>
  void register_parameter(std::string name, Tensor Self::*member) {
    add_tensor(params_, std::move(name), static_cast<Tensor Module::*>(member));
  }
  template <class Self>
  requires std::derived_from<Self, Module>
  void register_buffer(std::string name, Tensor Self::*member) {
    add_tensor(buffers_, std::move(name), static_cast<Tensor Module::*>(member));
  }
  // A submodule held as a member.
  template <class Self, class M>
  requires std::derived_from<Self, Module> && std::derived_from<M, Module>
  void register_module(std::string name, M Self::*member) {
    add_child(
        std::move(name), [member](Module& self) -> Module& { return static_cast<Self&>(self).*member; },
        nullptr);
  }
  // A submodule this module owns through a pointer (containers).
  void register_module(std::string name, std::shared_ptr<Module> module);

  // Assigns `value` to `buffer` (a running statistic) outside any gradient; the
  // write is realized by the next realize on this thread, whatever it computes
  // (usually the optimizer's step), so a training step stays one schedule.
  static void update_buffer(const Tensor& buffer, const Tensor& value);

 private:
  struct TensorSlot {
    std::string name;
    Tensor Module::*member;
  };
  struct ChildSlot {
    std::string name;
    std::function<Module&(Module&)> get;  // a member of the module passed in
    std::shared_ptr<Module> owned;        // or a module held by pointer
  };
  void add_tensor(std::vector<TensorSlot>& slots, std::string name, Tensor Module::*member);
  void add_child(std::string name, std::function<Module&(Module&)> get, std::shared_ptr<Module> owned);
  void check_new_name(const std::string& name, const char* what) const;
  Module& child(const ChildSlot& c) const;
  void collect(const std::string& prefix, bool params, bool buffers, NamedTensors& out) const;

  std::string type_;
  bool training_ = true;
  std::vector<TensorSlot> params_, buffers_;
  std::vector<ChildSlot> children_;
};

// Modules applied in order; indexable and callable. Submodules are named
// "0", "1", ... as in PyTorch; copies of a Sequential share its submodules.
//   nn::Sequential net(nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 10));
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  template <class... M>
  requires(sizeof...(M) > 0 && (std::derived_from<std::decay_t<M>, Module> && ...) &&
           (!std::same_as<std::decay_t<M>, Sequential> && ...)) explicit Sequential(M&&... modules)
      : Module("Sequential") {
    (push_back(std::forward<M>(modules)), ...);
  }
  // Appends a copy (or the moved module); a copy shares the parameters.
  template <class M>
  requires std::derived_from<std::decay_t<M>, Module> Sequential& push_back(M&& module) {
    return push_back(std::shared_ptr<Module>(std::make_shared<std::decay_t<M>>(std::forward<M>(module))));
  }
  Sequential& push_back(std::shared_ptr<Module> module);

  Tensor forward(const Tensor& x) const override;
  size_t size() const { return modules_.size(); }
  // The i-th module; an index out of range is an error. at<M>(i) also checks its type.
  Module& operator[](size_t i) const;
  template <class M>
  M& at(size_t i) const {
    Module& m = (*this)[i];
    if (auto* p = dynamic_cast<M*>(&m)) return *p;
    throw_wrong_type(i, m);
  }

 private:
  [[noreturn]] void throw_wrong_type(size_t i, const Module& m) const;
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace loom::nn
