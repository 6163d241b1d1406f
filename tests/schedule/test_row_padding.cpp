// row_padding: an intermediate buffer whose rows are a whole number of L1 set strides
// (sets x line) long gets one line of padding after each row; its ranges and readers are
// unchanged. Before graph in, After graph out, by pointer.
#include "schedule/row_padding.hpp"
#include "stage_testing.hpp"

#include "support/l1_targets.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace loom;
using loom::testing::expect;

namespace {

// row_padding over `text` for `target` (by default 64 sets of 64-byte lines: rows of 1024
// floats start in one set).
UOpPtr apply_row_padding(const std::string& text, const Target& target = test::avx2_l1_32k_8way()) {
  const Flags flags;
  StageContext ctx{flags, {}};
  ctx.target = target;
  return graph_rewrite(parse_text(text), row_padding(), ctx);
}

// E = exp2(x) [rows, cols] kept in a buffer, read down its columns by a column sum (the root).
std::string column_sum_of_exp(int64_t rows, int64_t cols, const std::string& e_shape) {
  const std::string r = std::to_string(rows), c = std::to_string(cols), n = std::to_string(rows * cols);
  return "%nr = CONST i64 [" + r + "]\n%nc = CONST i64 [" + c + "]\n%x = BUFFER f32 [(1 " + n +
         ")]\n"
         "%ri = RANGE i64 %nr [axis 0 loop]\n%rk = RANGE i64 %nc [axis 1 loop]\n"
         "%a = MUL i64 %ri, %nc\n%at = ADD i64 %a, %rk\n%ix = INDEX f32* %x, %at\n%lx = LOAD f32 %ix\n"
         "%e = EXP2 f32 %lx\n%ce = CONTIGUOUS f32 %e\n%be = BUFFERIZE f32 %ce, %ri, %rk [(" +
         r + " " + e_shape +
         ")]\n"
         "%rj = RANGE i64 %nc [axis 2 loop]\n%rr = RANGE i64 %nr [axis 3 reduce]\n"
         "%ie = INDEX f32* %be, %rr, %rj\n%le = LOAD f32 %ie\n%s = REDUCE f32 %le, %rr [reduce ADD ()]\n"
         "%root = BUFFERIZE f32 %s, %rj [(" +
         c + ")]\n%sink = SINK bool %root\n";
}

}  // namespace

TEST_CASE("an intermediate of rows 4 KiB long is laid out with a line after each row") {
  // Rows of 1024 floats: 4 KiB, the 64 sets' stride; 16 floats pad each to the next set.
  CHECK(apply_row_padding(column_sum_of_exp(8, 1024, "1024")) == expect(column_sum_of_exp(8, 1024, "1040")));
  // Rows of 2048 floats: two set strides.
  CHECK(apply_row_padding(column_sum_of_exp(8, 2048, "2048")) == expect(column_sum_of_exp(8, 2048, "2064")));
}

TEST_CASE("row_padding leaves a buffer alone where its rows already spread over the sets") {
  SUBCASE("rows of 1000 floats") {
    const std::string text = column_sum_of_exp(8, 1000, "1000");
    CHECK(apply_row_padding(text) == parse_text(text));
  }
  SUBCASE("rows of 512 floats: half the stride, so rows alternate between two sets") {
    const std::string text = column_sum_of_exp(8, 512, "512");
    CHECK(apply_row_padding(text) == parse_text(text));
  }
  SUBCASE("a single row") {
    const std::string text = column_sum_of_exp(1, 1024, "1024");
    CHECK(apply_row_padding(text) == parse_text(text));
  }
  SUBCASE("an L1 of 128 sets: rows of 1024 floats are half its stride") {
    Target wide = test::avx2_l1_32k_8way();
    wide.l1d_bytes = 64 << 10;
    const std::string text = column_sum_of_exp(8, 1024, "1024");
    CHECK(apply_row_padding(text, wide) == parse_text(text));
  }
}

TEST_CASE("a root of the graph keeps its layout: it is the result the user reads") {
  const std::string text =
      "%nr = CONST i64 [8]\n%nc = CONST i64 [1024]\n%x = BUFFER f32 [(1 8192)]\n"
      "%ri = RANGE i64 %nr [axis 0 loop]\n%rk = RANGE i64 %nc [axis 1 loop]\n"
      "%a = MUL i64 %ri, %nc\n%at = ADD i64 %a, %rk\n%ix = INDEX f32* %x, %at\n%lx = LOAD f32 %ix\n"
      "%e = EXP2 f32 %lx\n%root = BUFFERIZE f32 %e, %ri, %rk [(8 1024)]\n%sink = SINK bool %root\n";
  CHECK(apply_row_padding(text) == parse_text(text));
}
