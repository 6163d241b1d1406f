// Realizing graphs over symbolic sizes (docs/symbolic.md): one schedule and one set
// of kernels for every binding, values as the reference interpreter's at each
// binding, buffers sized for the run, and the errors that name the variable.
#include "ir/text.hpp"
#include "tests/src/check.hpp"
#include "tests/support/error_message.hpp"

#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <cmath>

using namespace loom;
using loom::test::check_message;
using loom::test::check_ref;
using loom::test::error_of;
using loom::test::values;

namespace {

std::vector<float> ramp(int64_t n, int64_t period, float shift) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i % period) - shift;
  return v;
}

}  // namespace

TEST_CASE("symbolic realize: a sum and a softmax over the first T rows, scheduled once for every T") {
  const Variable t("T", 1, 64);
  const Tensor base = Tensor::from_vector(ramp(64 * 3, 7, 2.5f), {64, 3});
  uint64_t misses = 0;
  for (const int n : {5, 9, 64, 1, 5}) {
    CAPTURE(n);
    const Tensor x = base.slice(0, 0, t.bind(n));
    const auto before = counters();
    const std::vector<double> sums = check_ref((x * 2 + 1).sum(0), 2);
    // The sum by hand: rows i < n of (i*3 + j) % 7 - 2.5, doubled, plus one.
    for (int j = 0; j < 3; ++j) {
      double want = 0;
      for (int i = 0; i < n; ++i) want += 2 * ((i * 3 + j) % 7 - 2.5) + 1;
      CHECK(sums[static_cast<size_t>(j)] == doctest::Approx(want));
    }
    check_ref((x.softmax(0) * x).sum(0), 8);
    misses += counters().schedule_cache_misses - before.schedule_cache_misses;
  }
  CHECK(misses == 2);  // the sum's graph and the softmax's, each scheduled for the first T only
}

TEST_CASE("symbolic realize: a Linear layer over a batch of B rows reads its weight from panels") {
  // [B, 300] @ [300, 96]: a weight of 112 KiB, read by up to 64 rows, is copied into panels
  // (schedule/panel_packing.cpp) as it is for 64 rows in numbers; a last batch of 37 rows
  // leaves the last tile of rows partly empty.
  const Variable b("B", 1, 64);
  const Tensor x = Tensor::from_vector(ramp(64 * 300, 13, 6.0f), {64, 300});
  const Tensor w = Tensor::from_vector(ramp(300 * 96, 11, 5.0f), {300, 96}) * 0.25f;  // every sum exact
  for (const char* target : {"native", "x86-64-v3"}) {
    const Context ctx{{"TARGET", target}};
    for (const int n : {64, 37}) {
      CAPTURE(target);
      CAPTURE(n);
      const Tensor y = x.slice(0, 0, b.bind(n)).matmul(w).relu();
      CHECK(schedule_of({y}).size() == 2);  // the weight's panels, then the product
      check_ref(y);
    }
  }
}

TEST_CASE("symbolic realize: decoding attention over cache[:, :, :T] compiles its kernels once") {
  const int64_t batch = 2, heads = 4, rows = 128, d = 16;
  const Variable t("T", 1, rows);
  manual_seed(7);
  Tensor k_cache = Tensor::randn({batch, heads, rows, d}), v_cache = Tensor::randn({batch, heads, rows, d});
  k_cache.realize();
  v_cache.realize();
  uint64_t compiled = 0, misses = 0;
  for (const int n : {1, 7, 17, 64, 128, 3}) {
    CAPTURE(n);
    Tensor q = Tensor::randn({batch, heads, 1, d});
    q.realize();
    const Tensor k = k_cache.slice(2, 0, t.bind(n)), v = v_cache.slice(2, 0, t.bind(n));
    const Tensor scores = q.matmul(k.transpose(2, 3)) * (1.0 / std::sqrt(static_cast<double>(d)));
    const Tensor out = scores.softmax(-1).matmul(v);
    const auto before = counters();
    check_ref(out, 512);  // float sums of up to 128 products that partly cancel
    if (n != 1) {         // the first binding schedules and compiles; every later one reuses them
      misses += counters().schedule_cache_misses - before.schedule_cache_misses;
      compiled += counters().kernels_compiled + counters().kernels_loaded - before.kernels_compiled -
                  before.kernels_loaded;
    }
  }
  CHECK(misses == 0);
  CHECK(compiled == 0);
}

