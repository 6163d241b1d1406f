// The reference interpreter (tests/support) against hand-derived values: it is the
// oracle every op test of the Tensor API compares with, so it is checked here
// directly against arithmetic done by hand from docs/kernel-ir.md "ALU semantics".
#include "support/error_message.hpp"
#include "support/reference_interpreter.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

using namespace loom;
using loom::ref::RefTensor;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

// The BUFFERs of one test graph and their bytes, handed to the interpreter by id.
// Ids start high so they never meet buffers other tests in this binary make.
struct Inputs {
  std::map<int64_t, std::vector<uint8_t>> bytes;
  std::vector<int64_t> requested;  // ids the interpreter asked for, in order

  template <class T>
  UOpPtr buffer(DType dt, const std::vector<T>& values) {
    REQUIRE(sizeof(T) == static_cast<size_t>(dt.itemsize()));
    const int64_t id = 7'000'000 + static_cast<int64_t>(bytes.size());
    std::vector<uint8_t>& raw = bytes[id];
    raw.resize(values.size() * sizeof(T));
    if (!raw.empty()) std::memcpy(raw.data(), values.data(), raw.size());
    return UOp::make(Op::BUFFER, dt, {}, std::vector<int64_t>{id, static_cast<int64_t>(values.size())});
  }
  // A buffer viewed as `shape`.
  template <class T>
  UOpPtr tensor(DType dt, const std::vector<T>& values, const Shape& shape) {
    return UOp::make(Op::RESHAPE, dt, {buffer(dt, values)}, shape);
  }
  RefTensor run(const UOpPtr& root, const std::map<std::string, int64_t>& vars = {}) {
    auto source = [this](const UOpPtr& b) -> const void* {
      const int64_t id = b->get<std::vector<int64_t>>().at(0);
      requested.push_back(id);
      return bytes.at(id).data();
    };
    return ref::evaluate(root, source, vars);
  }
};

UOpPtr movement(Op op, const UOpPtr& x, std::vector<int64_t> arg) {
  return UOp::make(op, x->dtype, {x}, arg);
}

// A constant of `shape` the way the front end builds one: a scalar reshaped to all ones, then expanded.
UOpPtr full(DType dt, double v, const Shape& shape) {
  const UOpPtr ones = movement(Op::RESHAPE, const_like(dt, v), Shape(shape.size(), 1));
  return movement(Op::EXPAND, ones, shape);
}

UOpPtr reduce(Op op, const UOpPtr& x, std::vector<int64_t> axes, DType dt) {
  return UOp::make(Op::REDUCE_AXIS, dt, {x}, ReduceArg{op, std::move(axes)});
}
UOpPtr reduce(Op op, const UOpPtr& x, std::vector<int64_t> axes) {
  return reduce(op, x, std::move(axes), x->dtype);
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

void check_floats(const RefTensor& t, const Shape& shape, const std::vector<double>& expected) {
  CHECK(t.shape == shape);
  REQUIRE(t.dtype.is_float());
  REQUIRE(t.f.size() == expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    INFO("element " << k << ": got " << t.f[k] << ", expected " << expected[k]);
    CHECK(same(t.f[k], expected[k]));
  }
}
void check_floats(const RefTensor& t, const std::vector<double>& expected) {
  check_floats(t, Shape{static_cast<int64_t>(expected.size())}, expected);
}

void check_ints(const RefTensor& t, const Shape& shape, const std::vector<int64_t>& expected) {
  CHECK(t.shape == shape);
  REQUIRE(!t.dtype.is_float());
  REQUIRE(t.i.size() == expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    INFO("element " << k);
    CHECK(t.i[k] == expected[k]);
  }
}
void check_ints(const RefTensor& t, const std::vector<int64_t>& expected) {
  check_ints(t, Shape{static_cast<int64_t>(expected.size())}, expected);
}

using test::error_of;
bool mentions(const std::string& message, std::initializer_list<std::string_view> words) {
  for (std::string_view w : words)
    if (message.find(w) == std::string::npos) return false;
  return true;
}

// One ALU op over buffers of dtype dt (Bool and UInt8 data as uint8_t).
template <class T>
RefTensor unary(Op op, DType dt, const std::vector<T>& a) {
  Inputs in;
  return in.run(alu(op, {in.buffer(dt, a)}));
}
template <class T>
RefTensor binary(Op op, DType dt, const std::vector<T>& a, const std::vector<T>& b) {
  Inputs in;
  return in.run(alu(op, {in.buffer(dt, a), in.buffer(dt, b)}));
}
template <class T>
RefTensor ternary(Op op, DType dt, const std::vector<T>& a, const std::vector<T>& b,
                  const std::vector<T>& c) {
  Inputs in;
  return in.run(alu(op, {in.buffer(dt, a), in.buffer(dt, b), in.buffer(dt, c)}));
}
}  // namespace

// ---- leaves ------------------------------------------------------------------------------
TEST_CASE("reference: BUFFER reads its bytes through the callback, once per evaluation") {
  Inputs in;
  const UOpPtr x = in.buffer(DType::Int32, std::vector<int32_t>{5, -7, 11});
  const UOpPtr twice = alu(Op::ADD, {x, x});
  const RefTensor t = in.run(alu(Op::MUL, {twice, x}));  // x used three times
  check_ints(t, {50, 98, 242});
  CHECK(in.requested == std::vector<int64_t>{x->get<std::vector<int64_t>>()[0]});
}

TEST_CASE("reference: BUFFER of every dtype decodes its memory layout") {
  Inputs in;
  check_ints(in.run(in.buffer(DType::Bool, std::vector<uint8_t>{0, 1, 2})), {0, 1, 1});  // nonzero is true
  check_ints(in.run(in.buffer(DType::UInt8, std::vector<uint8_t>{0, 200, 255})), {0, 200, 255});
  check_ints(in.run(in.buffer(DType::Int64, std::vector<int64_t>{kI64Min, -1})), {kI64Min, -1});
  check_floats(in.run(in.buffer(DType::Float32, std::vector<float>{0.1f, -2.5f})),
               {0.100000001490116119384765625, -2.5});
  check_floats(in.run(in.buffer(DType::Float64, std::vector<double>{0.1, kNaN})), {0.1, kNaN});
}

