#include "ir/text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

namespace loom {

// ---- printing ----------------------------------------------------------------------
namespace {
constexpr uint64_t kCanonicalNan = 0x7ff8000000000000ULL;

std::string quoted_text(std::string_view s) {
  std::string out = "\"";
  for (const unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        // Everything outside printable ASCII as \xHH keeps dumps one line a node.
        if (c < 0x20 || c >= 0x7f)
          out += fmt::format("\\x{:02x}", c);
        else
          out += static_cast<char>(c);
    }
  }
  return out + '"';
}

// The shortest text that reads back to the same bits, always marked as a float
// (a '.', an exponent, inf or nan) so it never reads back as an int64 arg.
std::string float_text(double v) {
  if (std::isnan(v)) {
    const auto bits = std::bit_cast<uint64_t>(v);
    return bits == kCanonicalNan ? "nan" : fmt::format("nan:0x{:016x}", bits);
  }
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string out = fmt::format("{}", v);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

std::string int_list(const std::vector<int64_t>& v) { return fmt::format("({})", fmt::join(v, " ")); }
// Sizes are written as a list of numbers (UOp::make takes them as sizes). A symbolic
// size is written in braces as it prints ({T=17}, {T*2}), for dumps and logs: the
// reader does not take it back yet (docs/symbolic.md).
std::string size_list(const Shape& v) {
  std::vector<std::string> sizes;
  for (const Dim& d : v) sizes.push_back(d.is_symbolic() ? "{" + d.str() + "}" : std::to_string(d.value()));
  return fmt::format("({})", fmt::join(sizes, " "));
}
}  // namespace

std::string arg_text(const Arg& arg) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>)
          return "";
        else if constexpr (std::is_same_v<T, int64_t>)
          return fmt::format("{}", v);
        else if constexpr (std::is_same_v<T, double>)
          return float_text(v);
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          return int_list(v);
        else if constexpr (std::is_same_v<T, std::string>)
          return quoted_text(v);
        else if constexpr (std::is_same_v<T, AxisArg>)
          return fmt::format("axis {} {}", v.id, axis_kind_name(v.kind));
        else if constexpr (std::is_same_v<T, VarArg>)
          return fmt::format("var {} {} {}", quoted_text(v.name), v.min, v.max);
        else if constexpr (std::is_same_v<T, ReduceArg>)
          return fmt::format("reduce {} {}", op_name(v.op), int_list(v.axes));
        else
          return size_list(v);
      },
      arg);
}

namespace {
// The nodes of `order` that no other node uses, in order.
std::vector<const UOp*> unused_nodes(const std::vector<UOpPtr>& order) {
  std::unordered_set<const UOp*> used;
  for (const auto& n : order)
    for (const auto& s : n->src) used.insert(s.get());
  std::vector<const UOp*> out;
  for (const auto& n : order)
    if (!used.count(n.get())) out.push_back(n.get());
  return out;
}

bool roots_are_unused_nodes(const std::vector<UOpPtr>& order, const std::vector<UOpPtr>& roots) {
  const auto unused = unused_nodes(order);
  if (unused.size() != roots.size()) return false;
  for (size_t i = 0; i < roots.size(); ++i)
    if (unused[i] != roots[i].get()) return false;
  return true;
}
}  // namespace

std::string to_text(const std::vector<UOpPtr>& roots) {
  for (const auto& r : roots)
    if (!r) throw Error("to_text: given a null root");
  const auto order = toposort(roots);
  std::unordered_map<const UOp*, size_t> id;
  id.reserve(order.size());
  fmt::memory_buffer out;
  auto put = std::back_inserter(out);
  for (size_t i = 0; i < order.size(); ++i) {
    const UOp& n = *order[i];
    id.emplace(&n, i);
    fmt::format_to(put, "%{} = {} {}", i, op_name(n.op), to_string(n.dtype));
    for (size_t k = 0; k < n.src.size(); ++k)
      fmt::format_to(put, "{}%{}", k ? ", " : " ", id.at(n.src[k].get()));
    if (!std::holds_alternative<std::monostate>(n.arg)) fmt::format_to(put, " [{}]", arg_text(n.arg));
    out.push_back('\n');
  }
  if (!roots_are_unused_nodes(order, roots)) {
    fmt::format_to(put, "roots");
    for (size_t k = 0; k < roots.size(); ++k)
      fmt::format_to(put, "{}%{}", k ? ", " : " ", id.at(roots[k].get()));
    out.push_back('\n');
  }
  return fmt::to_string(out);
}

std::string to_text(const UOpPtr& root) { return to_text(std::vector<UOpPtr>{root}); }

// ---- parsing -----------------------------------------------------------------------
namespace {
bool is_delimiter(char c) {
  return c == ' ' || c == '\t' || c == ',' || c == '[' || c == ']' || c == '(' || c == ')' || c == '"' ||
         c == '=';
}

// Reads the tokens of one line; every failure names the line and what was expected.
class LineCursor {
 public:
  LineCursor(std::string_view line, size_t number) : line_(line), number_(number) {}

