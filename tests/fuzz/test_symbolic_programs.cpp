// The kernel checker over variables (docs/fuzzing.md, "The kernel checker"): a pass is
// checked at the variables' bounds, at 1 and at the middle, and the programs over bound
// variables that the generator cannot write (graph files hold numbers) run under it.
#include "fuzz/fuzz.hpp"
#include "fuzz/kernel_checker.hpp"
#include "src/schedule_cache.hpp"
#include "support/kernel_builders.hpp"
#include "support/memory_use.hpp"

#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <functional>

using namespace loom;
using namespace loom::kb;

TEST_CASE("kernel checker: a pass wrong at one binding of a variable only is caught at that binding") {
  // out[i] = a[i] for i < n; the "rewritten" kernel adds 1 when n < 2: right for every n but 1.
  const auto f32 = DType::Float32;
  const UOpPtr n = make_var("n", 1, 40);
  auto body = [&](bool wrong) {
    const auto out = global(0, f32), a = global(1, f32);
    const UOpPtr i = make_range(n, 0);
    UOpPtr value = load(index(a, i));
    if (wrong)
      value = value + alu(Op::WHERE, {alu(Op::CMPLT, {n, i64(2)}), const_float(f32, 1), const_float(f32, 0)});
    return sink({end(store(index(out, i), value), {i})});
  };
  CHECK(fuzz::compare_kernels(body(false), body(false), 7).empty());
  const std::string diff = fuzz::compare_kernels(body(false), body(true), 7);
  CHECK(diff.find("at {n=1}") != std::string::npos);
  // A variable whose bounds leave out 1 is checked at its bounds and middle.
  const UOpPtr m = make_var("m", 3, 9);
  auto shifted = [&](int64_t by) {
    const auto out = global(0, f32), a = global(1, f32);
    const UOpPtr i = make_range(m, 0);
    return sink({end(store(index(out, i), load(index(a, i + i64(by)))), {i})});
  };
  CHECK(fuzz::compare_kernels(shifted(0), shifted(0), 3).empty());
  CHECK(!fuzz::compare_kernels(shifted(0), shifted(1), 3).empty());
}

namespace {

// Runs `program` (which realizes its results) under a checking KernelChecker with empty
// schedule caches, so every stage and pass runs and is checked: the passes it checked.
int64_t checked_passes(const std::function<void()>& program) {
  fuzz::Coverage coverage;
  {
    fuzz::KernelChecker checker(true, &coverage);
    detail::schedule_cache().clear();
    program();
    const auto failure = checker.failure();
    CHECK_MESSAGE(!failure, (failure ? failure->message.substr(0, 2000) : std::string()));
  }
  return coverage.kernel_checks["checked"];
}

std::vector<float> ramp(int64_t n, double scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(std::sin(i * scale));
  return v;
}

}  // namespace

TEST_CASE("kernel checker: programs over bound variables, their passes checked at several bindings") {
  // Sizes no other test uses, so the kernels compile here and their passes run.
  const Variable t("T", 1, 37), b("B", 1, 11);
  int64_t checked = 0;
  // Attention over a cache's first T rows.
  checked += checked_passes([&] {
    const Tensor q = Tensor::from_vector(ramp(3 * 1 * 12, 0.3), {3, 1, 12});
    const Tensor k = Tensor::from_vector(ramp(3 * 37 * 12, 0.7), {3, 37, 12});
    const Tensor v = Tensor::from_vector(ramp(3 * 37 * 12, 1.1), {3, 37, 12});
    const Tensor kt = k.slice(1, 0, t.bind(13)), vt = v.slice(1, 0, t.bind(13));
    realize({(q.matmul(kt.transpose(1, 2)) * 0.3).softmax(-1).matmul(vt)});
  });
  // A convolution, pooling and batch norm over B images, with their gradients: in the plain
  // build only, the interpreters' seconds being minutes under the sanitizers (their pass
  // looks for memory faults, which the other two programs reach in the same passes).
  if (!test::address_sanitizer())
    checked += checked_passes([&] {
      const Tensor x = Tensor::from_vector(ramp(11 * 3 * 9 * 9, 0.13), {11, 3, 9, 9});
      Tensor w = Tensor::from_vector(ramp(5 * 3 * 3 * 3, 0.37), {5, 3, 3, 3}).requires_grad_();
      const Tensor xb = x.slice(0, 0, b.bind(6));
      const Tensor y =
          nn::functional::max_pool2d(nn::functional::conv2d(xb, w, {}, {1, 1}, {1, 1}).relu(), {2, 2});
      const Tensor loss = nn::functional::batch_norm(y, {}, {}, {}, {}, true).square().mean();
      loss.backward();
      realize({loss, w.grad()});
    });
  // An MLP's Adam step over B rows.
  checked += checked_passes([&] {
    manual_seed(2);
    nn::Linear fc1(7, 13), fc2(13, 3);
    std::vector<Tensor> params = fc1.parameters();
    for (const Tensor& p : fc2.parameters()) params.push_back(p);
    optim::Adam opt(params, 1e-2);
    const Tensor x = Tensor::from_vector(ramp(11 * 7, 0.21), {11, 7}).slice(0, 0, b.bind(9));
    const Tensor err = fc2(fc1(x).relu()) - 0.5;
    const Tensor loss = (err * err).mean();
    loss.backward();
    opt.step();
    realize({loss});
  });
  MESSAGE("kernel passes checked at every binding: " << checked);
  CHECK(checked > 20);
}
