#pragma once
// fmt support for loom::Dim: fmt::format("{}", d) gives d.str() ("17", "T=17"),
// so a Shape formats with fmt::join as "[4, T=17, 64]".
#include <loom/dim.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <string>

// No format spec; the text is unquoted inside ranges.
template <>
struct fmt::formatter<loom::Dim> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  auto format(const loom::Dim& d, fmt::format_context& ctx) const {
    const std::string text = d.str();
    return std::copy(text.begin(), text.end(), ctx.out());
  }
};

// "[4, T=17, 64]", with or without <fmt/ranges.h>.
template <>
struct fmt::formatter<loom::Shape> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  auto format(const loom::Shape& s, fmt::format_context& ctx) const {
    const std::string text = loom::str(s);
    return std::copy(text.begin(), text.end(), ctx.out());
  }
};
