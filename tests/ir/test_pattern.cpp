// UPat matching, PatternMatcher dispatch and composition, and graph_rewrite:
// fixpoints, the cycle guard, the two orders, memoisation, context, substitute,
// and the rewrites and substitutions that stop at a boundary op.
#include "ir/pattern.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <map>
#include <string>
#include <unordered_map>

using namespace loom;

namespace {
using Captures = std::vector<std::pair<std::string_view, UOpPtr>>;

bool matches(const UPat& p, const UOpPtr& u) {
  Captures caps;
  return p.match(u, caps);
}
UOpPtr i64(int64_t v) { return const_int(DType::Int64, v); }
UOpPtr f32(double v) { return const_float(DType::Float32, v); }
UOpPtr sink(std::vector<UOpPtr> src) { return UOp::make(Op::SINK, DType::Int64, std::move(src)); }
}  // namespace

// ---- UPat ------------------------------------------------------------------------------
TEST_CASE("upat: op sets, dtypes and args") {
  const auto x = make_var("x", 0, 9), y = make_var("y", 0, 9);
  CHECK(matches(UPat(), x));
  CHECK(matches(UPat::ops({Op::ADD, Op::MUL}), x + y));
  CHECK(matches(UPat::ops({Op::ADD, Op::MUL}), x * y));
  CHECK_FALSE(matches(UPat::ops({Op::ADD, Op::MUL}), x - y));
  CHECK_FALSE(matches(UPat::ops({Op::ADD, Op::MUL}), x));

  CHECK(matches(UPat::var("v", {DType::Int32, DType::Float32}), const_int(DType::Int32, 1)));
  CHECK(matches(UPat::var("v", {DType::Int32, DType::Float32}), f32(1)));
  CHECK_FALSE(matches(UPat::var("v", {DType::Int32, DType::Float32}), i64(1)));
  CHECK_FALSE(matches(UPat::cvar("c").with_dtypes({DType::Float64}), f32(1)));
  CHECK_FALSE(matches(UPat::cvar("c"), x));

  const auto range = UPat::ops({Op::RANGE}).with_arg(AxisArg{0, AxisKind::Reduce});
  CHECK(matches(range, make_range(8, 0, AxisKind::Reduce)));
  CHECK_FALSE(matches(range, make_range(8, 0, AxisKind::Loop)));
  CHECK_FALSE(matches(range, make_range(8, 1, AxisKind::Reduce)));
  // An arg compares like the intern table does: bitwise for doubles.
  CHECK(matches(UPat::cvar().with_arg(-0.0), f32(-0.0)));
  CHECK_FALSE(matches(UPat::cvar().with_arg(-0.0), f32(0.0)));
}

TEST_CASE("upat: named captures, and a repeated name binds one node") {
  const auto x = make_var("x", 0, 9), y = make_var("y", 0, 9), three = i64(3);
  const auto pat = (UPat::var("a") + UPat::cvar("c")).named("sum");
  const auto sum = x + three;
  Captures caps;  // views of the pattern's names: the pattern must outlive them
  REQUIRE(pat.match(sum, caps));
  const Match m(sum, caps, nullptr);
  CHECK(m["a"] == x);
  CHECK(m["c"] == three);
  CHECK(m["sum"] == x + three);
  CHECK(m.has("a"));
  CHECK_FALSE(m.has("b"));
  CHECK_THROWS_WITH_AS(m["b"], "pattern rewrite asked for capture 'b' that the pattern does not bind", Error);

  const auto twice = UPat::var("x") + UPat::var("x");
  CHECK(matches(twice, x + x));
  CHECK_FALSE(matches(twice, x + y));
}

