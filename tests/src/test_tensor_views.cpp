// Views that write through (src/tensor_views.hpp): an assign into a reshape,
// permute, slice or shrink of a tensor changes the tensor, and every other view
// of it follows, as PyTorch's views share storage. Copies (pad, flip, clone) do not.
#include "check.hpp"

#include <loom/debug.hpp>
#include <loom/optim.hpp>
#include <loom/variable.hpp>

using namespace loom;
using test::buffer_address;
using test::check_values;
using test::make;

TEST_CASE("an assign into a slice writes those rows of the tensor, realized or not") {
  Tensor lazy = Tensor::zeros({3, 4});
  lazy.slice(0, 1, 2).assign(Tensor::ones({1, 4}));
  check_values(lazy, {0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0});

  Tensor realized = make(DType::Float32, {1, 2, 3, 4, 5, 6}, {2, 3});
  const void* memory = buffer_address(realized);
  realized.slice(1, 1, 3).assign(make(DType::Float32, {-2, -3, -5, -6}, {2, 2}));
  realized.realize();
  CHECK(buffer_address(realized) == memory);  // in place: the kernel reads each element it writes
  check_values(realized * 1, {1, -2, -3, 4, -5, -6});
}

TEST_CASE("a stepped slice of a transpose writes the columns it names") {
  Tensor y = make(DType::Float32, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  Tensor t = y.transpose(0, 1);  // [4, 3]: rows 0 and 2 of t are columns 0 and 2 of y
  t.slice(0, 0, 4, 2).assign(Tensor::full({2, 3}, -1));
  check_values(y * 1, {-1, 1, -1, 3, -1, 5, -1, 7, -1, 9, -1, 11});
  check_values(t * 1, {-1, -1, -1, 1, 5, 9, -1, -1, -1, 3, 7, 11});
}

TEST_CASE("every view of a tensor follows a write through any one of them") {
  Tensor a = Tensor::zeros({6});
  Tensor rows = a.reshape({2, 3});
  Tensor tail = a.slice(0, 3, 6);
  Tensor column = rows.permute({1, 0}).slice(1, 1, 2).squeeze(1);  // a[3], a[4], a[5]
  tail.realize();                                                  // a realized view follows too
  rows.slice(0, 1, 2).assign(Tensor::full({1, 3}, 5));
  check_values(a * 1, {0, 0, 0, 5, 5, 5});
  check_values(tail * 1, {5, 5, 5});
  column.assign(make(DType::Float32, {7, 8, 9}, {3}));
  check_values(a * 1, {0, 0, 0, 7, 8, 9});
  check_values(rows * 1, {0, 0, 0, 7, 8, 9});
  check_values(tail * 1, {7, 8, 9});
  a.assign(Tensor::ones({6}));  // the base's own assign reaches its views
  check_values(tail * 1, {1, 1, 1});
  check_values(column * 1, {1, 1, 1});
}

TEST_CASE("copies are not views: pad, flip, clone and contiguous leave their source alone") {
  Tensor x = make(DType::Float32, {1, 2, 3}, {3});
  Tensor padded = x.pad({{1, 0}});
  Tensor flipped = x.flip(0);
  Tensor cloned = x.clone();
  Tensor copied = x.contiguous();
  padded.assign(Tensor::zeros({4}));
  flipped.assign(Tensor::zeros({3}));
  cloned.assign(Tensor::zeros({3}));
  copied.assign(Tensor::zeros({3}));
  check_values(x * 1, {1, 2, 3});
}

TEST_CASE("a write through an expanded view is an error naming the shapes") {
  Tensor x = Tensor::zeros({1, 3});
  Tensor wide = x.expand({2, 3});
  CHECK_THROWS_WITH_AS(
      wide.assign(Tensor::ones({2, 3})),
      doctest::Contains("assign: cannot write into a view of shape [2, 3] that expands shape [1, 3]"), Error);
  Tensor same = x.expand({1, 3});  // no axis broadcast: a plain view
  same.assign(Tensor::ones({1, 3}));
  check_values(x * 1, {1, 1, 1});
}

TEST_CASE("gradients flow through a write into a view: to the value inside it, to the base outside") {
  Tensor x = make(DType::Float32, {1, 2, 3, 4}, {4}).requires_grad_();
  Tensor z = make(DType::Float32, {10, 20}, {2}).requires_grad_();
  Tensor weights = make(DType::Float32, {1, 10, 100, 1000}, {4});
  Tensor y = x * 2;
  y.slice(0, 1, 3).assign(z);  // y = [2, 10, 20, 8]
  check_values(y * 1, {2, 10, 20, 8});
  (y * weights).sum().backward();
  check_values(x.grad(), {2, 0, 0, 2000});
  check_values(z.grad(), {10, 100});
}

TEST_CASE("a KV cache appended through a slice at a bound position compiles nothing after its first tokens") {
  const Variable position("P", 0, 7);
  Tensor cache = Tensor::zeros({2, 8, 3}).realize();
  const void* memory = buffer_address(cache);
  uint64_t compiled_after_two = 0;
  for (int p = 0; p < 8; ++p) {
    if (p == 2) compiled_after_two = counters().kernels_compiled;
    const Dim at = position.bind(p);
    Tensor row = make(DType::Float32, std::vector<double>(6, p + 1), {2, 1, 3});
    cache.slice(1, at, at + 1).assign(row);
    // Tokens so far: 1 + 2 + ... + (p + 1) in each of the 2 x 3 columns.
    const float sum = static_cast<float>((p + 1) * (p + 2) / 2);
    check_values(cache.slice(1, 0, at + 1).sum({1}), std::vector<double>(6, sum));
  }
  CHECK(counters().kernels_compiled == compiled_after_two);
  CHECK(buffer_address(cache) == memory);
}

TEST_CASE("a realized view follows a base that a Capture replay updates in place") {
  Tensor w = make(DType::Float32, {1, 2, 3, 4}, {2, 2});
  Tensor wt = w.transpose();
  Capture step([&](const std::vector<Tensor>& in) {
    w.assign(w + in[0]);
    return std::vector<Tensor>{w.sum()};
  });
  for (int i = 0; i < 2; ++i) step({Tensor::ones({2, 2})});  // recorded, then replayed
  wt.realize();  // a buffer of its own, which the next replay's write in place leaves behind
  const auto replays = counters().capture_replays;
  step({Tensor::ones({2, 2})});
  CHECK(counters().capture_replays - replays == 1);
  check_values(w * 1, {4, 5, 6, 7});
  check_values(wt * 1, {4, 6, 5, 7});
}

TEST_CASE("a view of a parameter kept across optimizer steps trains as one made every step") {
  const auto train = [](bool kept) {
    Tensor w = make(DType::Float32, {0.5, -1, 0.25, 2, -0.75, 1}, {3, 2}).requires_grad_();
    const Tensor x = make(DType::Float32, {1, 2, -1, 0.5, 0, 3, 2, -2}, {4, 2});
    const Tensor wt = w.transpose();  // held by the model, as a tied or pre-transposed weight
    optim::SGD opt({w}, 0.1);
    for (int step = 0; step < 4; ++step) {
      opt.zero_grad();
      const Tensor loss = x.matmul(kept ? wt : w.transpose()).tanh().square().mean();
      loss.backward();  // the kept view reads the weight the last step wrote, and differentiates to it
      opt.step();
    }
    return w.to_vector<float>();
  };
  CHECK(train(true) == train(false));
}
