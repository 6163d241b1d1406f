// One causal attention step, forward and backward, as nn::scaled_dot_product_attention
// builds it today (unfused: the [B, H, T, T] scores are stored): the schedule's kernels and
// their largest buffers (loom::schedule_of, nothing run), then two steps timed once each,
// the first compiling its kernels, the second running them from the caches. Not a
// benchmark loop: the baseline figure the fused attention of issue 27 is measured against
// (docs/performance.md, "Attention").
//
//   attention_step [T=2048] [heads=4] [E=64] [batch=1]
#include <loom/debug.hpp>
#include <loom/loom.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

using namespace loom;

int main(int argc, char** argv) {
  auto arg = [&](int i, int64_t fallback) { return argc > i ? std::atoll(argv[i]) : fallback; };
  const int64_t T = arg(1, 2048), H = arg(2, 4), E = arg(3, 64), B = arg(4, 1);
  manual_seed(27);
  const Shape shape{B, H, T, E};
  Tensor q = Tensor::randn(shape).realize().requires_grad_(),
         k = Tensor::randn(shape).realize().requires_grad_(),
         v = Tensor::randn(shape).realize().requires_grad_();
  const Tensor w = Tensor::randn(shape).realize();
  auto step = [&] {
    const Tensor y = nn::scaled_dot_product_attention(q, k, v, {}, std::nullopt, true);
    std::vector<Tensor> out = gradient((y * w).sum(), {q, k, v});
    out.insert(out.begin(), y);
    return out;
  };

  struct Buffer {
    std::string kernel;
    int64_t bytes;
  };
  std::vector<Buffer> stored;  // what each kernel writes
  const auto kernels = schedule_of(step());
  for (const auto& kernel : kernels)
    for (size_t i = 0; i < kernel.outputs; ++i)
      stored.push_back(
          {kernel.name, kernel.buffers[i].numel * static_cast<int64_t>(kernel.buffers[i].dtype.itemsize())});
  std::sort(stored.begin(), stored.end(), [](const Buffer& a, const Buffer& b) { return a.bytes > b.bytes; });
  int64_t total = 0;
  for (const Buffer& b : stored) total += b.bytes;
  fmt::print("causal attention, B={} H={} T={} E={}, Float32, forward + backward of q, k, v\n", B, H, T, E);
  fmt::print("schedule: {} kernels storing {:.1f} MiB in all; the largest buffers:\n", kernels.size(),
             static_cast<double>(total) / (1 << 20));
  for (size_t i = 0; i < std::min<size_t>(stored.size(), 5); ++i)
    fmt::print("  {:>8.1f} MiB  {}\n", static_cast<double>(stored[i].bytes) / (1 << 20), stored[i].kernel);

  for (const char* which : {"first step (compiles)", "second step"}) {
    const auto start = std::chrono::steady_clock::now();
    realize(step());
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    fmt::print("{}: {:.1f} ms\n", which, ms);
  }
}
