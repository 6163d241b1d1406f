#pragma once
// fmt support for loom::Tensor: fmt::format("{}", t) gives the text `os << t`
// writes, PyTorch's layout plus the shape and dtype (docs/api.md, "Printing").
// Format specs of strings apply to the whole text: "{:>60}".
#include <loom/tensor.hpp>

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace loom {

// The printed form of `t`. Reading the values realizes `t`; an undefined tensor
// gives "tensor(undefined)".
std::string to_string(const Tensor& t);

}  // namespace loom

template <>
struct fmt::formatter<loom::Tensor> : fmt::formatter<std::string_view> {
  auto format(const loom::Tensor& t, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(loom::to_string(t), ctx);
  }
};