TEST_CASE("reference: RefTensor round-trips through its memory layout") {
  const std::vector<float> values{1.5f, -0.0f, 3e38f};
  const RefTensor t = RefTensor::from_bytes(DType::Float32, {3}, values.data());
  const std::vector<uint8_t> bytes = t.to_bytes();
  REQUIRE(bytes.size() == 12);
  CHECK(std::memcmp(bytes.data(), values.data(), 12) == 0);
  CHECK(t.at(0) == 1.5);
  CHECK(t.as_doubles() == std::vector<double>{1.5, -0.0, static_cast<double>(3e38f)});
  CHECK(mentions(error_of([&] { (void)t.as_int64s(); }), {"as_int64s", "f32"}));
}

TEST_CASE("reference: a BUFFER the callback has no data for is an error naming the buffer") {
  const UOpPtr b = UOp::make(Op::BUFFER, DType::Float32, {}, std::vector<int64_t>{7'100'000, 4});
  const std::string msg = error_of([&] { ref::evaluate(b, [](const UOpPtr&) { return nullptr; }); });
  CHECK(mentions(msg, {"BUFFER", "7100000"}));
}

TEST_CASE("reference: CONST is a scalar rounded to its dtype, made tensor-shaped by RESHAPE and EXPAND") {
  Inputs in;
  const RefTensor scalar = in.run(const_float(DType::Float32, 0.1));
  check_floats(scalar, {}, {0.100000001490116119384765625});
  check_floats(in.run(full(DType::Float64, -2.5, {2, 3})), {2, 3}, std::vector<double>(6, -2.5));
  check_ints(in.run(full(DType::Bool, 1, {2})), {1, 1});
  check_ints(in.run(UOp::make(Op::CONST, DType::UInt8, {}, int64_t{300})), {}, {44});  // wraps like a cast
}

TEST_CASE("reference: DEFINE_VAR takes its value from the map") {
  Inputs in;
  const UOpPtr n = make_var("n", 1, 10);
  const UOpPtr x = in.buffer(DType::Int64, std::vector<int64_t>{1, 2, 3});
  const UOpPtr n3 = movement(Op::EXPAND, movement(Op::RESHAPE, n, {1}), {3});
  check_ints(in.run(alu(Op::ADD, {x, n3}), {{"n", 7}}), {8, 9, 10});
  check_ints(in.run(alu(Op::MUL, {n, n}), {{"n", 10}}), {}, {100});
  CHECK(mentions(error_of([&] { in.run(n); }), {"DEFINE_VAR", "'n'"}));
  CHECK(mentions(error_of([&] { in.run(n, {{"n", 11}}); }), {"DEFINE_VAR", "11", "[1, 10]"}));
}

// ---- movement ------------------------------------------------------------------------------
TEST_CASE("reference: PERMUTE then RESHAPE reads the permuted order row-major") {
  Inputs in;
  const UOpPtr x = in.tensor(DType::Int32, std::vector<int32_t>{0, 1, 2, 3, 4, 5}, {2, 3});
  const UOpPtr xt = movement(Op::PERMUTE, x, {1, 0});  // [[0,3],[1,4],[2,5]]
  check_ints(in.run(xt), {3, 2}, {0, 3, 1, 4, 2, 5});
  check_ints(in.run(movement(Op::RESHAPE, xt, {2, 3})), {2, 3}, {0, 3, 1, 4, 2, 5});
  check_ints(in.run(movement(Op::RESHAPE, xt, {6})), {6}, {0, 3, 1, 4, 2, 5});
}

TEST_CASE("reference: PERMUTE of rank 3: out[a][b][c] = in[b][c][a]") {
  Inputs in;
  std::vector<float> values(24);
  for (int k = 0; k < 24; ++k) values[k] = static_cast<float>(k);
  const RefTensor t = in.run(movement(Op::PERMUTE, in.tensor(DType::Float32, values, {2, 3, 4}), {2, 0, 1}));
  REQUIRE(t.shape == Shape{4, 2, 3});
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c) CHECK(t.f[(a * 2 + b) * 3 + c] == b * 12 + c * 4 + a);
  CHECK(t.f[1] == 4);    // out[0][0][1] = in[0][1][0]
  CHECK(t.f[6] == 1);    // out[1][0][0] = in[0][0][1]
  CHECK(t.f[23] == 23);  // the last element stays last
}

TEST_CASE("reference: EXPAND repeats axes of size 1") {
  Inputs in;
  const UOpPtr col = in.tensor(DType::Int64, std::vector<int64_t>{1, 2}, {2, 1});
  check_ints(in.run(movement(Op::EXPAND, col, {2, 3})), {2, 3}, {1, 1, 1, 2, 2, 2});
  const UOpPtr row = in.tensor(DType::Int64, std::vector<int64_t>{1, 2, 3}, {1, 3});
  check_ints(in.run(movement(Op::EXPAND, row, {2, 3})), {2, 3}, {1, 2, 3, 1, 2, 3});
}

TEST_CASE("reference: PAD surrounds with zeros of the dtype and SHRINK cuts it back") {
  Inputs in;
  const UOpPtr v = in.buffer(DType::Float32, std::vector<float>{1, 2, 3});
  const UOpPtr padded = movement(Op::PAD, v, {1, 2});
  check_floats(in.run(padded), {0, 1, 2, 3, 0, 0});
  check_floats(in.run(movement(Op::SHRINK, padded, {1, 4})), {1, 2, 3});
  check_floats(in.run(movement(Op::SHRINK, padded, {3, 5})), {3, 0});

  const UOpPtr m = in.tensor(DType::Int32, std::vector<int32_t>{1, 2, 3, 4}, {2, 2});
  const UOpPtr m_padded = movement(Op::PAD, m, {1, 0, 0, 1});
  check_ints(in.run(m_padded), {3, 3}, {0, 0, 0, 1, 2, 0, 3, 4, 0});
  check_ints(in.run(movement(Op::SHRINK, m_padded, {1, 3, 0, 2})), {2, 2}, {1, 2, 3, 4});

  const UOpPtr flags = in.buffer(DType::Bool, std::vector<uint8_t>{1});
  check_ints(in.run(movement(Op::PAD, flags, {1, 1})), {0, 1, 0});  // Bool pads with false
}

