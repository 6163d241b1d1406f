// Matmuls of bfloat16 operands (docs/semantics.md, "Half-precision dtypes"): float32 sums of
// the exact products. On a Target with vdpbf16ps the schedule copies both operands as
// bfloat16 pairs and the tile sums them on the pair-dot unit (codegen/pair_dot.hpp); the
// terms are still added in the order of k, so the results equal a float32 loop over k bit
// for bit, as the x86-64-v3 preset's float32 register tile does.
#include "support/ordered_matmul.hpp"

#include <loom/context.hpp>
#include <loom/debug.hpp>
#include <loom/tensor.hpp>

#include <doctest/doctest.h>

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
