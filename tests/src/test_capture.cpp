// loom::Capture: record on the second call, replay after it with the
// arguments rebound by position, no graph built, results bitwise the same.
#include "check.hpp"

#include "support/log_capture.hpp"

#include <loom/capture.hpp>
#include <loom/context.hpp>
#include <loom/debug.hpp>
#include <loom/gradient.hpp>
#include <loom/memory.hpp>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

using namespace loom;
using test::iota;
using test::make;

namespace {
std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A small regression model trained with SGD: the step the moons example runs.
struct Model {
  Tensor w1, w2;
  bool hold_hidden = false;  // a live tensor reading w1 makes w1's assign copy to a new buffer
  Model()
      : w1(make(DType::Float32, iota(2 * 8, 0.07, -0.5), {2, 8}).requires_grad_()),
        w2(make(DType::Float32, iota(8, -0.11, 0.4), {8, 1}).requires_grad_()) {}
  std::vector<Tensor> step(const std::vector<Tensor>& args) {
    const Tensor& x = args[0];
    const Tensor& y = args[1];
    Tensor hidden = x.matmul(w1).relu();
    const Tensor loss = (hidden.matmul(w2) - y).square().mean();
    loss.backward();
    {
      NoGrad guard;
      w1.assign(w1 - w1.grad() * 0.05f);
      w2.assign(w2 - w2.grad() * 0.05f);
    }
    w1.zero_grad();
    w2.zero_grad();
    if (!hold_hidden) hidden = Tensor();
    realize({w1, w2, loss});
    return {loss};
  }
};

std::vector<Tensor> batch(int i) {
  return {make(DType::Float32, iota(16 * 2, 0.03 * (i + 1), -0.4), {16, 2}),
          make(DType::Float32, iota(16, -0.02, 0.1 * i), {16, 1})};
}
}  // namespace

TEST_CASE("a captured training step replays with no graph built and gives the uncaptured results bitwise") {
  for (const bool hold_hidden : {false, true}) {  // assigns in place, or copying to new buffers
    CAPTURE(hold_hidden);
    Model plain, captured;
    plain.hold_hidden = captured.hold_hidden = hold_hidden;
    int calls = 0;
    Capture step([&](const std::vector<Tensor>& args) {
      ++calls;
      return captured.step(args);
    });
    for (int i = 0; i < 8; ++i) {
      const std::vector<Tensor> args = batch(i);  // new buffers every step: rebound by position
      const std::vector<float> want = values(plain.step(args)[0]);
      const Counters before = counters();
      const std::vector<Tensor> got = step(args);
      CAPTURE(i);
      CHECK(bitwise_equal(values(got[0]), want));
      CHECK(bitwise_equal(values(captured.w1), values(plain.w1)));
      CHECK(bitwise_equal(values(captured.w2), values(plain.w2)));
      if (i >= 2) {  // replayed: the function did not run, nothing was scheduled or compiled
        const Counters after = counters();
        CHECK(after.schedule_cache_hits == before.schedule_cache_hits);
        CHECK(after.schedule_cache_misses == before.schedule_cache_misses);
        CHECK(after.schedules_built == before.schedules_built);
        CHECK(after.kernels_compiled == before.kernels_compiled);
        CHECK(after.capture_replays == before.capture_replays + 1);
        CHECK(after.kernels_executed - before.kernels_executed == step.captured_kernels(args));
      }
    }
    CHECK(calls == 2);
    CHECK(step.captured(batch(0)));
  }
}

TEST_CASE("replays keep live nodes and buffers flat, and earlier results are not overwritten") {
  Capture twice([](const std::vector<Tensor>& args) { return std::vector<Tensor>{args[0] * 2 + 1}; });
  std::vector<Tensor> results;
  for (int i = 0; i < 4; ++i) results.push_back(twice({make(DType::Float32, iota(6, 1, i), {2, 3})})[0]);
  // A result dropped by the host stays with the Capture as the next replay's output buffer.
  const uint64_t replays = counters().capture_replays;
  twice({make(DType::Float32, iota(6, 1, 4), {2, 3})});
  const Counters at5 = counters();
  for (int i = 5; i < 12; ++i) {
    const Tensor dropped = twice({make(DType::Float32, iota(6, 1, i), {2, 3})})[0];
    CHECK(values(dropped) ==
          std::vector<float>{2.f * i + 1, 2.f * i + 3, 2.f * i + 5, 2.f * i + 7, 2.f * i + 9, 2.f * i + 11});
  }
  CHECK(counters().capture_replays == replays + 8);
  CHECK(counters().live_uops == at5.live_uops);
  CHECK(counters().live_buffers == at5.live_buffers);
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(results[i].shape() == Shape{2, 3});
    CHECK(values(results[i]) ==
          std::vector<float>{2.f * i + 1, 2.f * i + 3, 2.f * i + 5, 2.f * i + 7, 2.f * i + 9, 2.f * i + 11});
  }
}