TEST_CASE("symbolic realize: a result of symbolic shape holds its run's elements, in numbers") {
  const Variable t("T", 1, 32);
  const Tensor base = Tensor::from_vector(ramp(32 * 4, 5, 1.0f), {32, 4});
  for (const int n : {3, 32, 1}) {
    CAPTURE(n);
    const Tensor y = base.slice(0, 0, t.bind(n)) * 3;
    const std::vector<double> got = check_ref(y);
    REQUIRE(got.size() == static_cast<size_t>(n * 4));
    for (int i = 0; i < n * 4; ++i) CHECK(got[static_cast<size_t>(i)] == 3.0 * (i % 5 - 1.0));
    Tensor r = y;
    r.realize();
    CHECK(r.shape() == Shape{n, 4});
  }
}

TEST_CASE("symbolic realize: pad along a numeric axis and along the symbolic one") {
  const Variable t("T", 1, 8);
  const Tensor base = Tensor::from_vector(ramp(8 * 3, 4, 1.5f), {8, 3});
  for (const int n : {1, 5, 8}) {
    CAPTURE(n);
    const Tensor x = base.slice(0, 0, t.bind(n));
    const std::vector<double> cols = check_ref(x.pad({{0, 0}, {1, 2}}, 7.0).sum(0));
    REQUIRE(cols.size() == 6);
    CHECK(cols[0] == 7.0 * n);
    CHECK(cols[5] == 7.0 * n);
    check_ref(x.pad({{2, 1}, {0, 0}}).sum(1));
  }
}

TEST_CASE("symbolic realize: mean and var over a symbolic axis divide by its value") {
  const Variable t("T", 1, 16);
  const Tensor base = Tensor::from_vector(ramp(16 * 2, 6, 0.5f), {16, 2});
  for (const int n : {1, 4, 16}) {
    CAPTURE(n);
    const Tensor x = base.slice(0, 0, t.bind(n));
    check_ref(x.mean(0), 2);
    check_ref(x.var(std::vector<int>{0}, 0), 8);
    if (n > 1) check_ref(x.var(std::vector<int>{0}, 1), 8);
  }
}

// 1000 rows in batches of 64, the last of 40: with the batch size a bound variable the
// last batch schedules and compiles nothing, and training matches the numeric loop.
TEST_CASE("symbolic realize: a training loop whose last batch is smaller compiles nothing for it") {
  const int64_t rows = 1000, features = 8, batch = 64;
  std::vector<float> x(rows * features), y(rows);
  for (int64_t i = 0; i < rows; ++i) {
    float acc = 0.1f;
    for (int64_t j = 0; j < features; ++j)
      acc += (x[i * features + j] = static_cast<float>((i * 7 + j * 13) % 17) / 17.0f - 0.5f) *
             static_cast<float>(j + 1);
    y[i] = acc;
  }
  const Variable b("B", 1, batch);
  std::vector<std::vector<float>> losses(2);
  for (const bool symbolic : {false, true}) {
    manual_seed(1);
    Tensor w = Tensor::randn({features, 1}).requires_grad_(), bias = Tensor::zeros({1}).requires_grad_();
    optim::SGD opt({w, bias}, 0.1);
    for (int64_t s = 0; s < rows; s += batch) {
      const int64_t n = std::min(batch, rows - s);
      std::vector<float> xs(batch * features, 0.0f), ys(batch, 0.0f);
      std::copy(x.begin() + s * features, x.begin() + (s + n) * features, xs.begin());
      std::copy(y.begin() + s, y.begin() + s + n, ys.begin());
      const Dim size = symbolic ? b.bind(n) : Dim(n);
      const Tensor xb = Tensor::from_vector(xs, {batch, features}).slice(0, 0, size);
      const Tensor yb = Tensor::from_vector(ys, {batch, 1}).slice(0, 0, size);
      const auto before = counters();
      opt.zero_grad();
      const Tensor err = xb.matmul(w) + bias - yb;
      const Tensor loss = (err * err).mean();
      loss.backward();
      opt.step();
      losses[symbolic].push_back(loss.item<float>());
      if (symbolic && s > batch) {  // after the first two steps (the first builds w's graph)
        CHECK(counters().schedule_cache_misses == before.schedule_cache_misses);
        CHECK(counters().kernels_compiled + counters().kernels_loaded ==
              before.kernels_compiled + before.kernels_loaded);
      }
    }
  }
  REQUIRE(losses[0].size() == losses[1].size());
  for (size_t i = 0; i < losses[0].size(); ++i)
    CHECK(losses[1][i] == doctest::Approx(losses[0][i]).epsilon(1e-5));
}

