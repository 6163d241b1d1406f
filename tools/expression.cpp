#include "tools/expression.hpp"

#include <loom/error.hpp>
#include <loom/gradient.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

namespace loom::tools {

namespace {

// ---- where things are in the source ----

// An error already located in the source: passed on as it is.
struct Located : Error {
  using Error::Error;
};

std::string located(std::string_view src, size_t pos, const std::string& message) {
  pos = std::min(pos, src.size());
  const size_t newline_before = pos == 0 ? std::string_view::npos : src.rfind('\n', pos - 1);
  const size_t line_start = newline_before == std::string_view::npos ? 0 : newline_before + 1;
  size_t line_end = src.find('\n', pos);
  if (line_end == std::string_view::npos) line_end = src.size();
  const size_t column = pos - line_start + 1;
  const std::string_view trimmed = src.substr(0, src.find_last_not_of(" \t\n") + 1);
  const bool several_lines = trimmed.find('\n') != std::string_view::npos;
  const size_t line = static_cast<size_t>(std::count(src.begin(), src.begin() + pos, '\n')) + 1;
  const std::string where =
      several_lines ? fmt::format("line {}, column {}", line, column) : fmt::format("column {}", column);
  return fmt::format("{}: {}\n  {}\n  {}^", where, message, src.substr(line_start, line_end - line_start),
                     std::string(column - 1, ' '));
}

// ---- tokens ----

struct Token {
  enum Kind { Name, Number, Symbol, End } kind;
  std::string text;
  size_t pos;
  double value = 0;
  bool is_float = false;
};

std::string describe(const Token& t) {
  switch (t.kind) {
    case Token::End: return "the end of the program";
    case Token::Symbol: return t.text == ";" ? "';' (the end of the statement)" : "'" + t.text + "'";
    default: return "'" + t.text + "'";
  }
}

std::vector<Token> lex(std::string_view src) {
  static const std::set<std::string> pairs{"**", "<=", ">=", "==", "!="};
  std::vector<Token> out;
  size_t i = 0;
  int depth = 0;  // inside parentheses a new line does not end the statement
  while (i < src.size()) {
    const char c = src[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
    } else if (c == '#') {
      while (i < src.size() && src[i] != '\n') ++i;
    } else if (c == '\n') {
      if (depth == 0) out.push_back({Token::Symbol, ";", i});
      ++i;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < src.size() && std::isdigit(static_cast<unsigned char>(src[i + 1])))) {
      const std::string rest(src.substr(i));
      char* end = nullptr;
      const double v = std::strtod(rest.c_str(), &end);
      const size_t n = static_cast<size_t>(end - rest.c_str());
      const std::string text = rest.substr(0, n);
      out.push_back({Token::Number, text, i, v, text.find_first_of(".eE") != std::string::npos});
      i += n;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t start = i;
      while (i < src.size() && (std::isalnum(static_cast<unsigned char>(src[i])) || src[i] == '_')) ++i;
      out.push_back({Token::Name, std::string(src.substr(start, i - start)), start});
    } else if (i + 1 < src.size() && pairs.count(std::string(src.substr(i, 2)))) {
      out.push_back({Token::Symbol, std::string(src.substr(i, 2)), i});
      i += 2;
    } else if (std::string_view("+-*/%@(),.=;<>&|~").find(c) != std::string_view::npos) {
      depth += c == '(' ? 1 : c == ')' && depth > 0 ? -1 : 0;
      out.push_back({Token::Symbol, std::string(1, c), i++});
    } else {
      throw Located(located(src, i, fmt::format("unexpected character '{}'", c)));
    }
  }
  out.push_back({Token::End, "", src.size()});
  return out;
}

// ---- values ----

struct Value {
  enum Kind { TensorKind, NumberKind, DTypeKind } kind = NumberKind;
  Tensor tensor;
  double number = 0;
  bool is_float = false;
  DType dtype;
  bool input = false;  // made by a constructor: a realized input
  size_t pos = 0;      // where the expression starts, for errors