TEST_CASE("reference: SHRINK takes a half-open window per axis") {
  Inputs in;
  std::vector<int32_t> values(12);
  for (int k = 0; k < 12; ++k) values[k] = k;
  const UOpPtr x = in.tensor(DType::Int32, values, {3, 4});
  check_ints(in.run(movement(Op::SHRINK, x, {1, 3, 1, 3})), {2, 2}, {5, 6, 9, 10});
  check_ints(in.run(movement(Op::SHRINK, x, {0, 3, 2, 2})), {3, 0}, {});
}

TEST_CASE("reference: FLIP of an EXPAND reverses the listed axes only") {
  Inputs in;
  const UOpPtr row = in.tensor(DType::Int32, std::vector<int32_t>{1, 2, 3}, {1, 3});
  const UOpPtr grid = movement(Op::EXPAND, row, {2, 3});
  check_ints(in.run(movement(Op::FLIP, grid, {0, 1})), {2, 3}, {3, 2, 1, 3, 2, 1});
  check_ints(in.run(movement(Op::FLIP, grid, {0})), {2, 3}, {1, 2, 3, 1, 2, 3});
  const UOpPtr col = in.tensor(DType::Int32, std::vector<int32_t>{1, 2}, {2, 1});
  check_ints(in.run(movement(Op::FLIP, movement(Op::EXPAND, col, {2, 2}), {0})), {2, 2}, {2, 2, 1, 1});
}