TEST_CASE("upat: commutative ops match in any order, others only in order") {
  const auto x = make_var("x", 0, 9), three = i64(3);
  Captures caps;
  REQUIRE((UPat::cvar("c") + UPat::var("x")).match(x + three, caps));  // the constant is second in the node
  CHECK(caps.size() == 2);
  CHECK(matches(UPat::var("x") + 0, i64(0) + x));
  CHECK(matches(UPat::cvar("c") - UPat::var("x"), three - x));
  CHECK_FALSE(matches(UPat::cvar("c") - UPat::var("x"), x - three));

  // The first order binds x to a*3 and then fails; its capture must not leak into
  // the second order, which binds x to a and succeeds.
  const auto a = make_var("a", 0, 9);
  const auto x_plus_xc = UPat::var("x") + UPat::var("x") * UPat::cvar("c");
  caps.clear();
  REQUIRE(x_plus_xc.match(a * 3 + a, caps));
  CHECK(caps.size() == 2);
  CHECK(Match(a, caps, nullptr)["x"] == a);
  CHECK(Match(a, caps, nullptr)["c"] == three);
}

TEST_CASE("upat: exact source count unless allow_more_src") {
  const auto value = f32(2), r = make_range(4, 0, AxisKind::Reduce);
  const auto red = UOp::make(Op::REDUCE, DType::Float32, {value, r}, ReduceArg{Op::ADD, {}});
  const auto just_value = UPat::op(Op::REDUCE, {UPat::var("v")});
  CHECK_FALSE(matches(just_value, red));
  const auto prefix = just_value.allow_more_src();
  Captures caps;
  REQUIRE(prefix.match(red, caps));
  CHECK(Match(red, caps, nullptr)["v"] == value);
  CHECK_FALSE(matches(UPat::op(Op::REDUCE, {UPat(), UPat(), UPat()}).allow_more_src(), red));  // too few
  CHECK_FALSE(matches(UPat::op(Op::NEG, {UPat(), UPat()}), -value));
}

TEST_CASE("upat: cnst compares the value as a number, whatever the dtype") {
  CHECK(matches(UPat::cnst(0), i64(0)));
  CHECK(matches(UPat::cnst(0), f32(0.0)));
  CHECK(matches(UPat::cnst(0), f32(-0.0)));  // as a number -0.0 == 0
  CHECK(matches(UPat::cnst(1), const_int(DType::Bool, 1)));
  CHECK(matches(UPat::cnst(2.5), f32(2.5)));
  CHECK_FALSE(matches(UPat::cnst(0), i64(1)));
  CHECK_FALSE(matches(UPat::cnst(0), make_var("z", 0, 0)));  // always 0, but not a CONST
  CHECK_FALSE(matches(UPat::cnst(std::numeric_limits<double>::quiet_NaN()),
                      f32(std::numeric_limits<double>::quiet_NaN())));
}

// ---- PatternMatcher ------------------------------------------------------------------------
TEST_CASE("pattern matcher: a rule is tried only on its ops, in table order") {
  std::vector<std::string> log;
  auto logger = [&log](std::string tag) {
    return [&log, tag](const Match& m) -> UOpPtr {
      log.push_back(tag + ":" + std::string(op_name(m.root()->op)));
      return nullptr;  // decline, so every rule is tried
    };
  };
  const PatternMatcher pm("log", {
                                     {UPat(), logger("any")},
                                     {UPat::ops({Op::MUL}), logger("mul")},
                                     {UPat::ops({Op::ADD, Op::SUB}), logger("addsub")},
                                     {UPat::var(), logger("any2")},
                                 });
  const auto x = make_var("x", 0, 9);
  const auto three = i64(3);
  for (const auto& n : {x * three, x + three, x - three, x}) CHECK(pm.rewrite(n) == nullptr);
  CHECK(log == std::vector<std::string>{"any:MUL", "mul:MUL", "any2:MUL",     //
                                        "any:ADD", "addsub:ADD", "any2:ADD",  //
                                        "any:SUB", "addsub:SUB", "any2:SUB",  //
                                        "any:DEFINE_VAR", "any2:DEFINE_VAR"});

  // Over a whole graph the MUL rule sees the MUL nodes and nothing else.
  int mul_calls = 0;
  std::vector<Op> seen;
  const PatternMatcher muls("muls", {{UPat::ops({Op::MUL}), [&](const Match& m) -> UOpPtr {
                                        ++mul_calls;
                                        seen.push_back(m.root()->op);
                                        return nullptr;
                                      }}});
  const auto g = (x + three) * (x - three) + x * x;
  CHECK(graph_rewrite(g, muls) == g);
  CHECK(mul_calls == 2);
  CHECK(seen == std::vector<Op>{Op::MUL, Op::MUL});
}

