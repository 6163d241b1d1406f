// UOp interning, arg equality, structural hashing, derived shapes, toposort,
// and the memory behaviour of the intern table (threads, churn, deep chains).
#include "ir/uop.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <latch>
#include <limits>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>

using namespace loom;

namespace {
UOpPtr buffer(DType dt, int64_t id, int64_t size) {
  return UOp::make(Op::BUFFER, dt, {}, std::vector<int64_t>{id, size});
}
UOpPtr movement(Op op, const UOpPtr& x, std::vector<int64_t> arg) {
  return UOp::make(op, x->dtype, {x}, std::move(arg));
}
UOpPtr fconst(double v) { return UOp::make(Op::CONST, DType::Float32, {}, v); }

// Graph number `i` of a family of distinct graphs that mix every arg kind.
UOpPtr family_graph(int i) {
  const auto r = make_range(16 + i % 5, i % 3, static_cast<AxisKind>(i % 5));
  const auto v = make_var("v" + std::to_string(i % 7), 0, i);
  const auto idx = (r * (i + 1) + v) % 7;
  const auto buf = movement(Op::RESHAPE, buffer(DType::Float32, i, 24), {2, 3, 4});
  const auto red = UOp::make(Op::REDUCE_AXIS, DType::Float32, {buf}, ReduceArg{Op::MAX, {i % 3}});
  const auto scaled = red * fconst(0.5 + i);
  return UOp::make(Op::SINK, DType::Float32, {idx, scaled}, std::string("graph ") + std::to_string(i));
}
}  // namespace

TEST_CASE("uop: two builds of the same graph are one object") {
  auto build = [] {
    auto r = make_range(16, 0);
    return (r * 4 + const_int(DType::Int64, 3)) % 7;
  };
  auto a = build(), b = build();
  CHECK(a == b);
  CHECK(a->hash() == b->hash());
  CHECK(a->vmin() == 0);
  CHECK(a->vmax() == 6);
}

TEST_CASE("uop: hash-consing holds for every arg kind, and a different arg is a different node") {
  struct Pair {
    const char* kind;
    std::function<UOpPtr()> same, other;
  };
  const auto x = make_var("x", 0, 9);
  const auto buf = buffer(DType::Float32, 0, 32);
  const std::vector<Pair> pairs = {
      {"none", [&] { return x + x; }, [&] { return x * x; }},
      {"int64", [] { return const_int(DType::Int64, 5); }, [] { return const_int(DType::Int64, 6); }},
      {"double", [] { return fconst(1.5); }, [] { return fconst(2.5); }},
      {"int list",
       [&] {
         return movement(Op::RESHAPE, buf, {4, 8});
       },
       [&] {
         return movement(Op::RESHAPE, buf, {8, 4});
       }},
      {"string", [] { return UOp::make(Op::SINK, DType::Int64, {}, std::string("k")); },
       [] { return UOp::make(Op::SINK, DType::Int64, {}, std::string("j")); }},
      {"axis", [] { return make_range(8, 0, AxisKind::Loop); },
       [] { return make_range(8, 0, AxisKind::Reduce); }},
      {"var", [] { return make_var("n", 1, 16); }, [] { return make_var("n", 1, 17); }},
      {"reduce",
       [&] {
         return UOp::make(Op::REDUCE_AXIS, DType::Float32, {buf}, ReduceArg{Op::ADD, {0}});
       },
       [&] {
         return UOp::make(Op::REDUCE_AXIS, DType::Float32, {buf}, ReduceArg{Op::MAX, {0}});
       }},
  };
  for (const auto& p : pairs) {
    CAPTURE(p.kind);
    const auto a = p.same();
    CHECK(a == p.same());
    CHECK(a != p.other());
    CHECK(a->hash() != p.other()->hash());
  }
  // The arg's kind must fit the dtype: a float constant holds a double.
  CHECK_THROWS_WITH_AS(UOp::make(Op::CONST, DType::Float32, {}, int64_t{1}),
                       "UOp::make: CONST f32: a float constant holds a double", Error);
  // The dtype and the order of the sources count.
  CHECK(UOp::make(Op::CONST, DType::Int32, {}, int64_t{1}) != const_int(DType::Int64, 1));
  const auto c = const_int(DType::Int64, 2);
  CHECK(x - c != c - x);
}

TEST_CASE("uop: float args compare bitwise") {
  CHECK(fconst(-0.0) != fconst(0.0));
  CHECK(fconst(-0.0) == fconst(-0.0));
  CHECK_FALSE(arg_equal(Arg{-0.0}, Arg{0.0}));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(fconst(nan) == fconst(nan));  // a NaN constant is itself, unlike NaN == NaN
  CHECK(arg_equal(Arg{nan}, Arg{nan}));
  CHECK(arg_hash(Arg{nan}) == arg_hash(Arg{nan}));
  const double payload = std::bit_cast<double>(uint64_t{0x7ff8000000000001});
  CHECK(fconst(payload) != fconst(nan));
  CHECK(fconst(-nan) != fconst(nan));
  // const_float rounds to the dtype first, so 0.1 as f32 is the float nearest 0.1.
  CHECK(const_float(DType::Float32, 0.1)->get<double>() == static_cast<double>(0.1f));
  CHECK(const_float(DType::Float32, 0.1) == fconst(static_cast<double>(0.1f)));
}

