// Matmuls of bfloat16 operands (docs/semantics.md, "Half-precision dtypes"): float32 sums of
// the exact products. On a Target with vdpbf16ps the schedule copies both operands as
// bfloat16 pairs and the tile sums them on the pair-dot unit (codegen/pair_dot.hpp); the
// terms are still added in the order of k, so the results equal a float32 loop over k bit
// for bit, as the x86-64-v3 preset's float32 register tile does.
#include "support/ordered_matmul.hpp"

#include <loom/context.hpp>
#include <loom/debug.hpp>
#include <loom/gradient.hpp>
#include <loom/tensor.hpp>

#include <doctest/doctest.h>

#include <cmath>

using namespace loom;
using namespace loom::test;

namespace {

struct Case {
  int64_t batch, m, k, n;
  int64_t block = 0;  // the tile's blocks of k (0: one)
};

Shape shape(int64_t batch, int64_t rows, int64_t cols) {
  return batch == 1 ? Shape{rows, cols} : Shape{batch, rows, cols};
}

// a @ b of bfloat16 tensors widened to float32 (so the float32 sum is the result itself),
// compiled for the LOOM_TARGET preset `target`.
std::vector<float> widened_matmul(const Case& c, const std::vector<float>& a, const std::vector<float>& b,
                                  const std::string& target) {
  const Context ctx{{"TARGET", target}, {"CACHE_DIR", "off"}};
  const Tensor x = Tensor::from_vector<float>(a, shape(c.batch, c.m, c.k)).cast(DType::BFloat16).realize();
  const Tensor y = Tensor::from_vector<float>(b, shape(c.batch, c.k, c.n)).cast(DType::BFloat16).realize();
  return x.cast(DType::Float32).matmul(y.cast(DType::Float32)).to_vector<float>();
}

}  // namespace

TEST_CASE("bfloat16 matmul: the float32 sum in the order of k, bit for bit, at every preset") {
  // Rows and columns past whole tiles and panels, a batch, k of 2, of one block of the tile's
  // sum and of four (blocks of 256 terms, codegen/recipes.cpp: each summed from 0, then added
  // to the blocks before), k odd (no pairs: the float32 tile).
  for (const Case& c : {Case{1, 64, 96, 80}, Case{1, 70, 128, 33}, Case{3, 40, 64, 48},
                        Case{1, 96, 1024, 96, 256}, Case{1, 37, 2, 64}, Case{1, 48, 75, 64}}) {
    CAPTURE(c.batch);
    CAPTURE(c.m);
    CAPTURE(c.k);
    CAPTURE(c.n);
    const auto a = bf16_values(static_cast<size_t>(c.batch * c.m * c.k), 1);
    const auto b = bf16_values(static_cast<size_t>(c.batch * c.k * c.n), 2);
    const auto want = bits(ordered_matmul(a, b, c.batch, c.m, c.k, c.n, c.block));
    for (const char* target : {"native", "x86-64-v3"}) {
      CAPTURE(target);
      CHECK(bits(widened_matmul(c, a, b, target)) == want);
    }
  }
}

TEST_CASE("bfloat16 matmul: on a Target with vdpbf16ps both operands are copied as bfloat16 pairs") {
  if (!host_pair_dot()) return;  // the layout is the native Target's choice
  const Tensor x =
      Tensor::from_vector<float>(bf16_values(256 * 512, 3), {256, 512}).cast(DType::BFloat16).realize();
  const Tensor y =
      Tensor::from_vector<float>(bf16_values(512 * 256, 4), {512, 256}).cast(DType::BFloat16).realize();
  const auto kernels = schedule_of({x.matmul(y)});
  // Two copies (a in row panels, b in column panels), each bfloat16 and as large as its
  // operand, then the product: no float32 copy of either.
  int64_t pair_copies = 0;
  for (const auto& k : kernels) {
    for (size_t o = 0; o < k.outputs; ++o)
      pair_copies += k.buffers[o].dtype == DType::BFloat16 && k.buffers[o].numel >= 256 * 512;
    for (const auto& buf : k.buffers) CHECK(buf.dtype == DType::BFloat16);
  }
  CHECK(pair_copies == 2);
  // The bfloat16 result rounds the float32 sum (two blocks of 256 terms) once.
  const auto want = ordered_matmul(x.cast(DType::Float32).to_vector<float>(),
                                   y.cast(DType::Float32).to_vector<float>(), 1, 256, 512, 256, 256);
  const auto got = x.matmul(y).cast(DType::Float32).to_vector<float>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == static_cast<float>(bfloat16(want[i])));
}

TEST_CASE("a bfloat16 weight's gradient over a batch and a sequence sums pairs of the sequence") {
  // dW = sum over (b, t) of dY[b, t, i] x[b, t, j]: the sum has two ranges, and its pairs are
  // the sequence's steps (schedule/panel_packing.cpp): both operands copied as bfloat16 pairs.
  const int64_t B = 4, T = 64, D = 128, H = 192;
  const auto xv = bf16_values(static_cast<size_t>(B * T * D), 5),
             gv = bf16_values(static_cast<size_t>(B * T * H), 6),
             wv = bf16_values(static_cast<size_t>(H * D), 7);
  const Tensor x = Tensor::from_vector<float>(xv, {B, T, D}).cast(DType::BFloat16).realize();
  Tensor w = Tensor::from_vector<float>(wv, {H, D}).cast(DType::BFloat16).realize();
  w.requires_grad_();
  const Tensor gy = Tensor::from_vector<float>(gv, {B, T, H}).realize();  // bfloat16 values
  const Tensor y = x.matmul(w.transpose(0, 1));
  const Tensor dw = gradient((y.cast(DType::Float32) * gy).sum(), {w})[0];
  if (host_pair_dot()) {
    int64_t pair_copies = 0;
    for (const auto& k : schedule_of({dw}))
      for (size_t o = 0; o < k.outputs; ++o)
        pair_copies += k.buffers[o].dtype == DType::BFloat16 && k.buffers[o].numel >= B * T * D;
    CHECK(pair_copies == 2);
  }
  // Exact products summed in float32, then rounded to bfloat16 once: within one bfloat16
  // rounding of the exact sum, plus float32's error over 256 terms.
  const auto got = dw.cast(DType::Float32).to_vector<float>();
  REQUIRE(got.size() == static_cast<size_t>(H * D));
  for (int64_t i = 0; i < H; ++i)
    for (int64_t j = 0; j < D; ++j) {
      double exact = 0, size = 0;
      for (int64_t s = 0; s < B * T; ++s) {
        const double term =
            static_cast<double>(gv[static_cast<size_t>(s * H + i)]) * xv[static_cast<size_t>(s * D + j)];
        exact += term, size += std::abs(term);
      }
      const double g = got[static_cast<size_t>(i * D + j)];
      CHECK(std::abs(g - exact) <= std::abs(exact) * 0x1p-8 + size * 0x1p-16);
    }
}