TEST_CASE("arguments are rebound by position, including ones the step assigns into") {
  Capture axpy([](const std::vector<Tensor>& args) {
    Tensor acc = args[2];
    acc.assign(acc + args[0] * args[1]);
    return std::vector<Tensor>{(args[0] - args[1]).sum()};
  });
  Tensor acc = make(DType::Float32, {0, 0, 0}, {3});
  float want_acc[3] = {0, 0, 0};
  for (int i = 0; i < 5; ++i) {
    const Tensor a = make(DType::Float32, iota(3, 1, i), {3}), b = make(DType::Float32, iota(3, -1, 2), {3});
    const std::vector<Tensor> out = axpy({a, b, acc});
    for (int k = 0; k < 3; ++k) want_acc[k] += static_cast<float>((k + i) * (2 - k));
    CAPTURE(i);
    CHECK(out[0].item<float>() == static_cast<float>((i + 0 - 2) + (i + 1 - 1) + (i + 2 - 0)));
    CHECK(values(acc) == std::vector<float>(want_acc, want_acc + 3));
    if (i >= 1) CHECK(axpy.captured({a, b, acc}));  // the assign into acc is in place: replayable
    // Swapped arguments are another binding of the same signature: the replay follows them.
    CHECK(axpy({b, a, Tensor::zeros({3})})[0].item<float>() ==
          static_cast<float>(-((i + 0 - 2) + (i + 1 - 1) + (i + 2 - 0))));
  }
  CHECK(axpy.captured({acc, acc, Tensor::zeros({3})}) == false);  // aliased arguments: another signature
}

TEST_CASE("a change of shape or dtype captures again; each signature replays its own recording") {
  int calls = 0;
  Capture square([&](const std::vector<Tensor>& args) {
    ++calls;
    return std::vector<Tensor>{args[0] * args[0]};
  });
  auto f32 = [](int n) { return make(DType::Float32, iota(n, 0.5), {n}); };
  for (int i = 0; i < 3; ++i) square({f32(4)});
  CHECK(calls == 2);
  CHECK(values(square({f32(8)})[0]) == std::vector<float>{0, 0.25f, 1, 2.25f, 4, 6.25f, 9, 12.25f});
  CHECK(calls == 3);
  CHECK_FALSE(square.captured({f32(8)}));
  square({f32(8)});
  CHECK(square.captured({f32(8)}));
  const Tensor d = make(DType::Float64, iota(4, 0.5), {4});
  for (int i = 0; i < 3; ++i)
    CHECK(square({d})[0].to_vector<double>() == std::vector<double>{0, 0.25, 1, 2.25});
  CHECK(calls == 6);
  CHECK(values(square({f32(4)})[0]) == std::vector<float>{0, 0.25f, 1, 2.25f});
  CHECK(calls == 6);
}

TEST_CASE("a step rebinding a tensor that outlives it is not captured, and stays correct") {
  Tensor total = Tensor::zeros({2});
  Capture accumulate([&](const std::vector<Tensor>& args) {
    total = (total + args[0]).realize();  // host state: a new tensor, not an assign
    return std::vector<Tensor>{};
  });
  for (int i = 0; i < 4; ++i) accumulate({make(DType::Float32, {1, 2}, {2})});
  CHECK_FALSE(accumulate.captured({make(DType::Float32, {1, 2}, {2})}));
  CHECK(values(total) == std::vector<float>{4, 8});
}

TEST_CASE("a step whose result the host keeps and reads next call is not captured, and stays correct") {
  Tensor last = Tensor::zeros({2});
  Capture running([&](const std::vector<Tensor>& args) {
    last = last + args[0];  // the previous result, read through a C++ variable
    return std::vector<Tensor>{last};
  });
  for (int i = 0; i < 4; ++i) running({make(DType::Float32, {1, 2}, {2})});
  CHECK_FALSE(running.captured({make(DType::Float32, {1, 2}, {2})}));
  CHECK(values(last) == std::vector<float>{4, 8});
}

TEST_CASE("a tensor the first call initialises and later calls read is captured") {
  Tensor scale;  // made once, by the first call
  Capture scaled([&](const std::vector<Tensor>& args) {
    if (!scale.defined()) scale = (Tensor::ones({3}) * 3).realize();
    return std::vector<Tensor>{args[0] * scale};
  });
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(values(scaled({make(DType::Float32, iota(3, 1, i), {3})})[0]) ==
          std::vector<float>{3.f * i, 3.f * i + 3, 3.f * i + 6});
  }
  CHECK(scaled.captured({make(DType::Float32, iota(3, 1), {3})}));
}