TEST_CASE("uop: the structural hash does not depend on addresses") {
  const size_t before = intern_table_size();
  std::vector<uint64_t> first;
  for (int i = 0; i < 20; ++i) first.push_back(family_graph(i)->hash());
  CHECK(intern_table_size() == before);  // all dropped: the rebuild below makes new objects
  std::vector<UOpPtr> noise;             // at other addresses
  for (int i = 0; i < 500; ++i) noise.push_back(const_int(DType::Int32, i));
  for (int i = 0; i < 20; ++i) CHECK(family_graph(i)->hash() == first[i]);
  std::unordered_set<uint64_t> distinct(first.begin(), first.end());
  CHECK(distinct.size() == first.size());
}

TEST_CASE("uop: shapes are derived for every tensor-level op") {
  const auto buf = buffer(DType::Float32, 3, 24);
  const auto x = movement(Op::RESHAPE, buf, {2, 3, 4});
  const auto cond = UOp::make(Op::CAST, DType::Bool, {x});
  auto shape = [](const UOpPtr& u) { return u->shape().value(); };
  CHECK(shape(buf) == Shape{24});
  CHECK(shape(fconst(1.0)) == Shape{});
  CHECK(shape(make_var("n", 1, 4)) == Shape{});
  CHECK(shape(UOp::make(Op::IOTA, DType::Int32, {}, std::vector<int64_t>{5})) == Shape{5});
  CHECK(shape(x) == Shape{2, 3, 4});
  CHECK(shape(movement(Op::PERMUTE, x, {2, 0, 1})) == Shape{4, 2, 3});
  CHECK(shape(movement(Op::EXPAND, movement(Op::RESHAPE, buf, {2, 1, 12}), {2, 5, 12})) == Shape{2, 5, 12});
  CHECK(shape(movement(Op::PAD, x, {1, 0, 0, 2, 3, 3})) == Shape{3, 5, 10});
  CHECK(shape(movement(Op::SHRINK, x, {0, 1, 1, 3, 0, 4})) == Shape{1, 2, 4});
  CHECK(shape(movement(Op::FLIP, x, {0, 2})) == Shape{2, 3, 4});
  CHECK(shape(UOp::make(Op::REDUCE_AXIS, DType::Float32, {x}, ReduceArg{Op::ADD, {0, 2}})) == Shape{1, 3, 1});
  for (Op op : {Op::NEG, Op::EXP, Op::EXP2, Op::LOG2, Op::SIN, Op::SQRT, Op::RECIP, Op::TRUNC})
    CHECK(shape(alu(op, {x})) == Shape{2, 3, 4});
  CHECK(shape(x + x) == Shape{2, 3, 4});
  CHECK(shape(x < x) == Shape{2, 3, 4});
  CHECK(shape(where(cond, x, x)) == Shape{2, 3, 4});
  CHECK(shape(alu(Op::MULACC, {x, x, x})) == Shape{2, 3, 4});
  CHECK(shape(cond) == Shape{2, 3, 4});
  CHECK(shape(UOp::make(Op::BITCAST, DType::Int32, {x})) == Shape{2, 3, 4});
  for (Op op : {Op::CONTIGUOUS, Op::DETACH, Op::COPY})
    CHECK(shape(UOp::make(op, DType::Float32, {x})) == Shape{2, 3, 4});
  CHECK(shape(UOp::make(Op::ASSIGN, DType::Float32, {x, x})) == Shape{2, 3, 4});

  // Kernel-level nodes carry no shape, and neither does index math over them.
  const auto r = make_range(8, 0);
  CHECK_FALSE(r->shape());
  CHECK_FALSE((r * 4 + 1)->shape());
  CHECK_FALSE(UOp::make(Op::DEFINE_GLOBAL, DType::Float32.ptr_to(), {}, int64_t{0})->shape());
  // A movement op over a shapeless node is an error, not undefined behaviour.
  CHECK_THROWS_WITH_AS(movement(Op::PERMUTE, r, {0}),
                       "PERMUTE: expected a tensor-level source with a shape, got RANGE (no shape)", Error);
  CHECK_THROWS_AS(UOp::make(Op::REDUCE_AXIS, DType::Int64, {r}, ReduceArg{Op::ADD, {0}}), Error);
}