TEST_CASE("symbolic realize: schedule_of shows the schedule a realize makes for the variable") {
  const Variable t("T", 1, 64);
  const Tensor base = Tensor::ones({64, 8});
  const auto at3 = schedule_of({base.slice(0, 0, t.bind(3)).sum(0)});
  const auto at50 = schedule_of({base.slice(0, 0, t.bind(50)).sum(0)});
  REQUIRE(!at3.empty());
  REQUIRE(at3.size() == at50.size());
  for (size_t i = 0; i < at3.size(); ++i) CHECK(at3[i].name == at50[i].name);
}

TEST_CASE("symbolic realize: one graph takes one value per variable, and one variable per name") {
  const Variable t("T", 1, 64);
  const Tensor base = Tensor::ones({64, 2});
  const Tensor a = base.slice(0, 0, t.bind(3)).sum(), c = base.slice(0, 0, t.bind(5)).sum();
  check_message(error_of([&] { (void)(a + c).item<float>(); }), {"realize", "'T'", "3", "5"});
  const Variable other("T", 1, 32);
  const Tensor d = base.slice(0, 0, other.bind(3)).sum();
  check_message(error_of([&] { (void)(a + d).item<float>(); }), {"realize", "two variables named 'T'"});
  CHECK((a + a).item<float>() == 12.0f);  // one binding used twice is one value
}

TEST_CASE("symbolic sizes: a graph file refuses them by name (it is read back); text shows them") {
  const Variable t("T", 1, 64);
  const Tensor x = Tensor::ones({64, 2}).slice(0, 0, t.bind(3)) * 2;
  check_message(error_of([&] { (void)graph_to_text({x}); }), {"save_graph", "T=3", "numbers"});
  CHECK(to_text(x.node()->uop).find("{T=3}") != std::string::npos);
}

TEST_CASE("symbolic realize: Capture runs a step over symbolic sizes uncaptured, with its values") {
  const Variable t("T", 1, 16);
  const Tensor base = Tensor::from_vector(ramp(16, 16, 0.0f), {16});
  int n = 4;
  Capture step([&](const std::vector<Tensor>& args) {
    return std::vector<Tensor>{(args[0].slice(0, 0, t.bind(n))).sum()};
  });
  for (const int value : {4, 9, 16, 2}) {
    n = value;
    CHECK(step({base})[0].item<float>() == static_cast<float>(value * (value - 1) / 2));
  }
  CHECK_FALSE(step.captured({base}));
}

TEST_CASE("symbolic realize: creation ops take a bound variable, compiled once for every value") {
  const Variable t("T", 1, 32);
  uint64_t compiled = 0;
  bool first = true;
  for (const int n : {4, 9, 32, 1}) {
    CAPTURE(n);
    const Dim size = t.bind(n);
    const auto before = counters();
    // arange(T), arange(1, T, 3) and a causal mask over [T, T]: by hand.
    std::vector<double> count, stepped, causal;
    for (int i = 0; i < n; ++i) count.push_back(i);
    for (int i = 1; i < n; i += 3) stepped.push_back(i);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) causal.push_back(j <= i ? 1.5 : 0.0);
    CHECK(check_ref(Tensor::arange(size)) == count);
    CHECK(check_ref(Tensor::arange(1, size, 3, DType::Float32)) == stepped);
    CHECK(check_ref(Tensor::full({size, size}, 1.5).tril()) == causal);
    CHECK(check_ref(Tensor::zeros({size, 2}) + Tensor::ones({2})) == std::vector<double>(2 * n, 1.0));
    // rand over [T, 3] draws the numbers rand over [n, 3] draws.
    manual_seed(5);
    const std::vector<double> want = check_ref(Tensor::rand({n, 3}));
    manual_seed(5);
    CHECK(check_ref(Tensor::rand({size, 3})) == want);
    if (!first)
      compiled += counters().kernels_compiled + counters().kernels_loaded - before.kernels_compiled -
                  before.kernels_loaded;
    first = false;
  }
  // Only the numeric rand over [n, 3] compiles per n (one kernel each for n = 9, 32, 1).
  CHECK(compiled <= 3);
  check_message(error_of([&] { (void)Tensor::arange(25, t.bind(30), 1); }),
                {"arange", "T=30", "below start 25"});
  check_message(error_of([&] { (void)Tensor::arange(0, t.bind(5), -1); }),
                {"arange", "T=5", "positive step"});
}