  [[noreturn]] void fail(std::string_view expected) {
    throw Error(fmt::format("parse_text: line {}: expected {}, got {} in '{}'", number_, expected, upcoming(),
                            line_.substr(0, 120)));
  }
  [[noreturn]] void fail_at(std::string_view message) const {
    throw Error(fmt::format("parse_text: line {}: {} in '{}'", number_, message, line_.substr(0, 120)));
  }

  bool at_end() {
    skip_ws();
    return pos_ == line_.size();
  }
  bool peek(char c) { return !at_end() && line_[pos_] == c; }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  void expect(char c, std::string_view what) {
    if (!eat(c)) fail(what);
  }
  // A maximal run of non-delimiter characters; empty if none.
  std::string_view peek_word() {
    skip_ws();
    size_t end = pos_;
    while (end < line_.size() && !is_delimiter(line_[end])) ++end;
    return line_.substr(pos_, end - pos_);
  }
  std::string_view word() {
    const std::string_view w = peek_word();
    pos_ += w.size();
    return w;
  }
  std::string_view ref() {
    if (!peek('%')) fail("a node reference like %3");
    const std::string_view w = word();
    if (w.size() < 2) fail("a node reference like %3");
    return w;
  }
  int64_t integer(std::string_view what) {
    const std::string_view w = peek_word();
    int64_t v = 0;
    const auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    if (w.empty() || ec != std::errc() || p != w.data() + w.size()) fail(what);
    pos_ += w.size();
    return v;
  }
  std::vector<int64_t> int_list() {
    expect('(', "'(' opening a list of integers");
    std::vector<int64_t> v;
    while (!eat(')')) v.push_back(integer("an integer or ')' closing the list"));
    return v;
  }
  std::string string_literal();
  Arg number();

 private:
  std::string_view line_;
  size_t number_;
  size_t pos_ = 0;

  void skip_ws() {
    while (pos_ < line_.size() && (line_[pos_] == ' ' || line_[pos_] == '\t')) ++pos_;
  }
  std::string upcoming() {
    if (at_end()) return "end of line";
    std::string_view w = peek_word();
    if (w.empty()) w = line_.substr(pos_, 1);
    return fmt::format("'{}'", w);
  }
  char escaped(char c);
  double float_value(std::string_view w);
};

std::string LineCursor::string_literal() {
  expect('"', "a quoted string");
  std::string out;
  while (pos_ < line_.size() && line_[pos_] != '"') {
    const char c = line_[pos_++];
    out += c == '\\' ? escaped(pos_ < line_.size() ? line_[pos_++] : '\0') : c;
  }
  if (pos_ == line_.size()) fail_at("unterminated string: expected a closing '\"'");
  ++pos_;
  return out;
}

char LineCursor::escaped(char c) {
  switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'x': {
      unsigned v = 0;
      const auto hex = line_.substr(pos_, 2);
      const auto [p, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), v, 16);
      if (hex.size() != 2 || ec != std::errc() || p != hex.data() + 2)
        fail_at("bad escape: expected two hex digits after \\x");
      pos_ += 2;
      return static_cast<char>(v);
    }
    default: fail_at(fmt::format("bad escape '\\{}': expected one of \\\" \\\\ \\n \\t \\r \\xHH", c));
  }
}

bool looks_float(std::string_view w) {
  return w.find_first_of(".eE") != std::string_view::npos || w == "inf" || w == "-inf" ||
         w.starts_with("nan");
}

// An int64 (`-3`) or a double (`1.5`, `-0.0`, `1e+300`, `inf`, `nan`, `nan:0x7ff8000000000001`).
Arg LineCursor::number() {
  const std::string_view w = peek_word();
  if (w.empty()) fail("an arg (a number, a (list), a \"string\", axis, var or reduce)");
  if (!looks_float(w)) return integer("an int64 arg");
  const double v = float_value(w);
  pos_ += w.size();
  return v;
}

double LineCursor::float_value(std::string_view w) {
  const char* end = w.data() + w.size();
  if (w == "inf" || w == "-inf") return w == "inf" ? HUGE_VAL : -HUGE_VAL;
  if (w == "nan") return std::bit_cast<double>(kCanonicalNan);
  if (w.starts_with("nan:0x")) {
    uint64_t bits = 0;
    const auto [p, ec] = std::from_chars(w.data() + 6, end, bits, 16);
    if (ec != std::errc() || p != end || !std::isnan(std::bit_cast<double>(bits)))
      fail("the bits of a NaN, like nan:0x7ff8000000000001");
    return std::bit_cast<double>(bits);
  }
  double v = 0;
  const auto [p, ec] = std::from_chars(w.data(), end, v);
  if (ec != std::errc() || p != end) fail("a float arg like 1.5, -0.0, 1e+300, inf or nan");
  return v;
}

std::optional<AxisKind> axis_kind_from_name(std::string_view name) {
  for (const AxisKind k : {AxisKind::Loop, AxisKind::Parallel, AxisKind::Reduce, AxisKind::Upcast,
                           AxisKind::Unroll, AxisKind::Pair})
    if (axis_kind_name(k) == name) return k;
  return std::nullopt;
}