  static Value of(Tensor t, size_t pos, bool input = false) {
    Value v;
    v.kind = TensorKind;
    v.tensor = std::move(t);
    v.input = input;
    v.pos = pos;
    return v;
  }
  static Value num(double x, bool is_float, size_t pos) {
    Value v;
    v.number = x;
    v.is_float = is_float;
    v.pos = pos;
    return v;
  }
};

// A call's arguments: positional, then keywords (`keepdim=1`).
struct Args {
  std::string callee;
  size_t pos = 0;
  std::vector<Value> positional;
  std::map<std::string, Value> keywords;
  std::string_view src;

  [[noreturn]] void fail(size_t at, const std::string& message) const {
    throw Located(located(src, at, message));
  }

  size_t count() const { return positional.size(); }
  void expect_count(size_t lo, size_t hi) const {
    if (count() < lo || count() > hi)
      fail(pos, lo == hi
                    ? fmt::format("{} takes {} argument{}, got {}", callee, lo, lo == 1 ? "" : "s", count())
                    : fmt::format("{} takes {} to {} arguments, got {}", callee, lo, hi, count()));
  }
  const Value& at(size_t i) const {
    if (i >= count()) fail(pos, fmt::format("{} needs argument {}", callee, i + 1));
    return positional[i];
  }
  Tensor tensor(size_t i) const {
    const Value& v = at(i);
    if (v.kind != Value::TensorKind)
      fail(v.pos, fmt::format("argument {} of {} must be a tensor", i + 1, callee));
    return v.tensor;
  }
  double number(const Value& v, const std::string& what) const {
    if (v.kind != Value::NumberKind) fail(v.pos, fmt::format("{} of {} must be a number", what, callee));
    return v.number;
  }
  int64_t integer(const Value& v, const std::string& what) const {
    const double x = number(v, what);
    if (x != std::floor(x) || std::abs(x) > 9e15)
      fail(v.pos, fmt::format("{} of {} must be a whole number, got {}", what, callee, x));
    return static_cast<int64_t>(x);
  }
  int64_t integer(size_t i) const { return integer(at(i), fmt::format("argument {}", i + 1)); }
  double number(size_t i) const { return number(at(i), fmt::format("argument {}", i + 1)); }
  int64_t integer_or(size_t i, int64_t fallback) const { return i < count() ? integer(i) : fallback; }
  // Positional arguments from `first` on, all whole numbers (a shape, axes, an order).
  std::vector<int64_t> integers_from(size_t first) const {
    std::vector<int64_t> out;
    for (size_t i = first; i < count(); ++i) out.push_back(integer(i));
    return out;
  }
  std::vector<int> axes_from(size_t first) const {
    std::vector<int> out;
    for (int64_t a : integers_from(first)) out.push_back(static_cast<int>(a));
    return out;
  }
  // All positional arguments as consecutive pairs, one per axis (pad, shrink).
  std::vector<std::pair<int64_t, int64_t>> pairs(const std::string& what) const {
    const std::vector<int64_t> flat = integers_from(0);
    if (flat.size() % 2)
      fail(pos, fmt::format("{} takes {} pairs, one per axis: an even count", callee, what));
    std::vector<std::pair<int64_t, int64_t>> out;
    for (size_t i = 0; i < flat.size(); i += 2) out.emplace_back(flat[i], flat[i + 1]);
    return out;
  }
  std::optional<Value> keyword(const std::string& key) const {
    auto it = keywords.find(key);
    return it == keywords.end() ? std::nullopt : std::optional<Value>(it->second);
  }
  bool flag(const std::string& key) const {
    auto v = keyword(key);
    return v && integer(*v, key) != 0;
  }
  DType dtype_or(DType fallback) const {
    auto v = keyword("dtype");
    if (!v) return fallback;
    if (v->kind != Value::DTypeKind)
      fail(v->pos, fmt::format("dtype of {} must be a dtype (f32, i32, ...)", callee));
    return v->dtype;
  }
  void allow_keywords(std::initializer_list<std::string_view> allowed) const {
    for (const auto& [key, v] : keywords)
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        fail(v.pos, fmt::format("{} takes no argument '{}'", callee, key));
  }
};

// A number as a tensor of `like`'s dtype category (or Float32/Int32 alone).
Tensor as_tensor(const Value& v, const Tensor* like) {
  if (v.kind == Value::TensorKind) return v.tensor;
  if (like) return scalar_for(*like, v.number, v.is_float);
  return Tensor::scalar(v.number, v.is_float ? DType::Float32 : DType::Int32);
}

using Method = std::function<Tensor(const Tensor& self, const Args& args)>;
using Constructor = std::function<Tensor(const Args& args)>;

// The second operand of a binary method: a tensor, or a number taking self's dtype.
Tensor operand(const Tensor& self, const Args& a) {
  a.expect_count(1, 1);
  return as_tensor(a.at(0), &self);
}

const std::map<std::string, Method>& methods() {
  using T = Tensor;
  auto unary = [](Tensor (Tensor::*f)() const) {
    return Method([f](const T& x, const Args& a) {
      a.expect_count(0, 0);
      return (x.*f)();
    });
  };
  auto binary = [](Tensor (Tensor::*f)(const Tensor&) const) {
    return Method([f](const T& x, const Args& a) { return (x.*f)(operand(x, a)); });
  };
  using Reduce = Tensor (Tensor::*)(std::vector<int>, bool) const;
  auto reduce = [](Reduce f) {
    return Method([f](const T& x, const Args& a) { return (x.*f)(a.axes_from(0), a.flag("keepdim")); });
  };
  auto one_axis = [](Tensor (Tensor::*f)(int) const, std::optional<int> fallback) {
    return Method([f, fallback](const T& x, const Args& a) {
      a.expect_count(fallback ? 0 : 1, 1);
      return (x.*f)(static_cast<int>(a.count() ? a.integer(0) : *fallback));
    });
  };
  static const std::map<std::string, Method> table = {
      {"neg", unary(&T::neg)},
      {"exp", unary(&T::exp)},
      {"log", unary(&T::log)},
      {"exp2", unary(&T::exp2)},
      {"log2", unary(&T::log2)},
      {"sqrt", unary(&T::sqrt)},
      {"rsqrt", unary(&T::rsqrt)},
      {"sin", unary(&T::sin)},
      {"cos", unary(&T::cos)},
      {"tanh", unary(&T::tanh)},
      {"sigmoid", unary(&T::sigmoid)},
      {"relu", unary(&T::relu)},
      {"abs", unary(&T::abs)},
      {"sign", unary(&T::sign)},
      {"reciprocal", unary(&T::reciprocal)},
      {"square", unary(&T::square)},
      {"logical_not", unary(&T::logical_not)},
      {"contiguous", unary(&T::contiguous)},
      {"pow", binary(&T::pow)},
      {"maximum", binary(&T::maximum)},
      {"minimum", binary(&T::minimum)},
      {"floor_div", binary(&T::floor_div)},
      {"lt", binary(&T::lt)},
      {"le", binary(&T::le)},
      {"gt", binary(&T::gt)},
      {"ge", binary(&T::ge)},
      {"eq", binary(&T::eq)},
      {"ne", binary(&T::ne)},
      {"logical_and", binary(&T::logical_and)},
      {"logical_or", binary(&T::logical_or)},
      {"matmul", binary(&T::matmul)},
      {"sum", reduce(&T::sum)},
      {"max", reduce(&T::max)},
      {"min", reduce(&T::min)},
      {"mean", reduce(&T::mean)},
      {"prod", reduce(&T::prod)},
      {"argmax", one_axis(&T::argmax, std::nullopt)},
      {"argmin", one_axis(&T::argmin, std::nullopt)},
      {"softmax", one_axis(&T::softmax, -1)},
      {"log_softmax", one_axis(&T::log_softmax, -1)},
      {"logsumexp", one_axis(&T::logsumexp, std::nullopt)},
      {"squeeze", one_axis(&T::squeeze, std::nullopt)},
      {"unsqueeze", one_axis(&T::unsqueeze, std::nullopt)},
      {"reshape", [](const T& x, const Args& a) { return x.reshape(a.integers_from(0)); }},
      {"expand", [](const T& x, const Args& a) { return x.expand(a.integers_from(0)); }},
      {"permute", [](const T& x, const Args& a) { return x.permute(a.axes_from(0)); }},
      {"flip", [](const T& x, const Args& a) { return x.flip(a.axes_from(0)); }},
      {"transpose",
       [](const T& x, const Args& a) {
         a.expect_count(0, 2);
         return x.transpose(static_cast<int>(a.integer_or(0, -2)), static_cast<int>(a.integer_or(1, -1)));
       }},
      {"flatten",
       [](const T& x, const Args& a) {
         a.expect_count(0, 2);
         return x.flatten(static_cast<int>(a.integer_or(0, 0)), static_cast<int>(a.integer_or(1, -1)));
       }},
      {"slice",
       [](const T& x, const Args& a) {
         a.expect_count(3, 4);
         return x.slice(static_cast<int>(a.integer(0)), a.integer(1), a.integer(2), a.integer_or(3, 1));
       }},
      {"pad", [](const T& x, const Args& a) { return x.pad(a.pairs("(lo, hi)")); }},
      {"shrink", [](const T& x, const Args& a) { return x.shrink(a.pairs("(start, end)")); }},
      {"gather",
       [](const T& x, const Args& a) {
         a.expect_count(2, 2);
         return x.gather(static_cast<int>(a.integer(0)), a.tensor(1));
       }},
      {"index_select",
       [](const T& x, const Args& a) {
         a.expect_count(2, 2);
         return x.index_select(static_cast<int>(a.integer(0)), a.tensor(1));
       }},
      {"one_hot",
       [](const T& x, const Args& a) {
         a.expect_count(1, 1);
         return x.one_hot(a.integer(0));
       }},
      {"clamp",
       [](const T& x, const Args& a) {
         a.expect_count(2, 2);
         return x.clamp(a.number(0), a.number(1));
       }},
      {"where",
       [](const T& x, const Args& a) {
         a.expect_count(2, 2);
         const Tensor* like = a.at(0).kind == Value::TensorKind   ? &a.at(0).tensor
                              : a.at(1).kind == Value::TensorKind ? &a.at(1).tensor
                                                                  : nullptr;
         return x.where(as_tensor(a.at(0), like), as_tensor(a.at(1), like));
       }},
      {"cast",
       [](const T& x, const Args& a) {
         a.expect_count(1, 1);
         if (a.at(0).kind != Value::DTypeKind)
           a.fail(a.at(0).pos, "cast takes a dtype: bool, u8, i32, i64, f32, f64");
         return x.cast(a.at(0).dtype);
       }},
  };
  return table;
}

// Constructors make the program's inputs; their results are realized at once.
const std::map<std::string, Constructor>& constructors() {
  auto shaped = [](Tensor (*f)(Shape, DType)) {
    return Constructor([f](const Args& a) {
      a.allow_keywords({"dtype"});
      return f(a.integers_from(0), a.dtype_or(DType::Float32));
    });
  };
  static const std::map<std::string, Constructor> table = {
      {"rand", shaped(&Tensor::rand)},
      {"randn", shaped(&Tensor::randn)},
      {"zeros", shaped(&Tensor::zeros)},
      {"ones", shaped(&Tensor::ones)},
      {"full",
       [](const Args& a) {
         a.allow_keywords({"dtype"});
         return Tensor::full(a.integers_from(1), a.number(0), a.dtype_or(DType::Float32));
       }},
      {"arange",
       [](const Args& a) {
         a.expect_count(1, 3);
         return a.count() == 1 ? Tensor::arange(a.integer(0))
                               : Tensor::arange(a.integer(0), a.integer(1), a.integer_or(2, 1));
       }},
      {"eye",
       [](const Args& a) {
         a.expect_count(1, 1);
         a.allow_keywords({"dtype"});
         return Tensor::eye(a.integer(0), a.dtype_or(DType::Float32));
       }},
      {"randint",
       [](const Args& a) { return Tensor::randint(a.integer(0), a.integer(1), a.integers_from(2)); }},
  };
  return table;
}

// Functions of several tensors that are not methods of the first.
Tensor function(const std::string& name, const Args& a) {
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < a.count(); ++i) tensors.push_back(a.tensor(i));
  a.allow_keywords({"axis"});
  const int axis = a.keyword("axis") ? static_cast<int>(a.integer(*a.keyword("axis"), "axis")) : 0;
  if (tensors.empty()) a.fail(a.pos, name + " needs at least one tensor");
  return name == "cat" ? cat(tensors, axis) : stack(tensors, axis);
}

