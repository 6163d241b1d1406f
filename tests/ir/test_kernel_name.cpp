#include "ir/kernel_name.hpp"

#include "support/kernel_builders.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

using namespace loom;
using namespace loom::kb;

namespace {
const DType f32 = DType::Float32;

// out[i*m + j] = c over an n x m grid.
UOpPtr fill(int64_t n, int64_t m, double c = 1.0) {
  auto i = make_range(n, 0), j = make_range(m, 1);
  return sink({end(store(index(global(0, f32), i * m + j), const_float(f32, c)), {i, j})});
}

// out[i] = sum over k of in[i*k_size + k]: output range n, reduce range k_size.
UOpPtr row_sum(int64_t n, int64_t k_size) {
  auto i = make_range(n, 0), k = make_range(k_size, 1, AxisKind::Reduce);
  auto value = reduce(Op::ADD, load(index(global(1, f32), i * k_size + k)), {k});
  return sink({end(store(index(global(0, f32), i), value), {i})});
}
}  // namespace

TEST_CASE("a kernel's name is its kind and its range sizes, reduce ranges last") {
  CHECK(kernel_name(fill(4096, 16)) == "E_4096_16");
  CHECK(kernel_name(row_sum(1024, 64)) == "r_1024_64");
  // The reduce range has the lower id here, yet its size is still listed after the output's.
  auto k = make_range(64, 0, AxisKind::Reduce), i = make_range(8, 1);
  auto value = reduce(Op::MAX, load(index(global(1, f32), i * 64 + k)), {k});
  CHECK(kernel_name(sink({end(store(index(global(0, f32), i), value), {i})})) == "r_8_64");
}

TEST_CASE("a scalar kernel is E_1; a full reduce lists only its reduce range") {
  CHECK(kernel_name(sink({store(index(global(0, f32), i64(0)), const_float(f32, 2.0))})) == "E_1");
  auto k = make_range(1000, 0, AxisKind::Reduce);
  auto total = reduce(Op::ADD, load(index(global(1, f32), k)), {k});
  CHECK(kernel_name(sink({store(index(global(0, f32), i64(0)), total)})) == "r_1000");
}

TEST_CASE("a symbolic size prints as its variable's name") {
  auto n = make_var("n", 1, 64);
  auto i = UOp::make(Op::RANGE, DType::Int64, {n}, AxisArg{0, AxisKind::Loop});
  CHECK(kernel_name(sink({end(store(index(global(0, f32), i), const_float(f32, 0.0)), {i})})) == "E_n");
}

TEST_CASE("the name is the same for equal kernels built twice, and a null kernel is an error") {
  CHECK(kernel_name(fill(8, 8, 3.0)) == kernel_name(fill(8, 8, 3.0)));
  CHECK_THROWS_AS(kernel_name(nullptr), Error);
}

TEST_CASE("within one schedule, kernels sharing a name get hash suffixes; the order never matters") {
  const UOpPtr a = fill(64, 64, 1.0), b = fill(64, 64, 2.0), c = row_sum(64, 64);
  const std::vector<std::string> names = kernel_names({a, b, c, a});
  REQUIRE(names.size() == 4);
  CHECK(names[2] == "r_64_64");  // alone with its name: no suffix
  CHECK(names[0] == names[3]);   // the same kernel twice: one name
  CHECK(names[0] != names[1]);
  for (const std::string& n : {names[0], names[1]}) {
    CHECK(n.rfind("E_64_64_h", 0) == 0);
    CHECK(n.size() >= std::string("E_64_64_h").size() + 4);
  }
  CHECK(names[0].substr(9, 4) == fmt::format("{:016x}", a->hash()).substr(0, 4));
  const std::vector<std::string> reversed = kernel_names({c, b, a});
  CHECK(reversed[1] == names[1]);
  CHECK(reversed[2] == names[0]);
  // The same kernel in a schedule where it is alone with its name has no suffix.
  CHECK(kernel_names({a, c})[0] == "E_64_64");
}