Arg parse_arg(LineCursor& cur) {
  if (cur.peek('(')) return cur.int_list();
  if (cur.peek('"')) return cur.string_literal();
  const std::string_view w = cur.peek_word();
  if (w == "axis" || w == "var" || w == "reduce") cur.word();
  if (w == "axis") {
    const int64_t id = cur.integer("an axis id after 'axis'");
    const auto kind = axis_kind_from_name(cur.word());
    if (!kind)
      cur.fail_at("expected an axis kind (loop, parallel, reduce, upcast or unroll) after the axis id");
    return AxisArg{id, *kind};
  }
  if (w == "var") {
    std::string name = cur.string_literal();
    const int64_t min = cur.integer("the variable's minimum");
    return VarArg{std::move(name), min, cur.integer("the variable's maximum")};
  }
  if (w == "reduce") {
    const auto op = op_from_name(cur.word());
    if (!op) cur.fail_at("expected an op name (like ADD, MAX) after 'reduce'");
    return ReduceArg{*op, cur.int_list()};
  }
  return cur.number();
}

// Parses the lines of a text form, keeping every node by its name.
class Parser {
 public:
  std::vector<UOpPtr> roots(std::string_view text);

 private:
  std::unordered_map<std::string, UOpPtr> named_;
  std::vector<UOpPtr> defined_;  // in order of definition
  std::vector<UOpPtr> listed_roots_;
  bool has_roots_line_ = false;

  const UOpPtr& lookup(LineCursor& cur) {
    const std::string_view name = cur.ref();
    const auto it = named_.find(std::string(name));
    if (it == named_.end()) cur.fail_at(fmt::format("{} is used before it is defined", name));
    return it->second;
  }
  void node_line(LineCursor& cur);
  void roots_line(LineCursor& cur);
  std::vector<UOpPtr> unused() const;
};

void Parser::node_line(LineCursor& cur) {
  const std::string name(cur.ref());
  if (named_.count(name)) cur.fail_at(fmt::format("{} is defined twice", name));
  cur.expect('=', "'=' after the node name");
  const auto op = op_from_name(cur.word());
  if (!op) cur.fail_at("expected an op name (like ADD, CONST, RANGE) after '='");
  DType dtype;
  try {
    dtype = parse_dtype(cur.word());
  } catch (const Error&) {
    cur.fail_at(fmt::format("expected a dtype (like f32, i64x8, f32*) after {}", op_name(*op)));
  }
  std::vector<UOpPtr> src;
  if (cur.peek('%')) do
      src.push_back(lookup(cur));
    while (cur.eat(','));
  Arg arg;
  if (cur.eat('[')) {
    if (cur.peek(']')) cur.fail("an arg inside '[ ]'");
    arg = parse_arg(cur);
    cur.expect(']', "']' closing the arg");
  }
  if (!cur.at_end()) cur.fail("the end of the line after the arg");
  try {
    named_.emplace(name, UOp::make(*op, dtype, std::move(src), std::move(arg)));
  } catch (const std::exception& e) {  // shape and bounds inference reject ill-formed nodes
    cur.fail_at(fmt::format("cannot build this {} node: {}", op_name(*op), e.what()));
  }
  defined_.push_back(named_.at(name));
}

void Parser::roots_line(LineCursor& cur) {
  has_roots_line_ = true;
  if (!cur.at_end()) do
      listed_roots_.push_back(lookup(cur));
    while (cur.eat(','));
  if (!cur.at_end()) cur.fail("',' and another node reference, or the end of the line");
}

std::vector<UOpPtr> Parser::unused() const {
  std::unordered_set<const UOp*> used, seen;
  for (const auto& n : defined_)
    for (const auto& s : n->src) used.insert(s.get());
  std::vector<UOpPtr> out;
  for (const auto& n : defined_)
    if (!used.count(n.get()) && seen.insert(n.get()).second) out.push_back(n);
  return out;
}

std::vector<UOpPtr> Parser::roots(std::string_view text) {
  size_t number = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    LineCursor cur(line, number);
    if (cur.at_end() || cur.peek('#')) continue;  // blank line or comment
    if (has_roots_line_) cur.fail_at("nothing may follow the 'roots' line");
    if (cur.peek('%')) {
      node_line(cur);
    } else if (cur.peek_word() == "roots") {
      cur.word();
      roots_line(cur);
    } else {
      cur.fail("a node line ('%3 = ADD i64 %1, %2') or a 'roots' line");
    }
  }
  return has_roots_line_ ? listed_roots_ : unused();
}
}  // namespace

std::vector<UOpPtr> parse_text_roots(std::string_view text) { return Parser().roots(text); }

UOpPtr parse_text(std::string_view text) {
  auto roots = parse_text_roots(text);
  if (roots.size() != 1)
    throw Error(fmt::format("parse_text: expected a text with one root, found {}; use parse_text_roots",
                            roots.size()));
  return roots.front();
}

}  // namespace loom