TEST_CASE(
    "symbolic realize: Capture records a step over a batch of B rows once and replays every batch size") {
  // A two-layer regression trained with Adam over 300 rows in batches of 64 (the last of 44):
  // captured, with the batch a bound variable, against the same loop uncaptured.
  const int64_t rows = 300, features = 6, batch = 64;
  std::vector<float> x(rows * features), y(rows * 2);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < features; ++j)
      x[i * features + j] = static_cast<float>((i * 5 + j * 11) % 19) / 19.0f - 0.5f;
    y[i * 2] = x[i * features] * 2 - x[i * features + 3];
    y[i * 2 + 1] = x[i * features + 1] * x[i * features + 2];
  }
  const Tensor xs = Tensor::from_vector(x, {rows, features}), ys = Tensor::from_vector(y, {rows, 2});
  const Variable b("B", 1, batch);
  std::vector<std::vector<float>> losses(2);
  for (const bool captured : {false, true}) {
    CAPTURE(captured);
    manual_seed(4);
    nn::Linear fc1(features, 16), fc2(16, 2);
    std::vector<Tensor> params = fc1.parameters();
    for (const Tensor& p : fc2.parameters()) params.push_back(p);
    optim::Adam opt(params, 1e-2);
    Capture step([&](const std::vector<Tensor>& data) {
      opt.zero_grad();
      const Tensor err = fc2(fc1(data[0]).relu()) - data[1];
      const Tensor loss = (err * err).mean();
      loss.backward();
      opt.step();
      return std::vector<Tensor>{loss};
    });
    data::DataLoader loader({xs, ys}, batch);
    loader.set_batch_variable(b);
    for (int epoch = 0; epoch < 3; ++epoch) {
      int64_t seen = 0;
      while (auto data = loader.next()) {
        const int64_t n = (*data)[0].shape()[0].value();
        const auto before = counters();
        const Tensor loss = captured ? step(*data)[0] : [&] {
          opt.zero_grad();
          const Tensor err = fc2(fc1((*data)[0]).relu()) - (*data)[1];
          const Tensor l = (err * err).mean();
          l.backward();
          opt.step();
          return l;
        }();
        losses[captured].push_back(loss.item<float>());
        // Two calls of the one signature (the first runs, the second records): every later
        // call replays, whatever its batch size, and builds, schedules and compiles nothing.
        if (captured && (epoch > 0 || seen >= 2 * batch)) {
          CHECK(counters().capture_replays == before.capture_replays + 1);
          CHECK(counters().schedule_cache_misses == before.schedule_cache_misses);
          CHECK(counters().kernels_compiled + counters().kernels_loaded ==
                before.kernels_compiled + before.kernels_loaded);
        }
        seen += n;
      }
      CHECK(seen == rows);
    }
  }
  REQUIRE(losses[0].size() == losses[1].size());
  for (size_t i = 0; i < losses[0].size(); ++i) {
    CAPTURE(i);
    CHECK(losses[1][i] == doctest::Approx(losses[0][i]).epsilon(1e-5));
  }
}