class Interpreter {
 public:
  explicit Interpreter(std::string_view src) : src_(src), tokens_(lex(src)) {}

  Program run() {
    manual_seed(0);  // the same program draws the same inputs every time
    while (peek().kind != Token::End) {
      if (accept(";")) continue;
      statement();
      if (peek().kind != Token::End && !accept(";"))
        fail(peek().pos,
             fmt::format("expected ';' or a new line after the statement, got {}", describe(peek())));
    }
    return outputs();
  }

 private:
  struct Variable {
    Value value;
    bool read = false;
    size_t order = 0;
  };

  std::string_view src_;
  std::vector<Token> tokens_;
  size_t next_ = 0;
  std::map<std::string, Variable> vars_;
  size_t assignments_ = 0;

  [[noreturn]] void fail(size_t pos, const std::string& message) const {
    throw Located(located(src_, pos, message));
  }
  const Token& peek() const { return tokens_[next_]; }
  const Token& take() { return tokens_[next_++]; }
  bool accept(std::string_view symbol) {
    if (peek().kind != Token::Symbol || peek().text != symbol) return false;
    ++next_;
    return true;
  }
  void expect(std::string_view symbol, const std::string& context) {
    if (!accept(symbol))
      fail(peek().pos, fmt::format("expected '{}' {}, got {}", symbol, context, describe(peek())));
  }

