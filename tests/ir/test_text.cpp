// The IR text form: exact format, bit-exact round trips on random graphs,
// errors that name the line, and a chain too deep for recursion.
#include "ir/text.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>

using namespace loom;

namespace {
UOpPtr buffer(DType dt, int64_t id, int64_t size) {
  return UOp::make(Op::BUFFER, dt, {}, std::vector<int64_t>{id, size});
}
UOpPtr fconst(double v) { return UOp::make(Op::CONST, DType::Float64, {}, v); }

// Random graphs over every op, dtype and arg kind; each node is one UOp::make
// accepts (shape inference needs valid axes on movement ops, nothing else).
class RandomGraphs {
 public:
  explicit RandomGraphs(uint64_t seed) : rng_(seed) {}

  std::vector<UOpPtr> graph(size_t nodes) {
    pool_.clear();
    while (pool_.size() < nodes) {
      try {
        pool_.push_back(pick(4) == 0 || pool_.empty() ? leaf() : inner());
      } catch (const Error&) {  // a node UOp::make refuses (ir/validate.cpp): draw another
      }
    }
    return pool_;
  }
  UOpPtr any() { return pool_.at(pick(pool_.size())); }
  uint64_t pick(uint64_t n) { return rng_() % n; }

 private:
  std::mt19937_64 rng_;
  std::vector<UOpPtr> pool_;