TEST_CASE("gradients the step computes (zero_grad first, as optimisers do) replay into fresh buffers") {
  Model plain, captured;
  // The step as an optimiser runs it: gradients cleared first, realized with
  // the update, so each parameter's grad() outlives the call holding this step's gradient.
  auto step_of = [](Model& m) {
    return [&m](const std::vector<Tensor>& args) {
      m.w1.zero_grad();
      m.w2.zero_grad();
      const Tensor loss = (args[0].matmul(m.w1).relu().matmul(m.w2) - args[1]).square().mean();
      loss.backward();
      const Tensor g1 = m.w1.grad(), g2 = m.w2.grad();
      {
        NoGrad guard;
        m.w1.assign(m.w1 - g1 * 0.05f);
        m.w2.assign(m.w2 - g2 * 0.05f);
      }
      realize({m.w1, m.w2, loss, g1, g2});
      return std::vector<Tensor>{loss};
    };
  };
  Capture step(step_of(captured));
  auto plain_step = step_of(plain);
  std::vector<Tensor> held;  // earlier gradients read after later steps keep their values
  std::vector<std::vector<float>> held_values;
  for (int i = 0; i < 6; ++i) {
    const std::vector<Tensor> args = batch(i);
    const std::vector<float> want = values(plain_step(args)[0]);
    const uint64_t replays = counters().capture_replays;
    CAPTURE(i);
    CHECK(bitwise_equal(values(step(args)[0]), want));
    CHECK(counters().capture_replays == replays + (i >= 2 ? 1 : 0));
    CHECK(bitwise_equal(values(captured.w1.grad()), values(plain.w1.grad())));
    CHECK(bitwise_equal(values(captured.w2.grad()), values(plain.w2.grad())));
    CHECK(bitwise_equal(values(captured.w1), values(plain.w1)));
    held.push_back(captured.w2.grad() * 1);
    held_values.push_back(values(plain.w2.grad()));
  }
  CHECK(step.captured(batch(0)));
  for (size_t i = 0; i < held.size(); ++i) CHECK(bitwise_equal(values(held[i]), held_values[i]));
}

TEST_CASE("Capture rejects an empty function and undefined arguments or results") {
  CHECK_THROWS_AS(Capture(Capture::Step{}), Error);
  Capture id([](const std::vector<Tensor>& args) { return args; });
  CHECK_THROWS_AS(id({Tensor()}), Error);
  Capture none([](const std::vector<Tensor>&) { return std::vector<Tensor>{Tensor()}; });
  CHECK_THROWS_AS(none({}), Error);
}

TEST_CASE("under LOOM_CHECK_BOUNDS a Capture runs the step every call, its kernels checked, same results") {
  Model plain, checked;
  Capture capture([&](const std::vector<Tensor>& args) { return checked.step(args); });
  Context bounds{{"CHECK_BOUNDS", true}};
  for (int i = 0; i < 4; ++i) {
    const float want = plain.step(batch(i))[0].item<float>();
    CHECK(capture(batch(i))[0].item<float>() == want);
    CHECK_FALSE(capture.captured(batch(i)));
  }
  CHECK(bitwise_equal(values(checked.w1), values(plain.w1)));
}

TEST_CASE(
    "loom::empty_cache releases a live Capture's spare outputs and scratch; the next replay allocates them") {
  Model plain, captured;
  Capture step([&](const std::vector<Tensor>& args) { return captured.step(args); });
  for (int i = 0; i < 4; ++i) {  // the results are dropped: the Capture keeps them as spares
    const std::vector<Tensor> args = batch(i);
    plain.step(args);
    step(args);
  }
  REQUIRE(step.captured(batch(0)));
  const Counters held = counters();
  empty_cache();
  const Counters released = counters();
  CHECK(released.pooled_buffer_bytes == 0);
  CHECK(released.live_buffer_bytes < held.live_buffer_bytes);
  CHECK(released.live_buffers < held.live_buffers);
  for (int i = 4; i < 6; ++i) {
    CAPTURE(i);
    const std::vector<Tensor> args = batch(i);
    const std::vector<float> want = values(plain.step(args)[0]);
    const Counters before = counters();
    CHECK(bitwise_equal(values(step(args)[0]), want));
    CHECK(counters().capture_replays == before.capture_replays + 1);
    CHECK(counters().schedules_built == before.schedules_built);
    CHECK(bitwise_equal(values(captured.w1), values(plain.w1)));
    CHECK(bitwise_equal(values(captured.w2), values(plain.w2)));
  }
  CHECK(counters().live_buffers == held.live_buffers);  // the spares and scratch are back, once
  CHECK(counters().live_buffer_bytes == held.live_buffer_bytes);
}