TEST_CASE("uop: toposort puts sources before users, each node once") {
  const auto r = make_range(16, 0);
  const auto four = const_int(DType::Int64, 4), three = const_int(DType::Int64, 3);
  const auto mul = r * four, root = mul + three;
  CHECK(toposort(root) == std::vector<UOpPtr>{r->src[0], r, four, mul, three, root});

  // A random DAG with heavy sharing.
  std::mt19937_64 rng(42);
  std::vector<UOpPtr> pool{make_var("a", 0, 3), make_var("b", -2, 2)};
  for (int i = 0; i < 2000; ++i) {
    const auto& p = pool[pool.size() - 1 - rng() % std::min<size_t>(pool.size(), 8)];
    const auto& q = pool[rng() % pool.size()];
    pool.push_back(rng() % 3 == 0 ? p * q : rng() % 2 ? p + q : umax(p, q + static_cast<int64_t>(i)));
  }
  const std::vector<UOpPtr> roots{pool.back(), pool[pool.size() / 2], pool.back()};
  const auto order = toposort(roots);
  std::unordered_map<const UOp*, size_t> pos;
  for (size_t i = 0; i < order.size(); ++i) CHECK(pos.emplace(order[i].get(), i).second);  // each once
  for (size_t i = 0; i < order.size(); ++i)
    for (const auto& s : order[i]->src) CHECK(pos.at(s.get()) < i);
  // Exactly the nodes reachable from the roots, found here by a separate walk.
  std::unordered_set<const UOp*> reachable;
  std::vector<const UOp*> work{roots[0].get(), roots[1].get()};
  while (!work.empty()) {
    const UOp* n = work.back();
    work.pop_back();
    if (reachable.insert(n).second)
      for (const auto& s : n->src) work.push_back(s.get());
  }
  CHECK(reachable.size() == order.size());
  CHECK(toposort(roots) == order);  // deterministic
  CHECK(reaches(pool.back(), pool[0]));
  CHECK_FALSE(reaches(pool[0], pool.back()));
}

TEST_CASE("uop: threads building the same graphs at once get the same objects") {
  constexpr int kThreads = 8, kGraphs = 300;
  const size_t before = intern_table_size();
  {
    std::vector<std::vector<UOpPtr>> built(kThreads);
    std::latch start(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        auto& mine = built[t];
        mine.resize(kGraphs);
        start.arrive_and_wait();
        for (int k = 0; k < kGraphs; ++k) {
          const int i = t % 2 ? kGraphs - 1 - k : k;  // half the threads go backwards
          mine[i] = family_graph(i);
          family_graph(i + kGraphs);  // built and dropped at once: nodes die while others look them up
        }
      });
    for (auto& th : threads) th.join();
    for (int i = 0; i < kGraphs; ++i) {
      const auto expected = family_graph(i);
      for (int t = 0; t < kThreads; ++t) CHECK(built[t][i] == expected);
    }
  }
  CHECK(intern_table_size() == before);
}

TEST_CASE("uop: a million nodes built and dropped leave the intern table as it was") {
  const auto r = make_range(16, 0);
  const size_t before = intern_table_size();
  {
    std::vector<UOpPtr> keep;
    keep.reserve(500000);
    for (int64_t i = 0; i < 500000; ++i) keep.push_back(r + const_int(DType::Int64, 1000000 + i));
    CHECK(intern_table_size() == before + 1000000);  // 500,000 constants and 500,000 sums
  }
  CHECK(intern_table_size() == before);
}

TEST_CASE("uop: a chain 100,000 nodes deep toposorts and dies without recursion") {
  const size_t before = intern_table_size();
  {
    const auto x = make_var("x", 0, 10);
    UOpPtr chain = x;
    for (int i = 0; i < 100000; ++i) chain = i % 2 ? chain + 1 : -chain;
    const auto order = toposort(chain);
    REQUIRE(order.size() == 100000 + 2);  // the chain, x and the constant 1
    CHECK(order.front() == x);
    CHECK(order.back() == chain);
    // x in [0, 10]; -x, +1, -, +1 gives [-10, 0], [-9, 1], [-1, 9], [0, 10]: back after 4 steps.
    CHECK(chain->vmin() == 0);
    CHECK(chain->vmax() == 10);
  }
  CHECK(intern_table_size() == before);
}

TEST_CASE("a malformed node is a loom::Error naming the op, not a standard-library exception") {
  UOpPtr x = make_range(4, 0);
  CHECK_THROWS_WITH_AS(UOp::make(Op::PERMUTE, DType::Float32, {x}, std::vector<int64_t>{0}),
                       doctest::Contains("PERMUTE"), Error);
  CHECK_THROWS_WITH_AS(UOp::make(Op::DEFINE_VAR, DType::Int64, {}, int64_t{3}),
                       doctest::Contains("DEFINE_VAR"), Error);
  CHECK_THROWS_WITH_AS(UOp::make(Op::RANGE, DType::Int64, {}, AxisArg{0, AxisKind::Loop}),
                       doctest::Contains("RANGE"), Error);
  // Codegen lowers only Float32's TANH, SIGMOID and ERF; the front end builds other floats'
  // from EXP.
  const UOpPtr d = UOp::make(Op::CONST, DType::Float64, {}, 0.5),
               f = UOp::make(Op::CONST, DType::Float32, {}, 0.5);
  for (Op op : {Op::TANH, Op::SIGMOID, Op::ERF}) {
    const std::string name(op_name(op));
    CHECK_THROWS_WITH_AS(UOp::make(op, DType::Float64, {d}),
                         ("UOp::make: " + name + " f64: " + name + " of f64, expected float32").c_str(),
                         Error);
    CHECK(UOp::make(op, DType::Float32, {f})->op == op);
  }
}