  void statement() {
    const Token& name = take();
    if (name.kind != Token::Name)
      fail(name.pos, fmt::format("expected a statement 'name = expression', got {}", describe(name)));
    expect("=", fmt::format("after '{}'", name.text));
    Value v = expression();
    vars_[name.text] = Variable{std::move(v), false, assignments_++};
  }

  Program outputs() const {
    std::vector<std::pair<size_t, NamedTensor>> inputs, outputs;
    for (const auto& [name, var] : vars_) {
      if (var.value.kind != Value::TensorKind) continue;
      if (var.value.input)
        inputs.push_back({var.order, {name, var.value.tensor}});
      else if (!var.read)
        outputs.push_back({var.order, {name, var.value.tensor}});
    }
    auto by_order = [](const auto& a, const auto& b) { return a.first < b.first; };
    std::sort(inputs.begin(), inputs.end(), by_order);
    std::sort(outputs.begin(), outputs.end(), by_order);
    if (outputs.empty())
      fail(src_.size(),
           "the program has no output: name a result that no later statement reads, e.g. out = ...");
    Program p;
    for (auto& [order, t] : inputs) p.inputs.push_back(std::move(t));
    for (auto& [order, t] : outputs) p.outputs.push_back(std::move(t));
    return p;
  }

  // expression := comparison; precedence climbs: comparison < + - < * / % @ < unary - < ** < postfix
  Value expression() { return comparison(); }

