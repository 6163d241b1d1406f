// loom::Context: a scoped push onto the flag registry of ir/flags.hpp.
#include "ir/flags.hpp"

#include <loom/context.hpp>

#include <vector>

namespace loom {

Context::Context(std::initializer_list<std::pair<std::string, Value>> flags) {
  std::vector<std::pair<std::string, std::string>> overrides;
  for (const auto& [name, value] : flags) overrides.emplace_back(name, value.text);
  token_ = detail::push_flag_overrides(overrides);
}

Context::~Context() { detail::pop_flag_overrides(token_); }

}  // namespace loom
