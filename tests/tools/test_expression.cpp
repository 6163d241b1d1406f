#include "tools/expression.hpp"

#include "support/error_message.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::tools;
using test::error_of;

namespace {
std::vector<double> values(const Tensor& t) {
  Tensor f = t.cast(DType::Float64);
  return f.to_vector<double>();
}
}  // namespace

TEST_CASE("statements build tensors; the names no later statement reads are the outputs") {
  const Program p =
      run_program("a = arange(6); m = a.reshape(2, 3); b = m * 2 + 1; out = b.sum(1); other = m.max()");
  REQUIRE(p.inputs.size() == 1);
  CHECK(p.inputs[0].name == "a");
  REQUIRE(p.outputs.size() == 2);
  CHECK(p.outputs[0].name == "out");
  CHECK(p.outputs[1].name == "other");
  CHECK(values(p.outputs[0].tensor) == std::vector<double>{9, 27});  // (1+3+5), (7+9+11)
  CHECK(values(p.outputs[1].tensor) == std::vector<double>{5});
}

TEST_CASE("operators keep PyTorch's precedence and Python's number rules") {
  auto one = [](const std::string& src) { return values(run_program(src).outputs.at(0).tensor); };
  CHECK(one("a = arange(3); out = a + 2 * 3 ** 2") == std::vector<double>{18, 19, 20});
  CHECK(one("a = arange(3); out = -a ** 2") ==
        std::vector<double>{0, -1, -4});  // ** binds tighter than unary -
  CHECK(one("a = arange(4); out = (a - 2) % 3") == std::vector<double>{1, 2, 0, 1});
  CHECK(one("a = arange(4); out = a / 2") == std::vector<double>{0, 0.5, 1, 1.5});  // true division
  CHECK(one("n = 2 + 1; a = arange(n); out = a * n") == std::vector<double>{0, 3, 6});
  CHECK(one("a = ones(2, 2); b = ones(2, 2) * 0 + 3; out = a @ b") == std::vector<double>{6, 6, 6, 6});
  CHECK(one("a = arange(4); out = where(a > 1, a, -1)") == std::vector<double>{-1, -1, 2, 3});
}

TEST_CASE("methods, keyword arguments, dtypes and functions of several tensors") {
  auto one = [](const std::string& src) { return run_program(src).outputs.at(0).tensor; };
  Tensor kept = one("a = ones(2, 3); out = a.sum(1, keepdim=1)");
  CHECK(kept.shape() == Shape{2, 1});
  CHECK(one("a = zeros(4, dtype=i32); out = a + 1").dtype() == DType::Int32);
  CHECK(one("a = arange(4); out = a.cast(f64) * 0.5").dtype() == DType::Float64);
  CHECK(one("a = ones(2); b = zeros(2); out = cat(a, b, axis=0)").shape() == Shape{4});
  CHECK(values(one("a = arange(6).reshape(2, 3); out = a.permute(1, 0).flatten()")) ==
        std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(values(one("a = arange(4); out = exp(a * 0)")) == std::vector<double>{1, 1, 1, 1});  // f(x) is x.f()
  CHECK(values(one("a = arange(3); out = a.pad(1, 2).shrink(0, 5)")) == std::vector<double>{0, 0, 1, 2, 0});
  CHECK(error_of([] {
          run_program("a = arange(3); out = a.pad(1)");
        }).find("pad takes (lo, hi) pairs, one per axis: an even count") != std::string::npos);
  CHECK(values(one("a = arange(3)\n# a comment\nout = (a +\n  1)  # a new line inside parentheses\n")) ==
        std::vector<double>{1, 2, 3});
}

TEST_CASE("grad(target, w) is the symbolic gradient") {
  const Program p = run_program("x = rand(5); loss = (x * x * 3).sum(); out = grad(loss, x)");
  REQUIRE(p.outputs.size() == 1);
  const std::vector<double> x = values(p.inputs.at(0).tensor), g = values(p.outputs[0].tensor);
  REQUIRE(g.size() == 5);
  for (size_t i = 0; i < 5; ++i) CHECK(g[i] == doctest::Approx(6 * x[i]).epsilon(1e-6));
  CHECK(error_of([] {
          run_program("x = rand(5); out = grad(x.sum())");
        }).find("grad takes 2 arguments, got 1") != std::string::npos);
}

TEST_CASE("a syntax error names its column and points at it") {
  const std::string e = error_of([] { run_program("a = rand(4, 4); out = a.sum(1,"); });
  CHECK(e.find("column 31: expected a value, got the end of the program") == 0);
  CHECK(e.find("\n  a = rand(4, 4); out = a.sum(1,\n  " + std::string(30, ' ') + "^") != std::string::npos);
  CHECK(error_of([] { run_program("out = rand(4) +* 2"); }).find("column 16: expected a value, got '*'") ==
        0);
  CHECK(error_of([] { run_program("out = rand(4) $ 2"); }).find("column 15: unexpected character '$'") == 0);
  CHECK(error_of([] {
          run_program("a = rand(4)\nout = a.sum(1 2)");
        }).find("line 2, column 15: expected ')' closing the arguments of sum, got '2'") == 0);
  CHECK(error_of([] { run_program("= 3"); }).find("column 1: expected a statement 'name = expression'") == 0);
}

TEST_CASE("names, functions, methods and argument counts are checked where they are written") {
  CHECK(error_of([] { run_program("out = b + 1"); }).find("column 7: 'b' is not defined") == 0);
  CHECK(error_of([] { run_program("out = frob(3)"); }).find("column 7: no function is called 'frob'") == 0);
  CHECK(error_of([] {
          run_program("a = rand(3); out = a.frob()");
        }).find("column 22: tensors have no method 'frob'") == 0);
  CHECK(error_of([] {
          run_program("a = rand(3); out = a.relu(1)");
        }).find("column 22: relu takes 0 arguments, got 1") == 0);
  CHECK(error_of([] {
          run_program("a = rand(3); out = a.reshape(1.5)");
        }).find("column 30: argument 1 of reshape must be a whole number, got 1.5") == 0);
  CHECK(error_of([] {
          run_program("a = rand(3); out = a.sum(keep=1)");
        }).find("column 26: sum takes no argument 'keep'") == 0);
}

TEST_CASE("a Tensor API error is reported at the operation that raised it") {
  const std::string e = error_of([] { run_program("a = rand(2, 3); b = rand(4, 5); out = a @ b"); });
  CHECK(e.find("column 41: ") == 0);
  CHECK(e.find("matmul") != std::string::npos);
}

TEST_CASE("a program whose every value is read has no output, which is an error") {
  CHECK(error_of([] { run_program("a = rand(3)"); }).find("the program has no output") != std::string::npos);
  CHECK(error_of([] { run_program("a = rand(3); b = a + 1; c = b * a; d = c.sum(); e = d + c.sum()"); }) ==
        "");
}