  Value comparison() {
    Value left = additive();
    static const std::set<std::string> ops{"<", "<=", ">", ">=", "==", "!=", "&", "|"};
    while (peek().kind == Token::Symbol && ops.count(peek().text)) {
      const Token op = take();
      left = binary(op, left, additive());
    }
    return left;
  }

  Value additive() {
    Value left = term();
    while (peek().kind == Token::Symbol && (peek().text == "+" || peek().text == "-")) {
      const Token op = take();
      left = binary(op, left, term());
    }
    return left;
  }

  Value term() {
    Value left = unary();
    while (peek().kind == Token::Symbol &&
           (peek().text == "*" || peek().text == "/" || peek().text == "%" || peek().text == "@")) {
      const Token op = take();
      left = binary(op, left, unary());
    }
    return left;
  }

  Value unary() {
    if (peek().kind == Token::Symbol && (peek().text == "-" || peek().text == "~")) {
      const Token op = take();
      Value v = unary();
      if (v.kind == Value::NumberKind && op.text == "-") return Value::num(-v.number, v.is_float, op.pos);
      if (v.kind != Value::TensorKind) fail(op.pos, fmt::format("'{}' needs a tensor or a number", op.text));
      return guarded(op.pos, [&] { return op.text == "-" ? -v.tensor : ~v.tensor; });
    }
    return power();
  }