TEST_CASE("pattern matcher: a declining guard lets the next rule try; returning the node is declining") {
  const auto x = make_var("x", 0, 9);
  const PatternMatcher pm("guards", {
                                        {UPat::var("x") * 2, [](const Match&) -> UOpPtr { return nullptr; }},
                                        {UPat::var("x") * 2, [](const Match& m) { return m.root(); }},
                                        {UPat::var("x") * 2, [](const Match& m) { return m["x"] + m["x"]; }},
                                    });
  CHECK(pm.rewrite(x * 2) == x + x);
  CHECK(pm.rewrite(x * 3) == nullptr);
}

TEST_CASE("pattern matcher: + keeps the left table's rules first") {
  const auto x = make_var("x", 0, 9);
  const PatternMatcher to_add("to_add",
                              {{UPat::var("x") * 2, [](const Match& m) { return m["x"] + m["x"]; }}});
  const PatternMatcher to_shl("to_shl", {{UPat::var("x") * 2, [](const Match& m) {
                                            return alu(Op::SHL, {m["x"], i64(1)});
                                          }}});
  const auto add_first = to_add + to_shl, shl_first = to_shl + to_add;
  CHECK(add_first.name() == "to_add+to_shl");
  CHECK(add_first.size() == 2);
  CHECK(add_first.rewrite(x * 2) == x + x);
  CHECK(shl_first.rewrite(x * 2) == alu(Op::SHL, {x, i64(1)}));
}

// ---- graph_rewrite -------------------------------------------------------------------------
namespace {
const PatternMatcher& folding() {
  static const PatternMatcher pm(
      "folding", {
                     {UPat::cvar("a") + UPat::cvar("b"),
                      [](const Match& m) { return i64(m["a"]->const_int() + m["b"]->const_int()); }},
                     {UPat::cvar("a") * UPat::cvar("b"),
                      [](const Match& m) { return i64(m["a"]->const_int() * m["b"]->const_int()); }},
                     {UPat::var("x") + 0, [](const Match& m) { return m["x"]; }},
                     {UPat::var("x") * 1, [](const Match& m) { return m["x"]; }},
                     {UPat::var("x") + UPat::var("x"), [](const Match& m) { return m["x"] * 2; }},
                     {(UPat::var("x") * UPat::cvar("c1")) * UPat::cvar("c2"),
                      [](const Match& m) { return m["x"] * (m["c1"]->const_int() * m["c2"]->const_int()); }},
                 });
  return pm;
}
}  // namespace

TEST_CASE("graph_rewrite: rewrites to a fixpoint") {
  const auto x = make_var("x", 0, 9);
  // ((2+3)*x + 4*0) * (0+1) -> (5*x + 0) * 1 -> 5*x
  const auto g = ((i64(2) + i64(3)) * x + i64(4) * i64(0)) * (i64(0) + i64(1));
  CHECK(graph_rewrite(g, folding()) == i64(5) * x);
  CHECK(graph_rewrite(g, folding(), nullptr, RewriteOrder::TopDown) == i64(5) * x);
  // Each result is rewritten again: (x+x)+(x+x) -> (x*2)+(x*2) -> (x*2)*2 -> x*4.
  CHECK(graph_rewrite((x + x) + (x + x), folding()) == x * 4);
  const auto done = x * 4;
  CHECK(graph_rewrite(done, folding()) == done);  // a fixpoint stays put
}

TEST_CASE("graph_rewrite: a cyclic pattern set hits the guard, which names the set") {
  const PatternMatcher one_to_two("one_to_two", {{UPat::cnst(1), [](const Match&) { return i64(2); }}});
  const PatternMatcher two_to_one("two_to_one", {{UPat::cnst(2), [](const Match&) { return i64(1); }}});
  const auto cyclic = one_to_two + two_to_one;
  const auto g = make_var("x", 0, 9) + 1;
  for (RewriteOrder order : {RewriteOrder::BottomUp, RewriteOrder::TopDown}) {
    try {
      graph_rewrite(g, cyclic, nullptr, order);
      FAIL("no error for a cyclic pattern set");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).starts_with(
          "graph_rewrite: pattern set 'one_to_two+two_to_one' did not reach a fixpoint within"));
    }
  }
  // Either half alone terminates.
  CHECK(graph_rewrite(g, one_to_two) == make_var("x", 0, 9) + 2);
}