TEST_CASE("reference: ill-formed movement args are errors naming the op and shape") {
  Inputs in;
  const UOpPtr x = in.tensor(DType::Float32, std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(mentions(error_of([&] {
                   in.run(movement(Op::RESHAPE, x, {4, 2}));
                 }),
                 {"RESHAPE", "[2, 3]", "[4, 2]"}));
  CHECK(mentions(error_of([&] { in.run(movement(Op::EXPAND, x, {2, 6})); }), {"EXPAND", "[2, 3]"}));
  CHECK(mentions(error_of([&] { in.run(movement(Op::PERMUTE, x, {0, 0})); }), {"PERMUTE", "permutation"}));
  CHECK(mentions(error_of([&] { in.run(movement(Op::PAD, x, {0, 0, -1, 0})); }), {"PAD", "non-negative"}));
  CHECK(mentions(error_of([&] { in.run(movement(Op::SHRINK, x, {0, 2, 1, 4})); }), {"SHRINK", "[2, 3]"}));
  CHECK(mentions(error_of([&] { in.run(movement(Op::FLIP, x, {1, 1})); }), {"FLIP", "distinct"}));
}

// ---- reduce ------------------------------------------------------------------------------
TEST_CASE("reference: REDUCE_AXIS over axis subsets keeps reduced axes as size 1") {
  Inputs in;
  const UOpPtr x = in.tensor(DType::Float32, std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  check_floats(in.run(reduce(Op::ADD, x, {0})), {1, 3}, {5, 7, 9});
  check_floats(in.run(reduce(Op::ADD, x, {1})), {2, 1}, {6, 15});
  check_floats(in.run(reduce(Op::ADD, x, {0, 1})), {1, 1}, {21});
  check_floats(in.run(reduce(Op::ADD, x, {})), {2, 3}, {1, 2, 3, 4, 5, 6});
  check_floats(in.run(reduce(Op::MUL, x, {1})), {2, 1}, {6, 120});
  check_floats(in.run(reduce(Op::MAX, x, {0})), {1, 3}, {4, 5, 6});

  std::vector<int32_t> cube(8);
  for (int k = 0; k < 8; ++k) cube[k] = k;  // cube[a][b][c] = 4a + 2b + c
  const UOpPtr c = in.tensor(DType::Int32, cube, {2, 2, 2});
  check_ints(in.run(reduce(Op::ADD, c, {0, 2})), {1, 2, 1}, {0 + 1 + 4 + 5, 2 + 3 + 6 + 7});
  check_ints(in.run(reduce(Op::MAX, c, {1})), {2, 1, 2}, {2, 3, 6, 7});
}

TEST_CASE("reference: MAX reduce propagates NaN and starts from -inf") {
  Inputs in;
  const UOpPtr x =
      in.tensor(DType::Float32, std::vector<float>{1, NAN, 3, -INFINITY, -INFINITY, -INFINITY}, {2, 3});
  check_floats(in.run(reduce(Op::MAX, x, {1})), {2, 1}, {kNaN, -kInf});
  check_floats(in.run(reduce(Op::MAX, x, {0})), {1, 3}, {1, kNaN, 3});
}

TEST_CASE("reference: reduces accumulate in the node's dtype, in index order") {
  Inputs in;
  // Float32: 1e8 + 1 rounds back to 1e8 (the spacing there is 8), so the sum is 1, not 2.
  const UOpPtr f = in.buffer(DType::Float32, std::vector<float>{1e8f, 1, -1e8f, 1});
  check_floats(in.run(reduce(Op::ADD, f, {0})), {1}, {1});
  const UOpPtr i32 = in.buffer(DType::Int32, std::vector<int32_t>{2147483647, 1});
  check_ints(in.run(reduce(Op::ADD, i32, {0})), {1}, {kI32Min});
  check_ints(in.run(reduce(Op::MUL, i32, {0})), {1}, {kI32Max});
  const UOpPtr u8 = in.buffer(DType::UInt8, std::vector<uint8_t>{200, 100, 3});
  check_ints(in.run(reduce(Op::ADD, u8, {0})), {1}, {47});   // 303 wraps to 47
  check_ints(in.run(reduce(Op::MAX, u8, {0})), {1}, {200});  // unsigned
  // A Bool source summed into an Int32 node counts the trues.
  const UOpPtr flags = in.buffer(DType::Bool, std::vector<uint8_t>{1, 1, 0, 1});
  check_ints(in.run(reduce(Op::ADD, flags, {0}, DType::Int32)), {1}, {3});
}

TEST_CASE("reference: reducing an empty axis gives the identity") {
  Inputs in;
  const UOpPtr f = in.tensor(DType::Float32, std::vector<float>{}, {0, 2});
  check_floats(in.run(reduce(Op::ADD, f, {0})), {1, 2}, {0, 0});
  check_floats(in.run(reduce(Op::MUL, f, {0})), {1, 2}, {1, 1});
  check_floats(in.run(reduce(Op::MAX, f, {0})), {1, 2}, {-kInf, -kInf});
  const UOpPtr i = in.tensor(DType::Int32, std::vector<int32_t>{}, {2, 0});
  check_ints(in.run(reduce(Op::MAX, i, {1})), {2, 1}, {kI32Min, kI32Min});
  const UOpPtr u = in.tensor(DType::UInt8, std::vector<uint8_t>{}, {0});
  check_ints(in.run(reduce(Op::MAX, u, {0})), {1}, {0});
}

TEST_CASE("reference: a reduce of a few million elements") {
  Inputs in;
  const UOpPtr ones = full(DType::Float32, 1, {2048, 1024});
  const RefTensor rows = in.run(reduce(Op::ADD, ones, {1}));
  check_floats(rows, {2048, 1}, std::vector<double>(2048, 1024));
  const RefTensor all = in.run(reduce(Op::ADD, ones, {0, 1}));
  check_floats(all, {1, 1}, {2097152});  // 2^21: every partial sum is exact in float
}

TEST_CASE("reference: bad REDUCE_AXIS args are errors") {
  Inputs in;
  const UOpPtr x = in.tensor(DType::Float32, std::vector<float>{1, 2}, {1, 2});
  CHECK(mentions(error_of([&] { in.run(reduce(Op::SUB, x, {0})); }), {"REDUCE_AXIS", "SUB"}));
  CHECK(mentions(error_of([&] { in.run(reduce(Op::ADD, x, {1, 1})); }), {"REDUCE_AXIS", "distinct"}));
}

// ---- ALU: floats -------------------------------------------------------------------------
TEST_CASE("reference: Float32 arithmetic rounds to float after every op") {
  check_floats(
      binary(Op::ADD, DType::Float32, std::vector<float>{0.1f, 16777216.0f}, std::vector<float>{0.2f, 1.0f}),
      {0.300000011920928955078125, 16777216});
  check_floats(binary(Op::SUB, DType::Float32, std::vector<float>{1.0f}, std::vector<float>{1e-8f}), {1});
  check_floats(binary(Op::MUL, DType::Float32, std::vector<float>{3e38f}, std::vector<float>{10}), {kInf});
  check_floats(
      binary(Op::FDIV, DType::Float32, std::vector<float>{1, -1, 0, 1}, std::vector<float>{0, 0, 0, 3}),
      {kInf, -kInf, kNaN, 0.3333333432674407958984375});
  // MULACC is unfused: (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 rounds (to even) to 1 + 2^-11 before the add.
  const float a = 1.0f + 0x1p-12f;
  check_floats(ternary(Op::MULACC, DType::Float32, std::vector<float>{a, 2}, std::vector<float>{a, 3},
                       std::vector<float>{-(1.0f + 0x1p-11f), 1}),
               {0, 7});
}

TEST_CASE("reference: Float64 arithmetic is IEEE double") {
  check_floats(binary(Op::ADD, DType::Float64, std::vector<double>{0.1}, std::vector<double>{0.2}),
               {0.30000000000000004});
  check_floats(binary(Op::POW, DType::Float64, std::vector<double>{2, -8, 0, 9},
                      std::vector<double>{10, 1.0 / 3, 0, 0.5}),
               {1024, kNaN, 1, 3});
  check_floats(ternary(Op::MULACC, DType::Float64, std::vector<double>{2}, std::vector<double>{3},
                       std::vector<double>{0.5}),
               {6.5});
}

TEST_CASE("reference: float unary ops, with their IEEE edge values") {
  const auto f32 = DType::Float32;
  const RefTensor neg = unary(Op::NEG, f32, std::vector<float>{0, 8, -2.75f});
  check_floats(neg, {-0.0, -8, 2.75});
  CHECK(std::signbit(neg.f[0]));
  check_floats(unary(Op::EXP2, f32, std::vector<float>{0, 3, -1, 10, -INFINITY, INFINITY, NAN}),
               {1, 8, 0.5, 1024, 0, kInf, kNaN});
  check_floats(unary(Op::EXP, f32, std::vector<float>{0, -INFINITY, INFINITY, NAN}), {1, 0, kInf, kNaN});
  check_floats(unary(Op::LOG2, f32, std::vector<float>{1, 8, 0.5f, 0, -1, INFINITY}),
               {0, 3, -1, -kInf, kNaN, kInf});
  check_floats(unary(Op::SQRT, f32, std::vector<float>{4, 2, -1, 0, INFINITY}),
               {2, 1.41421353816986083984375, kNaN, 0, kInf});  // sqrt is correctly rounded
  check_floats(unary(Op::RECIP, f32, std::vector<float>{4, 0, -0.0f, 3}),
               {0.25, kInf, -kInf, 0.3333333432674407958984375});
  const RefTensor trunc = unary(Op::TRUNC, f32, std::vector<float>{-2.75f, 2.75f, -0.5f, INFINITY, NAN});
  check_floats(trunc, {-2, 2, -0.0, kInf, kNaN});
  CHECK(std::signbit(trunc.f[2]));
  check_floats(unary(Op::SIN, f32, std::vector<float>{0, INFINITY}), {0, kNaN});
  check_floats(unary(Op::COS, f32, std::vector<float>{0, -INFINITY}), {1, kNaN});
  // tanh(0.5) = 0.46211715726000975850...; the nearest float is 0.4621171653270721435546875.
  const RefTensor tanh = unary(Op::TANH, f32, std::vector<float>{0.5f, -0.0f, INFINITY, -INFINITY, NAN});
  check_floats(tanh, {0.4621171653270721435546875, -0.0, 1, -1, kNaN});
  CHECK(std::signbit(tanh.f[1]));
  // 1 / (1 + e^-x) rounded once: sigmoid(1) = 0.73105857863000487925...; e^-100 is a float
  // subnormal, not 0.
  check_floats(unary(Op::SIGMOID, f32, std::vector<float>{1, 0, -100, INFINITY, -INFINITY, NAN}),
               {0.731058597564697265625, 0.5, 3.78350585367700609149406987488e-44, 1, 0, kNaN});
  // libm's erf rounded to float: erf(1) = 0.84270079294971486934...
  const RefTensor erf = unary(Op::ERF, f32, std::vector<float>{1, -2, 0.25f, -0.0f, INFINITY, NAN});
  check_floats(erf, {0.842700779438018798828125, -0.995322287082672119140625, 0.2763263881206512451171875,
                     -0.0, 1, kNaN});
  CHECK(std::signbit(erf.f[3]));
}

TEST_CASE("reference: float transcendentals round to their dtype") {
  // sin(1) = 0.84147098480789650665...; the nearest float is 0.8414709568023682, 2^-25 away at most.
  const double sin1_f32 = unary(Op::SIN, DType::Float32, std::vector<float>{1}).f[0];
  CHECK(static_cast<double>(static_cast<float>(sin1_f32)) == sin1_f32);
  CHECK(std::abs(sin1_f32 - 0.8414709848078965) < 0x1p-25);
  const double sin1_f64 = unary(Op::SIN, DType::Float64, std::vector<double>{1}).f[0];
  CHECK(std::abs(sin1_f64 - 0.8414709848078965) <= 0x1p-53);
  CHECK(sin1_f64 != sin1_f32);  // computed in double, not in float
  const double root2 = unary(Op::EXP2, DType::Float64, std::vector<double>{0.5}).f[0];
  CHECK(std::abs(root2 - 1.4142135623730951) <= 0x1p-52);
}

TEST_CASE("reference: float MAX propagates NaN and orders -0 below +0") {
  const RefTensor m = binary(Op::MAX, DType::Float32, std::vector<float>{NAN, 1, -0.0f, 0, 1, -INFINITY},
                             std::vector<float>{1, NAN, 0, -0.0f, 2, -5});
  check_floats(m, {kNaN, kNaN, 0, 0, 2, -5});
  CHECK(!std::signbit(m.f[2]));
  CHECK(!std::signbit(m.f[3]));
  check_floats(binary(Op::MAX, DType::Float64, std::vector<double>{kNaN, -1}, std::vector<double>{kInf, -2}),
               {kNaN, -1});
}

TEST_CASE("reference: float comparisons are ordered except CMPNE, and give Bool") {
  const std::vector<float> a{1, 2, NAN, 1, NAN, -0.0f};
  const std::vector<float> b{2, 1, 1, 1, NAN, 0};
  const RefTensor lt = binary(Op::CMPLT, DType::Float32, a, b);
  CHECK(lt.dtype == DType::Bool);
  check_ints(lt, {1, 0, 0, 0, 0, 0});
  check_ints(binary(Op::CMPEQ, DType::Float32, a, b), {0, 0, 0, 1, 0, 1});
  check_ints(binary(Op::CMPNE, DType::Float32, a, b), {1, 1, 1, 0, 1, 0});
  check_ints(
      binary(Op::CMPLT, DType::Float64, std::vector<double>{-kInf, kNaN}, std::vector<double>{kInf, kInf}),
      {1, 0});
}

TEST_CASE("reference: WHERE selects by a Bool condition") {
  Inputs in;
  const UOpPtr c = in.buffer(DType::Bool, std::vector<uint8_t>{1, 0, 1});
  const UOpPtr a = in.buffer(DType::Float32, std::vector<float>{1, 2, NAN});
  const UOpPtr b = in.buffer(DType::Float32, std::vector<float>{-1, -2, -3});
  check_floats(in.run(alu(Op::WHERE, {c, a, b})), {1, -2, kNaN});
  const UOpPtr i = in.buffer(DType::Int64, std::vector<int64_t>{kI64Min, 5, 6});
  const UOpPtr j = in.buffer(DType::Int64, std::vector<int64_t>{0, kI64Max, 0});
  check_ints(in.run(alu(Op::WHERE, {c, i, j})), {kI64Min, kI64Max, 6});
}

// ---- ALU: integers -----------------------------------------------------------------------
TEST_CASE("reference: Int32 arithmetic wraps at 32 bits") {
  const auto i32 = DType::Int32;
  check_ints(binary(Op::ADD, i32, std::vector<int32_t>{2147483647, -5}, std::vector<int32_t>{1, 3}),
             {kI32Min, -2});
  check_ints(binary(Op::SUB, i32, std::vector<int32_t>{-2147483647 - 1, 3}, std::vector<int32_t>{1, 5}),
             {kI32Max, -2});
  check_ints(
      binary(Op::MUL, i32, std::vector<int32_t>{65536, 46341, -3}, std::vector<int32_t>{65536, 46341, 7}),
      {0, -2147479015, -21});  // 46341^2 = 2147488281 = 2^32 - 2147479015
  check_ints(unary(Op::NEG, i32, std::vector<int32_t>{-2147483647 - 1, 5}), {kI32Min, -5});
  check_ints(ternary(Op::MULACC, i32, std::vector<int32_t>{65536, 3}, std::vector<int32_t>{65536, -4},
                     std::vector<int32_t>{5, 2}),
             {5, -10});
  check_ints(binary(Op::MAX, i32, std::vector<int32_t>{-5, 7}, std::vector<int32_t>{3, -8}), {3, 7});
}

TEST_CASE("reference: IDIV and MOD truncate toward zero; by zero give 0; INT_MIN / -1 wraps") {
  const auto i32 = DType::Int32;
  const std::vector<int32_t> a{7, -7, 7, -7, 7, -2147483647 - 1, 0};
  const std::vector<int32_t> b{2, 2, -2, -2, 0, -1, 5};
  check_ints(binary(Op::IDIV, i32, a, b), {3, -3, -3, 3, 0, kI32Min, 0});
  check_ints(binary(Op::MOD, i32, a, b), {1, -1, 1, -1, 0, 0, 0});
  const auto i64 = DType::Int64;
  const std::vector<int64_t> c{kI64Min, kI64Min, -9, 9};
  const std::vector<int64_t> d{-1, 0, 4, -4};
  check_ints(binary(Op::IDIV, i64, c, d), {kI64Min, 0, -2, -2});
  check_ints(binary(Op::MOD, i64, c, d), {0, 0, -1, 1});
}

TEST_CASE("reference: Int64 arithmetic wraps at 64 bits") {
  const auto i64 = DType::Int64;
  check_ints(binary(Op::ADD, i64, std::vector<int64_t>{kI64Max}, std::vector<int64_t>{1}), {kI64Min});
  // 3037000500^2 = 9223372037000250000 = 2^64 - 9223372036709301616
  check_ints(binary(Op::MUL, i64, std::vector<int64_t>{int64_t{1} << 32, 3037000500},
                    std::vector<int64_t>{int64_t{1} << 32, 3037000500}),
             {0, -9223372036709301616});
  check_ints(unary(Op::NEG, i64, std::vector<int64_t>{kI64Min}), {kI64Min});
}

TEST_CASE("reference: bitwise ops and shifts; a count outside [0, bits) gives 0 (SHR of a negative: -1)") {
  const auto i32 = DType::Int32;
  check_ints(binary(Op::AND, i32, std::vector<int32_t>{12, -1}, std::vector<int32_t>{10, 5}), {8, 5});
  check_ints(binary(Op::OR, i32, std::vector<int32_t>{12, -8}, std::vector<int32_t>{10, 3}), {14, -5});
  check_ints(binary(Op::XOR, i32, std::vector<int32_t>{12, -1}, std::vector<int32_t>{10, 5}), {6, -6});
  check_ints(
      binary(Op::SHL, i32, std::vector<int32_t>{1, 1, 1, 3, 5}, std::vector<int32_t>{31, 32, -1, 30, 2}),
      {kI32Min, 0, 0, -1073741824, 20});  // 3 << 30 = 3221225472 = 2^32 - 1073741824
  check_ints(binary(Op::SHR, i32, std::vector<int32_t>{-8, -8, 8, 8, -1, -8},
                    std::vector<int32_t>{1, 32, 32, 3, 31, -1}),
             {-4, -1, 0, 1, -1, -1});
  const auto i64 = DType::Int64;
  check_ints(binary(Op::SHL, i64, std::vector<int64_t>{1, 1, 3}, std::vector<int64_t>{63, 64, 62}),
             {kI64Min, 0, kI64Min + (int64_t{1} << 62)});  // 3 << 62 = 2^63 + 2^62 wraps
  check_ints(binary(Op::SHR, i64, std::vector<int64_t>{kI64Min, -1, 5, kI64Max},
                    std::vector<int64_t>{63, 64, 64, 62}),
             {-1, -1, 0, 1});
}

TEST_CASE("reference: UInt8 is unsigned and wraps at 8 bits") {
  const auto u8 = DType::UInt8;
  check_ints(binary(Op::ADD, u8, std::vector<uint8_t>{200}, std::vector<uint8_t>{100}), {44});
  check_ints(binary(Op::SUB, u8, std::vector<uint8_t>{3}, std::vector<uint8_t>{5}), {254});
  check_ints(binary(Op::MUL, u8, std::vector<uint8_t>{16, 15}, std::vector<uint8_t>{16, 17}), {0, 255});
  check_ints(unary(Op::NEG, u8, std::vector<uint8_t>{1, 0}), {255, 0});
  check_ints(binary(Op::IDIV, u8, std::vector<uint8_t>{200, 200}, std::vector<uint8_t>{7, 0}), {28, 0});
  check_ints(binary(Op::MOD, u8, std::vector<uint8_t>{200, 200}, std::vector<uint8_t>{7, 0}), {4, 0});
  check_ints(binary(Op::MAX, u8, std::vector<uint8_t>{200, 3}, std::vector<uint8_t>{3, 200}), {200, 200});
  check_ints(binary(Op::CMPLT, u8, std::vector<uint8_t>{200, 3}, std::vector<uint8_t>{3, 200}), {0, 1});
  check_ints(binary(Op::SHL, u8, std::vector<uint8_t>{200, 1}, std::vector<uint8_t>{1, 8}), {144, 0});
  check_ints(binary(Op::SHR, u8, std::vector<uint8_t>{200, 200}, std::vector<uint8_t>{1, 8}),
             {100, 0});  // logical
  check_ints(binary(Op::XOR, u8, std::vector<uint8_t>{0xF0}, std::vector<uint8_t>{0xFF}), {0x0F});
  check_ints(
      ternary(Op::MULACC, u8, std::vector<uint8_t>{16}, std::vector<uint8_t>{16}, std::vector<uint8_t>{7}),
      {7});
}

TEST_CASE("reference: Bool logic, comparisons and MAX") {
  const auto b = DType::Bool;
  const std::vector<uint8_t> x{0, 0, 1, 1}, y{0, 1, 0, 1};
  check_ints(binary(Op::AND, b, x, y), {0, 0, 0, 1});
  check_ints(binary(Op::OR, b, x, y), {0, 1, 1, 1});
  check_ints(binary(Op::XOR, b, x, y), {0, 1, 1, 0});
  check_ints(binary(Op::MAX, b, x, y), {0, 1, 1, 1});
  check_ints(binary(Op::CMPLT, b, x, y), {0, 1, 0, 0});
  check_ints(binary(Op::CMPEQ, b, x, y), {1, 0, 0, 1});
  check_ints(binary(Op::CMPNE, b, x, y), {0, 1, 1, 0});
  check_ints(
      binary(Op::CMPEQ, DType::Int64, std::vector<int64_t>{kI64Min, 3}, std::vector<int64_t>{kI64Min, 4}),
      {1, 0});
  check_ints(binary(Op::CMPLT, DType::Int32, std::vector<int32_t>{-1, 5}, std::vector<int32_t>{0, 5}),
             {1, 0});
}

TEST_CASE("reference: ops a dtype does not support, and mismatched operands, are errors") {
  CHECK(mentions(error_of([] { unary(Op::EXP2, DType::Int32, std::vector<int32_t>{1}); }),
                 {"EXP2", "i32", "float"}));
  CHECK(mentions(
      error_of([] { binary(Op::FDIV, DType::Int64, std::vector<int64_t>{1}, std::vector<int64_t>{1}); }),
      {"FDIV", "i64"}));
  CHECK(mentions(
      error_of([] { binary(Op::IDIV, DType::Float32, std::vector<float>{1}, std::vector<float>{1}); }),
      {"IDIV", "f32", "integer"}));
  CHECK(mentions(
      error_of([] { binary(Op::SHL, DType::Float64, std::vector<double>{1}, std::vector<double>{1}); }),
      {"SHL", "f64"}));
  Inputs in;
  const UOpPtr f = in.buffer(DType::Float32, std::vector<float>{1, 2});
  const UOpPtr i = in.buffer(DType::Int32, std::vector<int32_t>{1, 2});
  const UOpPtr f3 = in.buffer(DType::Float32, std::vector<float>{1, 2, 3});
  CHECK(mentions(error_of([&] {
                   in.run(UOp::make(Op::ADD, DType::Float32, {f, i}));
                 }),
                 {"ADD", "f32", "i32"}));
  CHECK(mentions(error_of([&] {
                   in.run(UOp::make(Op::ADD, DType::Float32, {f, f3}));
                 }),
                 {"ADD", "[2]", "[3]"}));
  CHECK(mentions(error_of([&] {
                   in.run(UOp::make(Op::WHERE, DType::Float32, {i, f, f}));
                 }),
                 {"WHERE", "bool"}));
}

// ---- casts ---------------------------------------------------------------------------------
namespace {
// Each source dtype's test values, and for every target dtype the values the
// contract gives them: floats truncate and saturate (NaN -> 0), narrower ints
// wrap, anything to Bool is != 0, Int64 -> Float32 rounds once.
struct CastCase {
  DType from, to;
  std::vector<double> expected_f;
  std::vector<int64_t> expected_i;
};

UOpPtr cast_sources(Inputs& in, DType dt) {
  const int64_t big = (int64_t{1} << 62) + (int64_t{1} << 38) + 1;
  switch (dt.scalar) {
    case Scalar::Bool: return in.buffer(dt, std::vector<uint8_t>{0, 1});
    case Scalar::UInt8: return in.buffer(dt, std::vector<uint8_t>{0, 1, 128, 255});
    case Scalar::Int32:
      return in.buffer(dt, std::vector<int32_t>{0, -1, 256, 257, -2147483647 - 1, 2147483647});
    case Scalar::Int64:
      return in.buffer(dt,
                       std::vector<int64_t>{0, -1, (int64_t{1} << 32) + 5, int64_t{1} << 31, kI64Min, big});
    case Scalar::Float32:
      return in.buffer(
          dt, std::vector<float>{0, -0.0f, 3.75f, -3.75f, 300.5f, NAN, INFINITY, -INFINITY, 1e10f, -1e10f});
    case Scalar::Float64:
      return in.buffer(dt, std::vector<double>{0, 3.75, -3.75, 0.1, kNaN, 1e300, -1e300, 0x1p63, -0x1p63,
                                               2147483647.9, 1e-50});
  }
  return nullptr;
}

std::vector<CastCase> cast_table() {
  const auto b = DType::Bool, u8 = DType::UInt8, i32 = DType::Int32, i64 = DType::Int64;
  const auto f32 = DType::Float32, f64 = DType::Float64;
  const double f32_big = 4611686568183201792.0;  // 2^62 + 2^39: 2^62 + 2^38 + 1 is past the halfway point
  const double f64_big = 4611686293305294848.0;  // 2^62 + 2^38: the + 1 is below double's spacing
  const double f32_tenth = 0.100000001490116119384765625;
  return {
      {b, b, {}, {0, 1}},
      {b, u8, {}, {0, 1}},
      {b, i32, {}, {0, 1}},
      {b, i64, {}, {0, 1}},
      {b, f32, {0, 1}, {}},
      {b, f64, {0, 1}, {}},

      {u8, b, {}, {0, 1, 1, 1}},
      {u8, u8, {}, {0, 1, 128, 255}},
      {u8, i32, {}, {0, 1, 128, 255}},
      {u8, i64, {}, {0, 1, 128, 255}},
      {u8, f32, {0, 1, 128, 255}, {}},
      {u8, f64, {0, 1, 128, 255}, {}},

      {i32, b, {}, {0, 1, 1, 1, 1, 1}},
      {i32, u8, {}, {0, 255, 0, 1, 0, 255}},
      {i32, i32, {}, {0, -1, 256, 257, kI32Min, kI32Max}},
      {i32, i64, {}, {0, -1, 256, 257, kI32Min, kI32Max}},
      {i32, f32, {0, -1, 256, 257, -2147483648.0, 2147483648.0}, {}},
      {i32, f64, {0, -1, 256, 257, -2147483648.0, 2147483647.0}, {}},

      {i64, b, {}, {0, 1, 1, 1, 1, 1}},
      {i64, u8, {}, {0, 255, 5, 0, 0, 1}},
      {i64, i32, {}, {0, -1, 5, kI32Min, 0, 1}},
      {i64,
       i64,
       {},
       {0, -1, (int64_t{1} << 32) + 5, int64_t{1} << 31, kI64Min,
        (int64_t{1} << 62) + (int64_t{1} << 38) + 1}},
      {i64, f32, {0, -1, 4294967296.0, 2147483648.0, -0x1p63, f32_big}, {}},
      {i64, f64, {0, -1, 4294967301.0, 2147483648.0, -0x1p63, f64_big}, {}},

      {f32, b, {}, {0, 0, 1, 1, 1, 1, 1, 1, 1, 1}},
      {f32, u8, {}, {0, 0, 3, 0, 255, 0, 255, 0, 255, 0}},
      {f32, i32, {}, {0, 0, 3, -3, 300, 0, kI32Max, kI32Min, kI32Max, kI32Min}},
      {f32, i64, {}, {0, 0, 3, -3, 300, 0, kI64Max, kI64Min, 10'000'000'000, -10'000'000'000}},
      {f32, f32, {0, -0.0, 3.75, -3.75, 300.5, kNaN, kInf, -kInf, 1e10, -1e10}, {}},
      {f32, f64, {0, -0.0, 3.75, -3.75, 300.5, kNaN, kInf, -kInf, 1e10, -1e10}, {}},

      {f64, b, {}, {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
      {f64, u8, {}, {0, 3, 0, 0, 0, 255, 0, 255, 0, 255, 0}},
      {f64, i32, {}, {0, 3, -3, 0, 0, kI32Max, kI32Min, kI32Max, kI32Min, kI32Max, 0}},
      {f64, i64, {}, {0, 3, -3, 0, 0, kI64Max, kI64Min, kI64Max, kI64Min, 2147483647, 0}},
      {f64, f32, {0, 3.75, -3.75, f32_tenth, kNaN, kInf, -kInf, 0x1p63, -0x1p63, 2147483648.0, 0}, {}},
      {f64, f64, {0, 3.75, -3.75, 0.1, kNaN, 1e300, -1e300, 0x1p63, -0x1p63, 2147483647.9, 1e-50}, {}},
  };
}
}  // namespace

TEST_CASE("reference: CAST between every pair of dtypes") {
  const std::vector<CastCase> table = cast_table();
  CHECK(table.size() == 36);
  for (const CastCase& c : table) {
    INFO("CAST " << to_string(c.from) << " -> " << to_string(c.to));
    Inputs in;
    const RefTensor t = in.run(cast(cast_sources(in, c.from), c.to));
    CHECK(t.dtype == c.to);
    if (c.to.is_float())
      check_floats(t, c.expected_f);
    else
      check_ints(t, c.expected_i);
  }
}

TEST_CASE("reference: BITCAST reinterprets bits between same-size types") {
  Inputs in;
  const UOpPtr f = in.buffer(DType::Float32, std::vector<float>{1.0f, -0.0f});
  check_ints(in.run(UOp::make(Op::BITCAST, DType::Int32, {f})), {0x3F800000, kI32Min});
  const UOpPtr i = in.buffer(DType::Int64, std::vector<int64_t>{0x3FF0000000000000, kI64Min});
  const RefTensor d = in.run(UOp::make(Op::BITCAST, DType::Float64, {i}));
  check_floats(d, {1.0, -0.0});
  CHECK(std::signbit(d.f[1]));
  const UOpPtr nan_bits = in.buffer(DType::Int32, std::vector<int32_t>{-1});
  check_floats(in.run(UOp::make(Op::BITCAST, DType::Float32, {nan_bits})), {kNaN});
  CHECK(mentions(error_of([&] { in.run(UOp::make(Op::BITCAST, DType::Int64, {f})); }),
                 {"BITCAST", "f32", "i64"}));
  const UOpPtr u = in.buffer(DType::UInt8, std::vector<uint8_t>{1});
  CHECK(mentions(error_of([&] { in.run(UOp::make(Op::BITCAST, DType::Bool, {u})); }), {"BITCAST", "u8"}));
}

// ---- pass-through ops, traversal, errors ------------------------------------------------------
TEST_CASE("reference: CONTIGUOUS, DETACH and COPY are identities; ASSIGN gives its value") {
  Inputs in;
  const UOpPtr x = in.tensor(DType::Float32, std::vector<float>{1, 2, 3, 4}, {2, 2});
  const UOpPtr xt = movement(Op::PERMUTE, x, {1, 0});
  for (Op op : {Op::CONTIGUOUS, Op::DETACH, Op::COPY})
    check_floats(in.run(UOp::make(op, DType::Float32, {xt})), {2, 2}, {1, 3, 2, 4});
  // The target is only written: its contents are never asked for.
  const UOpPtr target = UOp::make(Op::BUFFER, DType::Float32, {}, std::vector<int64_t>{7'200'000, 4});
  const UOpPtr target2d = movement(Op::RESHAPE, target, {2, 2});
  in.requested.clear();
  check_floats(in.run(UOp::make(Op::ASSIGN, DType::Float32, {target2d, xt})), {2, 2}, {1, 3, 2, 4});
  CHECK(in.requested == std::vector<int64_t>{x->src[0]->get<std::vector<int64_t>>()[0]});
}

TEST_CASE("reference: kernel-level ops are errors naming the op") {
  Inputs in;
  CHECK(mentions(error_of([&] { in.run(make_range(4, 0)); }), {"RANGE", "kernel-level"}));
  const UOpPtr sink = UOp::make(Op::SINK, DType::Float32, {const_float(DType::Float32, 1)});
  CHECK(mentions(error_of([&] { in.run(sink); }), {"SINK", "kernel-level"}));
}

TEST_CASE("reference: a chain deeper than any call stack evaluates without recursion") {
  Inputs in;
  const UOpPtr one = const_int(DType::Int64, 1);
  UOpPtr x = const_int(DType::Int64, 0);
  for (int k = 0; k < 200'000; ++k) x = alu(Op::ADD, {x, one});
  check_ints(in.run(x), {}, {200'000});
}

TEST_CASE("reference: shared subexpressions evaluate once and stay correct") {
  Inputs in;
  UOpPtr x = in.buffer(DType::Int64, std::vector<int64_t>{1, -1});
  for (int k = 0; k < 62; ++k) x = alu(Op::ADD, {x, x});  // a diamond per step: 2^62 paths, 63 nodes
  check_ints(in.run(x), {int64_t{1} << 62, -(int64_t{1} << 62)});
  CHECK(in.requested.size() == 1);
}