TEST_CASE(
    "symbolic realize: Capture replays attention over cache[:, :, :T] with each T, results of shape T "
    "included") {
  const int64_t heads = 2, rows = 40, d = 8;
  const Variable t("T", 1, rows);
  manual_seed(9);
  Tensor k_cache = Tensor::randn({heads, rows, d}), v_cache = Tensor::randn({heads, rows, d});
  Tensor q = Tensor::randn({heads, 1, d});
  k_cache.realize();
  v_cache.realize();
  q.realize();
  auto attend = [](const std::vector<Tensor>& a) {
    const Tensor p = (a[0].matmul(a[1].transpose(1, 2)) * 0.25).softmax(-1);  // [heads, 1, T]
    return std::vector<Tensor>{p.matmul(a[2]), p};
  };
  Capture step(attend);
  int call = 0;
  for (const int n : {5, 12, 1, 40, 7, 12}) {
    CAPTURE(n);
    const std::vector<Tensor> args{q, k_cache.slice(1, 0, t.bind(n)), v_cache.slice(1, 0, t.bind(n))};
    const std::vector<Tensor> want = attend(args);
    const std::vector<double> out = values(want[0]), probs = values(want[1]);
    const auto before = counters();
    const std::vector<Tensor> got = step(args);
    CHECK(got[1].shape() == Shape{heads, 1, n});
    const std::vector<double> got_out = values(got[0]), got_probs = values(got[1]);
    REQUIRE(got_probs.size() == probs.size());
    for (size_t i = 0; i < out.size(); ++i) CHECK(got_out[i] == doctest::Approx(out[i]).epsilon(1e-6));
    for (size_t i = 0; i < probs.size(); ++i) CHECK(got_probs[i] == doctest::Approx(probs[i]).epsilon(1e-6));
    if (++call > 2) {  // from the third call on: a replay
      CHECK(counters().capture_replays == before.capture_replays + 1);
      CHECK(counters().kernels_compiled + counters().kernels_loaded ==
            before.kernels_compiled + before.kernels_loaded);
    }
  }
  CHECK(step.captured({q, k_cache.slice(1, 0, t.bind(3)), v_cache.slice(1, 0, t.bind(3))}));
  // Sliced under NoGrad, an argument is a detached view (another signature): bound in place
  // all the same, its third call a replay.
  NoGrad no_grad;
  for (const int n : {9, 4, 20}) {
    const auto before = counters().capture_replays;
    const std::vector<Tensor> got = step({q, k_cache.slice(1, 0, t.bind(n)), v_cache.slice(1, 0, t.bind(n))});
    CHECK(got[1].shape() == Shape{heads, 1, n});
    CHECK(counters().capture_replays == before + (n == 20 ? 1 : 0));
  }
}

TEST_CASE(
    "symbolic realize: a gradient through a result realized over symbolic sizes is an error, never wrong") {
  const Variable b("B", 1, 8);
  Tensor w = Tensor::ones({3}).requires_grad_();
  const Tensor x = Tensor::ones({8, 3}).slice(0, 0, b.bind(4));
  Tensor y = x * w * 2;  // [B=4, 3]
  y.realize();           // comes back [4, 3], its graph kept for backward()
  CHECK(y.shape() == Shape{4, 3});
  check_message(error_of([&] { y.sum().backward(); }), {"backward", "B=4", "realized"});
  // Realized after backward(), the graph gives the gradient: 2 per row, 4 rows.
  w.zero_grad();
  Tensor z = x * w * 2;
  z.sum().backward();
  CHECK(values(z) == std::vector<double>(12, 2.0));
  CHECK(values(w.grad()) == std::vector<double>{8, 8, 8});
}

TEST_CASE("symbolic realize: scaled_dot_product_attention over T cached rows, and causal over T queries") {
  const Variable t("T", 1, 24);
  manual_seed(12);
  Tensor q = Tensor::randn({2, 24, 8}), k = Tensor::randn({2, 24, 8}), v = Tensor::randn({2, 24, 8});
  realize({q, k, v});
  for (const int n : {1, 9, 24}) {
    CAPTURE(n);
    const Dim rows = t.bind(n);
    const Tensor kt = k.slice(1, 0, rows), vt = v.slice(1, 0, rows), qt = q.slice(1, 0, rows);
    // One query over the first T keys, and T queries each over the keys up to its own.
    check_ref(nn::scaled_dot_product_attention(q.slice(1, 0, 1), kt, vt), 64);
    check_ref(nn::scaled_dot_product_attention(qt, kt, vt, {}, std::nullopt, /*is_causal=*/true), 64);
  }
}