TEST_CASE("graph_rewrite: BottomUp and TopDown give different results where order matters") {
  // x*2 -> x+x and (x*2)/2 -> x overlap on (a*2)/2.
  //   BottomUp rewrites a*2 first, to a+a; (a+a)/2 then matches nothing: (a+a)/2.
  //   TopDown sees (a*2)/2 first and folds it whole: a.
  const PatternMatcher pm("overlap", {
                                         {UPat::var("x") * 2, [](const Match& m) { return m["x"] + m["x"]; }},
                                         {(UPat::var("x") * 2) / 2, [](const Match& m) { return m["x"]; }},
                                     });
  const auto a = make_var("a", 0, 9);
  const auto g = (a * 2) / 2;
  CHECK(graph_rewrite(g, pm, nullptr, RewriteOrder::BottomUp) == (a + a) / 2);
  CHECK(graph_rewrite(g, pm, nullptr, RewriteOrder::TopDown) == a);
}

TEST_CASE("graph_rewrite: a shared subgraph is rewritten once") {
  const auto x = make_var("x", 0, 9);
  const auto shared = x * 1;
  const auto g = sink({shared + 3, shared * 5, -shared, shared});
  int folds = 0;
  std::map<const UOp*, int> tried;
  const PatternMatcher pm("counting", {
                                          {UPat::var("x") * 1,
                                           [&](const Match& m) {
                                             ++folds;
                                             return m["x"];
                                           }},
                                          {UPat(),
                                           [&](const Match& m) -> UOpPtr {
                                             ++tried[m.root().get()];
                                             return nullptr;
                                           }},
                                      });
  for (RewriteOrder order : {RewriteOrder::BottomUp, RewriteOrder::TopDown}) {
    folds = 0;
    tried.clear();
    CHECK(graph_rewrite(g, pm, nullptr, order) == sink({x + 3, x * 5, -x, x}));
    CHECK(folds == 1);
    for (const auto& [node, count] : tried) CHECK(count == 1);
  }
}

TEST_CASE("graph_rewrite: the context object reaches the rewrite functions") {
  struct Bind {
    std::map<std::string, int64_t> values;
    int calls = 0;
  };
  const PatternMatcher bind_vars("bind_vars", {{UPat::ops({Op::DEFINE_VAR}), [](const Match& m) -> UOpPtr {
                                                  auto& ctx = m.ctx<Bind>();
                                                  ++ctx.calls;
                                                  const auto it =
                                                      ctx.values.find(m.root()->get<VarArg>().name);
                                                  return it == ctx.values.end() ? nullptr : i64(it->second);
                                                }}});
  const auto n = make_var("n", 1, 16), k = make_var("k", 1, 16);
  Bind ctx{{{"n", 7}}};
  CHECK(graph_rewrite(n * 4 + k, bind_vars, ctx) == i64(7) * 4 + k);
  CHECK(ctx.calls == 2);
  CHECK_THROWS_WITH_AS(graph_rewrite(n + 1, bind_vars),
                       "pattern rewrite needs a context object but none was given", Error);
}

TEST_CASE("substitute: replaces by pointer and rebuilds the users") {
  const auto x = make_var("x", 0, 9), y = make_var("y", 0, 9);
  const auto g = (x + y) * x;
  CHECK(substitute(g, {{x, i64(3)}}) == (i64(3) + y) * 3);
  // A replacement that contains the node it replaces is not rewritten again.
  CHECK(substitute(g, {{x, x + 1}}) == ((x + 1) + y) * (x + 1));
  CHECK(substitute(g, {{x + y, y}}) == y * x);
  CHECK(substitute(g, {}) == g);
  CHECK(substitute(g, {{make_var("unused", 0, 1), x}}) == g);
}