  Value power() {
    Value base = postfix();
    if (peek().kind == Token::Symbol && peek().text == "**") {
      const Token op = take();
      return binary(op, base, unary());
    }
    return base;
  }

  Value postfix() {
    Value v = primary();
    while (accept(".")) {
      const Token& name = take();
      if (name.kind != Token::Name)
        fail(name.pos, fmt::format("expected a method name after '.', got {}", describe(name)));
      if (v.kind != Value::TensorKind)
        fail(name.pos, fmt::format("'.{}' needs a tensor on its left", name.text));
      const Args args = arguments(name);
      v = method(name, v.tensor, args, v.pos);
    }
    return v;
  }

  Value primary() {
    const Token& t = take();
    if (t.kind == Token::Number) return Value::num(t.value, t.is_float, t.pos);
    if (t.kind == Token::Symbol && t.text == "(") {
      Value v = expression();
      expect(")", "closing the parenthesis");
      v.pos = t.pos;
      return v;
    }
    if (t.kind != Token::Name) fail(t.pos, fmt::format("expected a value, got {}", describe(t)));
    if (peek().kind == Token::Symbol && peek().text == "(") return call(t);
    if (auto it = vars_.find(t.text); it != vars_.end()) {
      it->second.read = true;
      Value v = it->second.value;
      v.pos = t.pos;
      return v;
    }
    try {
      Value v;
      v.kind = Value::DTypeKind;
      v.dtype = parse_dtype(t.text);
      v.pos = t.pos;
      return v;
    } catch (const Error&) {
      fail(t.pos, fmt::format("'{}' is not defined", t.text));
    }
  }

  Args arguments(const Token& callee) {
    Args a{callee.text, callee.pos, {}, {}, src_};
    expect("(", fmt::format("opening the arguments of {}", callee.text));
    if (accept(")")) return a;
    do {
      if (peek().kind == Token::Name && tokens_[next_ + 1].kind == Token::Symbol &&
          tokens_[next_ + 1].text == "=") {
        const Token key = take();
        take();
        Value v = expression();
        v.pos = key.pos;  // errors about a keyword point at its name
        a.keywords[key.text] = std::move(v);
      } else {
        if (!a.keywords.empty()) fail(peek().pos, "a positional argument cannot follow a keyword argument");
        a.positional.push_back(expression());
      }
    } while (accept(","));
    expect(")", fmt::format("closing the arguments of {}", callee.text));
    return a;
  }