TEST_CASE("a replay writing a state in place first copies it when the host still reads its buffer") {
  Tensor acc = make(DType::Float32, {0, 0}, {2});
  Capture add([&](const std::vector<Tensor>& args) {
    acc.assign(acc + args[0]);
    acc.realize();
    return std::vector<Tensor>{};
  });
  const Tensor one = make(DType::Float32, {1, 2}, {2});
  for (int i = 0; i < 3; ++i) add({one});  // nothing else reads acc: the assign writes in place
  REQUIRE(add.captured({one}));
  const Tensor before = acc * 1;  // lazy: reads acc's buffer as it is now
  const void* buffer = test::buffer_address(acc);
  add({one});
  CHECK(values(acc) == std::vector<float>{4, 8});
  CHECK(test::buffer_address(acc) != buffer);  // copied on write, as the assign would have
  CHECK(values(before) == std::vector<float>{3, 6});
  add({one});
  CHECK(values(acc) == std::vector<float>{5, 10});
}

TEST_CASE(
    "a recording whose state tensor is gone or whose read tensor moved is dropped, never replayed stale") {
  // The state: a tensor the host replaces (the old one dies) between calls.
  auto total = std::make_shared<Tensor>(make(DType::Float32, {0, 0}, {2}));
  Capture add([&](const std::vector<Tensor>& args) {
    total->assign(*total + args[0]);
    total->realize();
    return std::vector<Tensor>{};
  });
  const Tensor one = make(DType::Float32, {1, 2}, {2});
  for (int i = 0; i < 3; ++i) add({one});
  REQUIRE(add.captured({one}));
  *total = make(DType::Float32, {100, 100}, {2});
  test::LogCapture log;
  {
    Context debug{{"DEBUG", 1}};
    add({one});  // the recorded tensor is gone: this call records again
  }
  CHECK(log.text().find("dropped a stale recording") != std::string::npos);
  CHECK(log.text().find("a tensor it assigns is gone") != std::string::npos);
  CHECK(values(*total) == std::vector<float>{101, 102});
  CHECK(add.captured({one}));
  const uint64_t replays = counters().capture_replays;
  add({one});
  CHECK(counters().capture_replays == replays + 1);
  CHECK(values(*total) == std::vector<float>{102, 104});

  // A tensor the step only reads, moved to a new buffer by an assign outside it.
  Tensor scale = make(DType::Float32, {1, 2, 3}, {3});
  Capture scaled([&](const std::vector<Tensor>& args) { return std::vector<Tensor>{args[0] * scale}; });
  const Tensor x = make(DType::Float32, {1, 1, 1}, {3});
  for (int i = 0; i < 3; ++i) scaled({x});
  REQUIRE(scaled.captured({x}));
  scale.assign(make(DType::Float32, {4, 5, 6}, {3}));  // in place: nothing else reads scale
  CHECK(values(scaled({x})[0]) == std::vector<float>{4, 5, 6});
  const Tensor old_scale = scale * 1;  // a reader of the old buffer: the next assign copies
  scale.assign(make(DType::Float32, {7, 8, 9}, {3}));
  scale.realize();
  CHECK(values(scaled({x})[0]) == std::vector<float>{7, 8, 9});
  CHECK(values(old_scale) == std::vector<float>{4, 5, 6});
  CHECK(scaled.captured({x}));  // recorded again on the moved buffer
  CHECK(values(scaled({x})[0]) == std::vector<float>{7, 8, 9});
}

TEST_CASE("a signature whose recordings keep going stale runs uncaptured, and stays correct") {
  auto total = std::make_shared<Tensor>(make(DType::Float32, {0}, {1}));
  Capture add([&](const std::vector<Tensor>& args) {
    total->assign(*total + args[0]);
    total->realize();
    return std::vector<Tensor>{};
  });
  const Tensor one = make(DType::Float32, {1}, {1});
  float want = 0;
  for (int i = 0; i < 12; ++i) {
    if (i >= 2 && i % 2 == 0) {  // a new tensor every other call: each recording goes stale
      *total = make(DType::Float32, {10}, {1});
      want = 10;
    }
    add({one});
    want += 1;
    CAPTURE(i);
    CHECK(values(*total) == std::vector<float>{want});
  }
  CHECK_FALSE(add.captured({one}));
}

TEST_CASE("a step that draws random numbers (dropout) runs uncaptured: a fresh mask every call") {
  test::LogCapture logs;
  Capture drop([](const std::vector<Tensor>& args) {
    return std::vector<Tensor>{nn::functional::dropout(args[0], 0.5, true)};
  });
  const Tensor x = Tensor::ones({64});
  std::set<std::vector<float>> masks;
  for (int i = 0; i < 4; ++i) masks.insert(values(drop({x})[0]));
  CHECK(masks.size() == 4);  // a replay of call 2 would give its mask again
  CHECK_FALSE(drop.captured({x}));
  CHECK(logs.text().find("the step draws random numbers") != std::string::npos);
}
