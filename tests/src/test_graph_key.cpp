// The schedule cache's key: structure with buffers by position, never by id.
#include "check.hpp"

#include "src/graph_key.hpp"

using namespace loom;
using detail::sign_graph;
using test::iota;
using test::make;

namespace {
detail::GraphKey key_of(const std::vector<Tensor>& targets) {
  std::vector<UOpPtr> roots;
  for (const auto& t : targets) roots.push_back(t.node()->uop);
  return sign_graph(roots).key;
}
Tensor f32(int64_t n, double shift = 0) { return make(DType::Float32, iota(n, 1, shift), {n}); }
}  // namespace

TEST_CASE("one computation over new buffers of the same shapes has one key") {
  Tensor a = f32(8), b = f32(8, 3), c = f32(8, 5), d = f32(8, 7);
  CHECK(key_of({(a * b).exp()}) == key_of({(c * d).exp()}));
  CHECK(key_of({(a * b).exp(), a + 1}) == key_of({(c * d).exp(), c + 1}));
}

TEST_CASE("the key tells apart shapes, dtypes, constants, ops, aliasing and target order") {
  Tensor a = f32(8), b = f32(8, 3), c = f32(8, 5);
  const auto base = key_of({a * b});
  CHECK(base != key_of({f32(9) * f32(9)}));                                              // sizes
  CHECK(base != key_of({a.reshape({2, 4}) * b.reshape({2, 4})}));                        // shapes
  CHECK(base != key_of({make(DType::Float64, iota(8), {8}) * b.cast(DType::Float64)}));  // dtypes
  CHECK(base != key_of({a + b}));                                                        // ops
  CHECK(base != key_of({a * a}));                   // one buffer twice is not two buffers
  CHECK(key_of({a * c}) == base);                   // but which two buffers does not matter
  CHECK(key_of({a * 2.0f}) != key_of({a * 3.0f}));  // constants are structure
  CHECK(key_of({a + 1, a * 2}) != key_of({a * 2, a + 1}));
  CHECK(key_of({a + 1}) != key_of({a + 1, a + 1}));
}

TEST_CASE("inputs are numbered in order of first appearance; position_of finds them") {
  Tensor a = f32(4), b = f32(4, 1), c = f32(4, 2);
  const UOpPtr y = ((b + a) * c + b).node()->uop;
  const auto sig = sign_graph({y});
  REQUIRE(sig.inputs() == 3);
  CHECK(sig.buffer(0) == b.node()->uop);
  CHECK(sig.buffer(1) == a.node()->uop);
  CHECK(sig.buffer(2) == c.node()->uop);
  CHECK(sig.position_of(c.node()->uop.get()) == 2);
  CHECK(sig.position_of(y.get()) == -1);
}
