// einsum (src/tensor_einsum.cpp) against PyTorch's values and Float64 gradients
// (tests/data/nn_table.json), finite differences, matmul's schedule, and its errors.
#include "gradcheck.hpp"
#include "torch_table.hpp"

#include <loom/autocast.hpp>
#include <loom/debug.hpp>

using namespace loom;

TEST_CASE(
    "einsum matches PyTorch: products, batches, ellipses, diagonals, traces, chains, broadcasts, empties") {
  const int n = test::check_torch_table("einsum", [](const test::json& a, const std::vector<Tensor>& in) {
    return std::vector<Tensor>{einsum(a["equation"].get<std::string>(), in)};
  });
  CHECK(n == 52);
}

TEST_CASE("einsum's gradients match finite differences") {
  test::gradcheck([](const std::vector<Tensor>& x) { return einsum("bij,bkj->bik", x); },
                  {test::Input{{2, 3, 4}}, test::Input{{2, 5, 4}}});
  test::gradcheck([](const std::vector<Tensor>& x) { return einsum("ii,ij,j->i", x); },
                  {test::Input{{3, 3}}, test::Input{{3, 4}}, test::Input{{4}}});
}

TEST_CASE("a contraction by einsum is matmul's schedule, and it autocasts as matmul does") {
  const Tensor a = Tensor::rand({4, 32, 48}), b = Tensor::rand({4, 48, 16});
  const auto names = [](const Tensor& t) {
    std::vector<std::string> out;
    for (const auto& k : schedule_of({t})) out.push_back(k.name);
    return out;
  };
  CHECK(names(einsum("bij,bjk->bik", {a, b})) == names(a.matmul(b)));
  const Autocast bf16(DType::BFloat16);
  const Tensor mixed = einsum("bij,bjk->bik", {a, b}), reference = a.matmul(b);
  CHECK(mixed.dtype() == DType::BFloat16);
  CHECK(reference.dtype() == DType::BFloat16);
  CHECK(mixed.cast(DType::Float32).to_vector<float>() == reference.cast(DType::Float32).to_vector<float>());
}

TEST_CASE("einsum's errors name the equation and what was expected") {
  const Tensor m = Tensor::zeros({2, 3});
  const auto fails = [](std::string_view eq, const std::vector<Tensor>& ts, const char* what) {
    CAPTURE(eq);
    CHECK_THROWS_WITH_AS(einsum(eq, ts), doctest::Contains(what), Error);
  };
  fails("ij,jk->ik", {m, m}, "einsum(\"ij,jk->ik\"): 'j' is 2 in operand 1 and 3 in an earlier one");
  fails("ij->ik", {m}, "the output's 'k' is in no operand");
  fails("ij->ii", {m}, "the output repeats 'i'");
  fails("ijk", {m}, "operand 0 has 2 axes, its subscripts name 3");
  fails("ij,jk", {m}, "the subscripts name 2 operands, 1 were given");
  fails("i2", {Tensor::zeros({2, 2})}, "'2' is no subscript");
  fails("....", {m}, "a lone '.' or a second \"...\"");
  fails("ii", {m}, "operand 0 repeats 'i' over axes of sizes 2 and 3");
  fails("...ij->ij", {Tensor::zeros({4, 2, 3})}, "expected \"...\" in the output");
  fails("ij", {}, "no operands");
}