  Value call(const Token& name) {
    const Args args = arguments(name);
    if (auto it = constructors().find(name.text); it != constructors().end()) {
      Value v = guarded(name.pos, [&] { return it->second(args); });
      v.tensor.realize();
      v.input = true;
      return v;
    }
    if (name.text == "cat" || name.text == "stack")
      return guarded(name.pos, [&] { return function(name.text, args); });
    if (name.text == "grad") {  // d(target)/d(w), symbolic (loom::gradient)
      args.expect_count(2, 2);
      return guarded(name.pos, [&] { return gradient(args.tensor(0), {args.tensor(1)}).at(0); });
    }
    if (methods().count(name.text)) {  // f(x, ...) is x.f(...)
      if (args.count() == 0)
        fail(name.pos, fmt::format("{} needs a tensor as its first argument", name.text));
      Args rest = args;
      rest.positional.erase(rest.positional.begin());
      const Tensor* like = nullptr;
      for (const Value& v : args.positional)
        if (v.kind == Value::TensorKind) like = &v.tensor;
      return method(name, as_tensor(args.at(0), like), rest, name.pos);
    }
    fail(name.pos, fmt::format("no function is called '{}' (docs/loom-dump.md lists them)", name.text));
  }

  Value method(const Token& name, const Tensor& self, const Args& args, size_t pos) {
    auto it = methods().find(name.text);
    if (it == methods().end())
      fail(name.pos, fmt::format("tensors have no method '{}' (docs/loom-dump.md lists them)", name.text));
    args.allow_keywords({"keepdim"});
    Value v = guarded(name.pos, [&] { return it->second(self, args); });
    v.pos = pos;
    return v;
  }

  Value binary(const Token& op, const Value& a, const Value& b) {
    if (a.kind == Value::DTypeKind || b.kind == Value::DTypeKind)
      fail(op.pos, fmt::format("'{}' needs tensors or numbers, not a dtype", op.text));
    if (a.kind == Value::NumberKind && b.kind == Value::NumberKind) return fold(op, a, b);
    const Tensor* like = a.kind == Value::TensorKind ? &a.tensor : &b.tensor;
    const Tensor x = as_tensor(a, like), y = as_tensor(b, like);
    Value v = guarded(op.pos, [&]() -> Tensor {
      const std::string& o = op.text;
      if (o == "+") return x + y;
      if (o == "-") return x - y;
      if (o == "*") return x * y;
      if (o == "/") return x / y;
      if (o == "%") return x % y;
      if (o == "@") return x.matmul(y);
      if (o == "**") return x.pow(y);
      if (o == "<") return x < y;
      if (o == "<=") return x <= y;
      if (o == ">") return x > y;
      if (o == ">=") return x >= y;
      if (o == "==") return x.eq(y);
      if (o == "!=") return x.ne(y);
      if (o == "&") return x & y;
      return x | y;
    });
    v.pos = a.pos;
    return v;
  }

  Value fold(const Token& op, const Value& a, const Value& b) {
    const double x = a.number, y = b.number;
    const bool is_float = a.is_float || b.is_float || op.text == "/";
    const std::string& o = op.text;
    double r = 0;
    if (o == "+")
      r = x + y;
    else if (o == "-")
      r = x - y;
    else if (o == "*")
      r = x * y;
    else if (o == "/")
      r = x / y;
    else if (o == "**")
      r = std::pow(x, y);
    else if (o == "%")
      r = y == 0 ? 0 : x - std::floor(x / y) * y;
    else
      fail(op.pos, fmt::format("'{}' between two numbers is not supported; one side must be a tensor", o));
    return Value::num(r, is_float, a.pos);
  }

  // Runs a Tensor API call; its loom::Error is reported at `pos`.
  template <class F>
  Value guarded(size_t pos, F&& f) {
    try {
      return Value::of(f(), pos);
    } catch (const Located&) {
      throw;
    } catch (const Error& e) {
      fail(pos, e.what());
    }
  }
};

}  // namespace

Program run_program(std::string_view source) { return Interpreter(source).run(); }

}  // namespace loom::tools
