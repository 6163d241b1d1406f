// Which assigns write in place: never where a tensor or graph that outlives the
// realize can still read the old value; always where only kernels of the same
// schedule read it (they run first).
#include "check.hpp"

#include "schedule/schedule.hpp"

using namespace loom;
using test::buffer_address;
using test::check_values;
using test::make;

TEST_CASE("a lazy tensor built from the old value keeps it, through any depth of graph") {
  Tensor a = make(DType::Float32, {1, 2, 3}, {3});
  Tensor y = a * 2;
  Tensor z = y + 1;  // holds y's node, which reads a's buffer
  const void* before = buffer_address(a);
  a.assign(y + 3);
  a.realize();
  CHECK(buffer_address(a) != before);  // copy on write: z still needs the old data
  check_values(a * 1, {5, 7, 9});
  check_values(z, {3, 5, 7});
}

TEST_CASE("a tensor built after the assign sees the new value, applied once") {
  Tensor a = make(DType::Float32, {1, 2, 3}, {3});
  a.assign(a + 10);
  Tensor n = a * 2;  // reads the assign itself
  a.realize();
  check_values(a * 1, {11, 12, 13});
  check_values(n, {22, 24, 26});
  check_values(a * 1, {11, 12, 13});
}

TEST_CASE("a view follows its base's assign; a lazy reader of the old value keeps it") {
  Tensor w = make(DType::Float32, {1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor flat = w.reshape({6});  // a view, as in PyTorch: it sees w's new value
  Tensor old = w * 1;            // a graph reading w's buffer: it keeps the old value
  REQUIRE(buffer_address(flat) == buffer_address(w));
  w.assign(w + 1);
  w.realize();
  check_values(flat * 1, {2, 3, 4, 5, 6, 7});
  check_values(old, {1, 2, 3, 4, 5, 6});
  check_values(w * 1, {2, 3, 4, 5, 6, 7});
}

TEST_CASE("a live view does not stop an assign from writing in place") {
  Tensor w = make(DType::Float32, {1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = w.transpose();
  const void* before = buffer_address(w);
  w.assign(w * 2);
  w.realize();
  CHECK(buffer_address(w) == before);
  check_values(t * 1, {2, 8, 4, 10, 6, 12});
}

TEST_CASE("a gradient-descent step writes in place while another kernel of its schedule reads the weights") {
  // h = x @ w is a kernel of its own (a reduce that is broadcast again); the
  // update w - 0.25 * x^T @ h reads w and h. The read of w in h's kernel is
  // ordered before the write, so nothing is copied.
  Tensor x = make(DType::Float32, {1, 0, 0, 1, 1, 1}, {3, 2});
  Tensor w = make(DType::Float32, {1, 2, 3, 4}, {2, 2});
  const void* before = buffer_address(w);
  const auto runs = counters().kernels_executed;
  {
    Tensor h = x.matmul(w);
    w.assign(w - x.transpose().matmul(h) * 0.25f);
  }
  w.realize();
  CHECK(counters().kernels_executed - runs == 2);
  CHECK(buffer_address(w) == before);
  // h = [[1,2],[3,4],[4,6]]; x^T h = [[5,8],[7,10]]; w - 0.25 * that:
  check_values(w * 1, {-0.25, 0, 1.25, 1.5});
}

TEST_CASE("assigns realized together, where one reads the other's old value, stay right") {
  Tensor a = make(DType::Float32, {1, 2}, {2}), b = make(DType::Float32, {10, 20}, {2});
  const void* a_before = buffer_address(a);
  a.assign(a - b);
  b.assign(b + a * 0 + 1);  // reads the new a: ordered after a's write
  loom::realize({a, b});
  CHECK(buffer_address(a) == a_before);
  check_values(a * 1, {-9, -18});
  check_values(b * 1, {11, 21});
}

TEST_CASE("a sum of the old weights realized with their assign runs first; the write stays in place") {
  Tensor w = make(DType::Float32, {1, 2, 3, 4}, {4});
  const void* before = buffer_address(w);
  Tensor total = w.sum();
  w.assign(w * 10);
  loom::realize({w, total});  // the write's kernel comes first in the graph
  CHECK(buffer_address(w) == before);
  check_values(total * 1, {10});
  check_values(w * 1, {10, 20, 30, 40});
}

TEST_CASE("an assign reached through another tensor's graph is realized into its own tensor, in place") {
  Tensor cache = make(DType::Float32, {1, 2, 3}, {3});
  const void* before = buffer_address(cache);
  for (int step = 1; step <= 3; ++step) {
    cache.assign(cache + 1);
    Tensor y = cache * 2;  // only y is asked for
    check_values(y, {2.0 + 2 * step, 4.0 + 2 * step, 6.0 + 2 * step});
    REQUIRE(is_buffer_view(cache.node()->uop));  // the assign happened: no graph left to grow
    CHECK(buffer_address(cache) == before);
  }
  check_values(cache * 1, {4, 5, 6});
}

TEST_CASE("an assign whose tensor is gone is computed like any other node") {
  Tensor y;
  {
    Tensor scratch = make(DType::Float32, {1, 2}, {2});  // assigned, read, then dropped
    scratch.assign(scratch * 10);
    y = scratch + 1;
  }
  check_values(y, {11, 21});
}