namespace {
// LOAD(INDEX(BUFFERIZE(value, r), at)): a read of another kernel's buffer.
UOpPtr read_buffer(const UOpPtr& value, const UOpPtr& at) {
  const auto buf = UOp::make(Op::BUFFERIZE, value->dtype, {value, make_range(4, 0)}, std::vector<int64_t>{4});
  return UOp::make(Op::LOAD, value->dtype, {UOp::make(Op::INDEX, value->dtype.ptr_to(), {buf, at})});
}
}  // namespace

TEST_CASE("graph_rewrite_within: a boundary node is neither rewritten nor entered") {
  const auto x = make_var("x", 0, 9), y = make_var("y", 0, 9);
  const auto g = read_buffer(x + i64(0), y) + (x + i64(0));
  CHECK(graph_rewrite(g, folding()) == read_buffer(x, y) + x);
  CHECK(graph_rewrite_within(g, folding(), Op::BUFFERIZE) == read_buffer(x + i64(0), y) + x);
  CHECK(graph_rewrite_within(g, folding(), Op::BUFFERIZE, nullptr, RewriteOrder::TopDown) ==
        read_buffer(x + i64(0), y) + x);
}

TEST_CASE("substitute_within: substitute's result unless a key lies under a boundary node") {
  const auto x = make_var("x", 0, 9), y = make_var("y", 0, 9);
  const auto g = read_buffer(x * 2, y) + y * x;
  // No y under the BUFFERIZE: the same nodes as substitute.
  CHECK(substitute_within(g, {{y, i64(1)}}, Op::BUFFERIZE) == substitute(g, {{y, i64(1)}}));
  CHECK(substitute_within(g, {{y, i64(1)}}, Op::BUFFERIZE) == read_buffer(x * 2, i64(1)) + i64(1) * x);
  // x is also under it: substitute rebuilds the buffer, substitute_within keeps it.
  CHECK(substitute(g, {{x, i64(3)}}) == read_buffer(i64(3) * 2, y) + y * 3);
  CHECK(substitute_within(g, {{x, i64(3)}}, Op::BUFFERIZE) == read_buffer(x * 2, y) + y * 3);
  CHECK(substitute_within(g, {}, Op::BUFFERIZE) == g);
}

TEST_CASE("graph_rewrite: a chain 100,000 nodes deep, without recursion") {
  const auto x = make_var("x", 0, 9);
  UOpPtr chain = x, expected = x;
  for (int i = 0; i < 100000; ++i) {
    chain = chain - 1;
    expected = expected + i64(-1);
  }
  const PatternMatcher sub_to_add("sub_to_add", {{UPat::var("a") - UPat::cvar("c"), [](const Match& m) {
                                                    return m["a"] + i64(-m["c"]->const_int());
                                                  }}});
  CHECK(graph_rewrite(chain, sub_to_add) == expected);
  CHECK(graph_rewrite(chain, sub_to_add, nullptr, RewriteOrder::TopDown) == expected);
  // And one that collapses entirely: x+0+0+... -> x.
  UOpPtr zeros = x;
  for (int i = 0; i < 100000; ++i) zeros = zeros + 0;
  CHECK(graph_rewrite(zeros, folding()) == x);
}

TEST_CASE("matching backtracks into a commutative sub-pattern when a later capture fails") {
  // (a*y)/y must match (y*a)/y: the MUL first binds a=y', y=a', then the divisor
  // cannot bind y to a different node, so the MUL retries its other order.
  UOpPtr a = make_var("a", 0, 9), y = make_var("y", 1, 9);
  UOpPtr e = UOp::make(Op::IDIV, DType::Int64, {y * a, y});
  std::vector<std::pair<std::string_view, UOpPtr>> caps;
  UPat p = (UPat::var("a") * UPat::var("y")) / UPat::var("y");
  REQUIRE(p.match(e, caps));
  auto get = [&](std::string_view n) {
    for (auto& [k, v] : caps)
      if (k == n) return v;
    return UOpPtr{};
  };
  CHECK(get("y") == y);
  CHECK(get("a") == a);
  // and a node that matches no order is still refused, with no captures left behind
  caps.clear();
  CHECK_FALSE(p.match(UOp::make(Op::IDIV, DType::Int64, {y * a, a + 1}), caps));
  CHECK(caps.empty());
}
