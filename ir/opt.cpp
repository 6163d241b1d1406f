#include "ir/opt.hpp"

#include "ir/uop.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <utility>

namespace loom {

namespace {

constexpr std::array<std::pair<OptKind, std::string_view>, 14> kNames{{
    {OptKind::Pad, "pad"},
    {OptKind::Upcast, "upcast"},
    {OptKind::Unroll, "unroll"},
    {OptKind::BlockSum, "block_sum"},
    {OptKind::Blocks, "blocks"},
    {OptKind::Peel, "peel"},
    {OptKind::MatmulTile, "matmul_tile"},
    {OptKind::GemvTile, "gemv_tile"},
    {OptKind::ColumnSumTile, "column_sum_tile"},
    {OptKind::DotTile, "dot_tile"},
    {OptKind::ExpandSum, "expand_sum"},
    {OptKind::PairDot, "pair_dot"},
    {OptKind::AlignSides, "align_sides"},
    {OptKind::Parallel, "parallel"},
}};

// Kinds that act on the kernel, not on one range: printed without an axis.
bool whole_kernel(OptKind k) { return k == OptKind::AlignSides; }
// Kinds whose amount means nothing: printed without one.
bool no_amount(OptKind k) { return k == OptKind::Parallel || k == OptKind::ExpandSum || k == OptKind::Peel; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

int64_t parse_int(std::string_view s, std::string_view opt) {
  s = trim(s);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size())
    throw Error(fmt::format("parse_opts: '{}' in '{}' is not an integer", s, opt));
  return v;
}

Opt parse_opt(std::string_view text) {
  const size_t open = text.find('(');
  if (open == std::string_view::npos || text.back() != ')')
    throw Error(fmt::format("parse_opts: '{}' is not an Opt; expected kind(args), e.g. upcast(3, 16)", text));
  const std::string_view name = trim(text.substr(0, open));
  Opt opt;
  bool known = false;
  for (const auto& [k, n] : kNames)
    if (n == name) opt.kind = k, known = true;
  if (!known) {
    std::string names;
    for (const auto& [k, n] : kNames) names += fmt::format("{}{}", names.empty() ? "" : ", ", n);
    throw Error(
        fmt::format("parse_opts: unknown Opt kind '{}' in '{}'; expected one of {}", name, text, names));
  }
  std::vector<std::string_view> args;
  std::string_view rest = text.substr(open + 1, text.size() - open - 2);
  while (!trim(rest).empty()) {
    const size_t comma = rest.find(',');
    args.push_back(trim(rest.substr(0, comma)));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  if (!args.empty() && args.back().starts_with("rows=")) {
    opt.rows = parse_int(args.back().substr(5), text);
    args.pop_back();
  }
  const size_t want = (whole_kernel(opt.kind) ? 0 : 1) + (no_amount(opt.kind) ? 0 : 1);
  if (args.size() != want)
    throw Error(fmt::format("parse_opts: '{}' has {} arguments; {} takes {}", text, args.size(), name, want));
  size_t i = 0;
  if (!whole_kernel(opt.kind)) opt.axis = parse_int(args[i++], text);
  if (!no_amount(opt.kind)) opt.amount = parse_int(args[i], text);
  return opt;
}

}  // namespace

std::string_view opt_kind_name(OptKind k) {
  for (const auto& [kind, name] : kNames)
    if (kind == k) return name;
  return "?";
}

std::string to_string(const Opt& opt) {
  std::string args;
  if (!whole_kernel(opt.kind)) args = fmt::format("{}", opt.axis);
  if (!no_amount(opt.kind)) args += fmt::format("{}{}", args.empty() ? "" : ", ", opt.amount);
  if (opt.rows != 0) args += fmt::format(", rows={}", opt.rows);
  return fmt::format("{}({})", opt_kind_name(opt.kind), args);
}

std::string to_string(const std::vector<Opt>& opts) {
  std::string out = "[";
  for (size_t i = 0; i < opts.size(); ++i) out += (i ? ", " : "") + to_string(opts[i]);
  return out + "]";
}

std::vector<Opt> parse_opts(std::string_view text) {
  text = trim(text);
  if (text.size() < 2 || text.front() != '[' || text.back() != ']')
    throw Error(fmt::format("parse_opts: '{}' is not a list of Opts; expected [kind(args), ...]", text));
  std::vector<Opt> out;
  std::string_view rest = text.substr(1, text.size() - 2);
  while (!trim(rest).empty()) {
    const size_t close = rest.find(')');
    if (close == std::string_view::npos)
      throw Error(fmt::format("parse_opts: '{}' in '{}' has no closing ')'", trim(rest), text));
    out.push_back(parse_opt(trim(rest.substr(0, close + 1))));
    rest = rest.substr(close + 1);
    rest = trim(rest);
    if (!rest.empty()) {
      if (rest.front() != ',')
        throw Error(fmt::format("parse_opts: expected ',' between Opts in '{}', found '{}'", text, rest));
      rest.remove_prefix(1);
    }
  }
  return out;
}

}  // namespace loom