  DType dtype() {
    DType dt{static_cast<Scalar>(pick(6))};
    if (pick(8) == 0) dt = dt.vec(1 << (1 + pick(4)));
    if (pick(10) == 0) dt = dt.ptr_to();
    return dt;
  }
  double special_float() {
    static const double specials[] = {0.0,
                                      -0.0,
                                      HUGE_VAL,
                                      -HUGE_VAL,
                                      std::numeric_limits<double>::quiet_NaN(),
                                      -std::numeric_limits<double>::quiet_NaN(),
                                      std::bit_cast<double>(uint64_t{0x7ff0000000000001}),  // signalling
                                      std::bit_cast<double>(uint64_t{0xfff80000deadbeef}),  // payload
                                      std::numeric_limits<double>::denorm_min(),
                                      std::numeric_limits<double>::max(),
                                      std::numeric_limits<double>::min(),
                                      0.1,
                                      1.0 / 3.0,
                                      1e300,
                                      -1e-300,
                                      1.0,
                                      -2.0,
                                      123456789.0,
                                      static_cast<double>(0.1f),
                                      9007199254740993.0};
    if (pick(3) == 0) return std::bit_cast<double>(rng_());  // any bits, NaNs with payloads included
    return specials[pick(std::size(specials))];
  }
  int64_t any_int() {
    static const int64_t specials[] = {
        0, 1, -1, 7, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
    return pick(2) ? specials[pick(std::size(specials))] : static_cast<int64_t>(rng_()) >> pick(64);
  }
  std::string name() {
    static const std::string names[] = {
        "n",         "batch",         "with space",  "quote\"d", "back\\slash",
        "new\nline", "tab\t\x01\x7f", "caf\xc3\xa9", "",         "]) [ (, %0 ="};
    return names[pick(std::size(names))];
  }
  std::vector<int64_t> ints(size_t n, int64_t lo, int64_t hi) {
    std::vector<int64_t> v(n);
    for (auto& x : v) x = lo + static_cast<int64_t>(pick(hi - lo + 1));
    return v;
  }
  std::vector<UOpPtr> sources(size_t n) {
    std::vector<UOpPtr> v;
    // Mostly recent nodes, so graphs get deep as well as wide.
    for (size_t i = 0; i < n; ++i)
      v.push_back(pick(2) ? pool_[pool_.size() - 1 - pick(std::min<size_t>(pool_.size(), 4))] : any());
    return v;
  }

  UOpPtr leaf() {
    switch (pick(7)) {
      case 0: return UOp::make(Op::CONST, DType::Float32, {}, special_float());
      case 1: return UOp::make(Op::CONST, dtype().base(), {}, any_int());
      case 2:
        return UOp::make(Op::DEFINE_VAR, DType::Int64, {},
                         VarArg{name(), -static_cast<int64_t>(pick(5)), 16});
      case 3: return buffer(dtype().base(), pick(100), 1 + pick(64));
      case 4: return UOp::make(Op::DEFINE_GLOBAL, dtype().ptr_to(), {}, static_cast<int64_t>(pick(8)));
      case 5: return UOp::make(Op::IOTA, dtype().base(), {}, Shape{1 + static_cast<int64_t>(pick(16))});
      default: return make_range(1 + pick(32), pick(6), static_cast<AxisKind>(pick(5)));
    }
  }

  UOpPtr inner() {
    switch (pick(4)) {
      case 0: return alu_node();
      case 1: return movement_node();
      default: return kernel_node();
    }
  }
  UOpPtr alu_node() {
    const Op op = static_cast<Op>(static_cast<int>(Op::NEG) +
                                  pick(static_cast<int>(Op::MULACC) - static_cast<int>(Op::NEG) + 1));
    const size_t arity = is_unary(op) ? 1 : is_binary(op) ? 2 : 3;
    return UOp::make(op, pick(2) ? dtype() : DType::Int64, sources(arity));
  }
  UOpPtr movement_node() {
    std::vector<UOpPtr> shaped;
    for (const auto& n : pool_)
      if (n->shape()) shaped.push_back(n);
    if (shaped.empty()) return leaf();
    const UOpPtr x = shaped[pick(shaped.size())];
    const size_t rank = x->shape()->size();
    std::vector<int64_t> order(rank);
    for (size_t i = 0; i < rank; ++i) order[i] = static_cast<int64_t>(i);
    std::shuffle(order.begin(), order.end(), rng_);
    switch (pick(7)) {
      case 0: return UOp::make(Op::RESHAPE, x->dtype, {x}, Shape(ints(pick(4), 1, 9)));
      case 1: return UOp::make(Op::EXPAND, x->dtype, {x}, Shape(ints(rank, 1, 9)));
      case 2: return UOp::make(Op::PERMUTE, x->dtype, {x}, order);
      case 3: return UOp::make(Op::PAD, x->dtype, {x}, Shape(ints(2 * rank, 0, 3)));
      case 4: return UOp::make(Op::SHRINK, x->dtype, {x}, Shape(ints(2 * rank, 0, 3)));
      case 5:
        return UOp::make(Op::FLIP, x->dtype, {x},
                         std::vector<int64_t>(order.begin(), order.begin() + pick(rank + 1)));
      default:
        return UOp::make(Op::REDUCE_AXIS, x->dtype, {x},
                         ReduceArg{pick(2) ? Op::ADD : Op::MAX,
                                   std::vector<int64_t>(order.begin(), order.begin() + pick(rank + 1))});
    }
  }
  UOpPtr kernel_node() {
    static const Op ops[] = {Op::INDEX,      Op::LOAD,  Op::STORE,   Op::REDUCE,     Op::END,
                             Op::BUFFERIZE,  Op::AFTER, Op::SINK,    Op::VECTORIZE,  Op::GEP,
                             Op::DEFINE_REG, Op::CAST,  Op::BITCAST, Op::CONTIGUOUS, Op::DETACH,
                             Op::ASSIGN,     Op::COPY};
    const Op op = ops[pick(std::size(ops))];
    auto src = op == Op::DEFINE_REG ? std::vector<UOpPtr>{} : sources(1 + pick(4));
    Arg arg;
    if (op == Op::REDUCE) arg = ReduceArg{pick(2) ? Op::ADD : Op::MUL, {}};
    if (op == Op::GEP || op == Op::DEFINE_REG) arg = static_cast<int64_t>(pick(16));
    if (op == Op::SINK && pick(2)) arg = name();
    return UOp::make(op, dtype(), std::move(src), std::move(arg));
  }
};

std::string error_of(std::string_view text) {
  try {
    parse_text_roots(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("text: the exact form of each arg kind") {
  const auto r = make_range(16, 2, AxisKind::Reduce);
  const auto n = make_var("n", 1, 16);
  CHECK(to_text(r * n) ==
        "%0 = CONST i64 [16]\n"
        "%1 = RANGE i64 %0 [axis 2 reduce]\n"
        "%2 = DEFINE_VAR i64 [var \"n\" 1 16]\n"
        "%3 = MUL i64 %1, %2\n");

  const auto buf = buffer(DType::Float32, 0, 32);
  const auto red = UOp::make(Op::REDUCE_AXIS, DType::Float32,
                             {UOp::make(Op::RESHAPE, DType::Float32, {buf}, std::vector<int64_t>{4, 8})},
                             ReduceArg{Op::ADD, {0}});
  CHECK(to_text(red) ==
        "%0 = BUFFER f32 [(0 32)]\n"
        "%1 = RESHAPE f32 %0 [(4 8)]\n"
        "%2 = REDUCE_AXIS f32 %1 [reduce ADD (0)]\n");

  const auto sink = UOp::make(Op::SINK, DType::Float32.vec(8).ptr_to(), {}, std::string("a\"b\\c\nd\x01"));
  CHECK(to_text(sink) == "%0 = SINK f32x8* [\"a\\\"b\\\\c\\nd\\x01\"]\n");
  CHECK(to_text(UOp::make(Op::SINK, DType::Int32, {}, std::vector<int64_t>{})) == "%0 = SINK i32 [()]\n");
}

TEST_CASE("text: floats print as the shortest text that reads back to the same bits") {
  CHECK(arg_text(1.5) == "1.5");
  CHECK(arg_text(1.0) == "1.0");  // never `1`, which would read back as an int64 arg
  CHECK(arg_text(int64_t{1}) == "1");
  CHECK(arg_text(-0.0) == "-0.0");
  CHECK(arg_text(0.1) == "0.1");
  CHECK(arg_text(1e300) == "1e+300");
  CHECK(arg_text(HUGE_VAL) == "inf");
  CHECK(arg_text(-HUGE_VAL) == "-inf");
  CHECK(arg_text(std::numeric_limits<double>::quiet_NaN()) == "nan");
  CHECK(arg_text(std::bit_cast<double>(uint64_t{0xfff8000000000001})) == "nan:0xfff8000000000001");
  CHECK(arg_text(std::numeric_limits<double>::denorm_min()) == "5e-324");

  for (uint64_t bits :
       {uint64_t{0x8000000000000000}, uint64_t{0x7ff8000000000000}, uint64_t{0x7ff0000000000001},
        uint64_t{0xfff0000000000000}, uint64_t{1}, uint64_t{0x000fffffffffffff}, uint64_t{0x3fb999999999999a},
        uint64_t{0x7fefffffffffffff}}) {
    const auto c = fconst(std::bit_cast<double>(bits));
    const auto back = parse_text(to_text(c));
    CHECK(back == c);
    CHECK(std::bit_cast<uint64_t>(back->get<double>()) == bits);
  }
  // -0.0 and 0.0 are different constants and stay so through the text.
  CHECK(parse_text(to_text(fconst(-0.0))) != fconst(0.0));
}

TEST_CASE("text: random graphs round-trip by pointer and re-print identically") {
  RandomGraphs gen(20261130);
  size_t multi_root_lines = 0;
  for (int g = 0; g < 400; ++g) {
    const auto pool = gen.graph(4 + gen.pick(40));
    const UOpPtr root = pool.back();
    const std::string text = to_text(root);
    CAPTURE(text);
    CHECK(parse_text(text) == root);
    CHECK(to_text(parse_text(text)) == text);

    std::vector<UOpPtr> roots;
    for (size_t k = 1 + gen.pick(4); k > 0; --k) roots.push_back(gen.any());
    const std::string many = to_text(roots);
    CAPTURE(many);
    CHECK(parse_text_roots(many) == roots);
    CHECK(to_text(parse_text_roots(many)) == many);
    multi_root_lines += many.find("\nroots ") != std::string::npos;
  }
  // Both forms of multi-root text were exercised: with and without a roots line.
  CHECK(multi_root_lines > 20);
  CHECK(multi_root_lines < 390);
}

TEST_CASE("text: numbering is structural, so a rebuilt graph prints the same") {
  auto print = [] {
    RandomGraphs gen(7);
    std::string out;
    for (int g = 0; g < 20; ++g) out += to_text(gen.graph(30).back());
    return out;
  };
  const size_t before = intern_table_size();
  const std::string first = print();
  CHECK(intern_table_size() == before);  // every node died, so the rebuild gets new addresses
  std::vector<UOpPtr> noise;             // and the allocator hands out other ones
  for (int i = 0; i < 1000; ++i) noise.push_back(const_int(DType::Int64, 1000000 + i));
  CHECK(print() == first);
}

TEST_CASE("text: roots, comments, blank lines and hand-written names") {
  const auto parsed = parse_text_roots(
      "# a comment\n"
      "\n"
      "%a = CONST i64 [4]\r\n"
      "  %x = DEFINE_VAR i64 [var \"x\" 0 9]   \n"
      "%sum = ADD i64 %x,%a\n"
      "%prod = MUL i64 %x, %a\n");
  const auto x = make_var("x", 0, 9);
  REQUIRE(parsed.size() == 2);
  CHECK(parsed[0] == x + 4);
  CHECK(parsed[1] == x * 4);

  // A root inside another root's graph, and a root given twice, need the roots line.
  const std::vector<UOpPtr> roots{x, x + 4, x};
  const std::string text = to_text(roots);
  CHECK(text.ends_with("roots %0, %2, %0\n"));
  CHECK(parse_text_roots(text) == roots);
  CHECK(to_text(std::vector<UOpPtr>{}) == "");
  CHECK(parse_text_roots("").empty());
}

TEST_CASE("text: malformed text is an error naming the line and what was expected") {
  struct Case {
    std::string text, line, expected;
  };
  const std::vector<Case> cases = {
      {"%0 = FOO i64", "line 1", "expected an op name"},
      {"%0 = CONST q32 [1]", "line 1", "expected a dtype (like f32, i64x8, f32*) after CONST"},
      {"%0 = CONST i64 [1]\n%1 = ADD i64 %0, %7", "line 2", "%7 is used before it is defined"},
      {"%0 = CONST i64 [1]\n\n%0 = CONST i64 [2]", "line 3", "%0 is defined twice"},
      {"%0 CONST i64 [1]", "line 1", "expected '=' after the node name, got 'CONST'"},
      {"%0 = CONST i64 [1", "line 1", "expected ']' closing the arg, got end of line"},
      {"%0 = CONST i64 [1] x", "line 1", "expected the end of the line after the arg, got 'x'"},
      {"%0 = CONST i64 []", "line 1", "expected an arg inside '[ ]'"},
      {"%0 = CONST f32 [1.5.2]", "line 1", "expected a float arg like 1.5"},
      {"%0 = CONST i64 [99999999999999999999]", "line 1",
       "expected an int64 arg, got '99999999999999999999'"},
      {"%0 = CONST f32 [nan:0x1234]", "line 1", "expected the bits of a NaN"},
      {"%0 = DEFINE_VAR i64 [var \"n 1 16]", "line 1", "unterminated string"},
      {"%0 = DEFINE_VAR i64 [var \"a\\q\" 1 16]", "line 1", "bad escape '\\q'"},
      {"%0 = DEFINE_VAR i64 [var \"a\\x4\" 1 16]", "line 1", "two hex digits after \\x"},
      {"%0 = DEFINE_VAR i64 [var \"n\" 1]", "line 1", "expected the variable's maximum, got ']'"},
      {"%0 = CONST i64 [16]\n%1 = RANGE i64 %0 [axis 1 sideways]", "line 2", "expected an axis kind"},
      {"%0 = REDUCE_AXIS f32 [reduce FOO (0)]", "line 1",
       "expected an op name (like ADD, MAX) after 'reduce'"},
      {"%0 = RESHAPE f32 [(4 x)]", "line 1", "expected an integer or ')' closing the list, got 'x'"},
      {"%0 = CONST i64 [16]\n%1 = RANGE i64 %0 [axis 0 loop]\n%2 = PERMUTE i64 %1 [(0)]", "line 3",
       "cannot build this PERMUTE node: PERMUTE: expected a tensor-level source with a shape, got RANGE"},
      {"%0 = BUFFER f32 [7]", "line 1", "cannot build this BUFFER node"},
      {"hello", "line 1", "expected a node line ('%3 = ADD i64 %1, %2') or a 'roots' line, got 'hello'"},
      {"% = CONST i64 [1]", "line 1", "expected a node reference like %3"},
      {"%0 = CONST i64 [1]\nroots %0\n%1 = CONST i64 [2]", "line 3", "nothing may follow the 'roots' line"},
      {"%0 = CONST i64 [1]\nroots %0 %0", "line 2", "expected ',' and another node reference"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    const std::string message = error_of(c.text);
    CHECK_MESSAGE(message.find("parse_text: " + c.line + ":") != std::string::npos, message);
    CHECK_MESSAGE(message.find(c.expected) != std::string::npos, message);
  }
  CHECK_THROWS_WITH_AS(parse_text("%0 = CONST i64 [1]\n%1 = CONST i64 [2]"),
                       "parse_text: expected a text with one root, found 2; use parse_text_roots", Error);
  CHECK_THROWS_WITH_AS(parse_text("# nothing\n"),
                       "parse_text: expected a text with one root, found 0; use parse_text_roots", Error);
  CHECK_THROWS_AS(to_text(UOpPtr{}), Error);
}

TEST_CASE("text: a chain 100,000 nodes deep prints and parses without recursion") {
  UOpPtr x = make_var("x", 0, 10);
  for (int i = 0; i < 100000; ++i) x = i % 2 ? x + 1 : x * 3;
  const std::string text = to_text(x);
  CHECK(std::count(text.begin(), text.end(), '\n') == 100000 + 3);  // + the var and the two constants
  CHECK(parse_text(text) == x);
  CHECK(to_text(parse_text(text)) == text);
}

TEST_CASE("text: the example printed in docs/ir.md") {
  // A (2 3 4) view of a buffer, permuted to (4 2 3), reshaped to (8 3); and the
  // index that reads element (r0, r1) of the result from the buffer.
  const auto view =
      UOp::make(Op::RESHAPE, DType::Float32, {buffer(DType::Float32, 1, 24)}, std::vector<int64_t>{2, 3, 4});
  const auto permuted = UOp::make(Op::PERMUTE, DType::Float32, {view}, std::vector<int64_t>{2, 0, 1});
  const auto reshaped = UOp::make(Op::RESHAPE, DType::Float32, {permuted}, std::vector<int64_t>{8, 3});
  CHECK(to_text(reshaped) ==
        "%0 = BUFFER f32 [(1 24)]\n"
        "%1 = RESHAPE f32 %0 [(2 3 4)]\n"
        "%2 = PERMUTE f32 %1 [(2 0 1)]\n"
        "%3 = RESHAPE f32 %2 [(8 3)]\n");

  const auto r0 = make_range(8, 0), r1 = make_range(3, 1);
  const auto flat = r0 * 3 + r1;
  // (4 2 3) index (flat/6, flat/3%2, flat%3); the permute reads input (i1, i2, i0).
  const auto idx = (flat / 3 % 2) * 12 + (flat % 3) * 4 + flat / 6;
  CHECK(to_text(idx) ==
        "%0 = CONST i64 [8]\n"
        "%1 = RANGE i64 %0 [axis 0 loop]\n"
        "%2 = CONST i64 [3]\n"
        "%3 = MUL i64 %1, %2\n"
        "%4 = RANGE i64 %2 [axis 1 loop]\n"
        "%5 = ADD i64 %3, %4\n"
        "%6 = IDIV i64 %5, %2\n"
        "%7 = CONST i64 [2]\n"
        "%8 = MOD i64 %6, %7\n"
        "%9 = CONST i64 [12]\n"
        "%10 = MUL i64 %8, %9\n"
        "%11 = MOD i64 %5, %2\n"
        "%12 = CONST i64 [4]\n"
        "%13 = MUL i64 %11, %12\n"
        "%14 = ADD i64 %10, %13\n"
        "%15 = CONST i64 [6]\n"
        "%16 = IDIV i64 %5, %15\n"
        "%17 = ADD i64 %14, %16\n");
  CHECK(idx->vmin() == 0);
  CHECK(idx->vmax() == 23);
}
