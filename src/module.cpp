// loom::nn::Module: the registry of parameters, buffers and submodules, the
// training flag, state dicts, and Sequential.
#include "src/in_place.hpp"
#include "src/tensor_ops.hpp"

#include <loom/gradient.hpp>
#include <loom/module.hpp>

#include <algorithm>
#include <set>

namespace loom::nn {

using detail::str;

namespace {
std::string joined(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}
}  // namespace

Tensor Module::forward(const Tensor&) const {
  throw Error(fmt::format("{}: this module has no forward pass on one tensor", type_));
}

void Module::check_new_name(const std::string& name, const char* what) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw Error(fmt::format("{}: {} name '{}' must be non-empty and contain no '.'", type_, what, name));
  const auto taken = [&](const auto& slots) {
    return std::any_of(slots.begin(), slots.end(), [&](const auto& s) { return s.name == name; });
  };
  if (taken(params_) || taken(buffers_) || taken(children_))
    throw Error(fmt::format("{}: the name '{}' is already registered", type_, name));
}

void Module::add_tensor(std::vector<TensorSlot>& slots, std::string name, Tensor Module::*member) {
  check_new_name(name, &slots == &params_ ? "parameter" : "buffer");
  slots.push_back({std::move(name), member});
}

void Module::add_child(std::string name, std::function<Module&(Module&)> get, std::shared_ptr<Module> owned) {
  check_new_name(name, "submodule");
  children_.push_back({std::move(name), std::move(get), std::move(owned)});
}

void Module::register_module(std::string name, std::shared_ptr<Module> module) {
  if (!module) throw Error(fmt::format("{}: submodule '{}' is null", type_, name));
  add_child(std::move(name), nullptr, std::move(module));
}

// The registry is read on a const module, but a submodule reached through it
// is the module's own member: constness is the caller's to keep.
Module& Module::child(const ChildSlot& c) const {
  return c.owned ? *c.owned : c.get(const_cast<Module&>(*this));
}

void Module::collect(const std::string& prefix, bool params, bool buffers, NamedTensors& out) const {
  if (params)
    for (const auto& s : params_)
      if (const Tensor& t = this->*s.member; t.defined()) out.emplace_back(joined(prefix, s.name), t);
  if (buffers)
    for (const auto& s : buffers_)
      if (const Tensor& t = this->*s.member; t.defined()) out.emplace_back(joined(prefix, s.name), t);
  for (const auto& c : children_) child(c).collect(joined(prefix, c.name), params, buffers, out);
}

namespace {
// A tensor registered twice (a tied weight, a module used twice) is listed
// once, under its first name, as PyTorch's named_parameters does.
NamedTensors first_of_each(NamedTensors all) {
  NamedTensors out;
  for (auto& [name, t] : all)
    if (std::none_of(out.begin(), out.end(), [&](const auto& o) { return o.second.node() == t.node(); }))
      out.emplace_back(std::move(name), std::move(t));
  return out;
}
}  // namespace

NamedTensors Module::named_parameters(const std::string& prefix) const {
  NamedTensors out;
  collect(prefix, true, false, out);
  return first_of_each(std::move(out));
}
NamedTensors Module::named_buffers(const std::string& prefix) const {
  NamedTensors out;
  collect(prefix, false, true, out);
  return first_of_each(std::move(out));
}
NamedTensors Module::state_dict(const std::string& prefix) const {
  NamedTensors out;
  collect(prefix, true, true, out);
  return out;
}

namespace {
std::vector<Tensor> tensors_of(const NamedTensors& named) {
  std::vector<Tensor> out;
  for (const auto& [name, t] : named) out.push_back(t);
  return out;
}
}  // namespace

std::vector<Tensor> Module::parameters() const { return tensors_of(named_parameters()); }
std::vector<Tensor> Module::buffers() const { return tensors_of(named_buffers()); }

std::vector<std::pair<std::string, const Module*>> Module::named_children() const {
  std::vector<std::pair<std::string, const Module*>> out;
  for (const auto& c : children_) out.emplace_back(c.name, &child(c));
  return out;
}

Module& Module::train(bool on) {
  training_ = on;
  for (const auto& c : children_) child(c).train(on);
  return *this;
}

Module::LoadResult Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
  const NamedTensors own = state_dict();
  LoadResult result;
  std::set<std::string> expected;
  std::vector<std::string> wrong_shape;
  for (const auto& [name, t] : own) {
    expected.insert(name);
    const auto it = state.find(name);
    if (it == state.end()) {
      result.missing_keys.push_back(name);
      continue;
    }
    if (!it->second.defined())
      throw Error(fmt::format("{}.load_state_dict: the tensor for '{}' is undefined", type_, name));
    if (it->second.shape() != t.shape())
      wrong_shape.push_back(fmt::format("'{}' has shape {} in the state dict but {} in the module", name,
                                        str(it->second.shape()), str(t.shape())));
  }
  for (const auto& [name, t] : state)
    if (!expected.contains(name)) result.unexpected_keys.push_back(name);
  const bool keys_wrong = strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty());
  if (keys_wrong || !wrong_shape.empty()) {
    std::string msg = fmt::format("{}.load_state_dict:", type_);
    if (strict && !result.missing_keys.empty())
      msg += fmt::format(" missing keys [{}];", fmt::join(result.missing_keys, ", "));
    if (strict && !result.unexpected_keys.empty())
      msg += fmt::format(" unexpected keys [{}];", fmt::join(result.unexpected_keys, ", "));
    for (const auto& w : wrong_shape) msg += " " + w + ";";
    msg.pop_back();
    throw Error(msg);
  }
  NoGrad no_grad;  // copying values in is no operation to differentiate
  std::vector<Tensor> written;
  for (auto [name, t] : own) {
    const auto it = state.find(name);
    if (it == state.end()) continue;
    t.assign(it->second.dtype() == t.dtype() ? it->second : it->second.cast(t.dtype()));
    written.push_back(t);
  }
  loom::realize(written);
  return result;
}

void Module::update_buffer(const Tensor& buffer, const Tensor& value) {
  NoGrad no_grad;
  Tensor target = buffer;  // a handle: the assign changes the module's tensor
  target.assign(value.dtype().is_float() ? value.detach() : value);
  detail::defer_realize(target.node());
}

// ---- Sequential ------------------------------------------------------------------------------

Sequential& Sequential::push_back(std::shared_ptr<Module> module) {
  if (!module) throw Error("Sequential: cannot append a null module");
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) const {
  Tensor y = x;
  for (const auto& m : modules_) y = m->forward(y);
  return y;
}

Module& Sequential::operator[](size_t i) const {
  if (i >= modules_.size())
    throw Error(fmt::format("Sequential: index {} is out of range for {} modules", i, modules_.size()));
  return *modules_[i];
}

void Sequential::throw_wrong_type(size_t i, const Module& m) const {
  throw Error(fmt::format("Sequential: module {} is a {}, not the type asked for", i, m.type_name()));
}

}  // namespace loom::nn
