// The Opt vocabulary's text form (ir/opt.hpp): what LOOM_DEBUG=3, LOOM_DUMP_DIR and
// loom-dump print, and what a recorded list is read back from.
#include "ir/opt.hpp"

#include "loom/error.hpp"

#include <doctest/doctest.h>

using namespace loom;

TEST_CASE("Opt: a list prints as kind(axis, amount) and reads back to the same Opts") {
  const std::vector<Opt> opts{{OptKind::Pad, 3, 16},        {OptKind::Upcast, 3, 16},
                              {OptKind::Upcast, 2, 0},      {OptKind::Unroll, 7, 4},
                              {OptKind::BlockSum, 8, 256},  {OptKind::Blocks, 1, 4},
                              {OptKind::Peel, 2},           {OptKind::MatmulTile, 2, 2, 6},
                              {OptKind::GemvTile, 1, 4},    {OptKind::ColumnSumTile, 0, 4},
                              {OptKind::DotTile, 5, 8, 6},  {OptKind::ExpandSum, 4},
                              {OptKind::AlignSides, -1, 8}, {OptKind::Parallel, 0}};
  const std::string text = to_string(opts);
  CHECK(text ==
        "[pad(3, 16), upcast(3, 16), upcast(2, 0), unroll(7, 4), block_sum(8, 256), blocks(1, 4), "
        "peel(2), matmul_tile(2, 2, rows=6), "
        "gemv_tile(1, 4), column_sum_tile(0, 4), dot_tile(5, 8, rows=6), expand_sum(4), align_sides(8), "
        "parallel(0)]");
  CHECK(parse_opts(text) == opts);
  CHECK(parse_opts("[]").empty());
  CHECK(to_string(std::vector<Opt>{}) == "[]");
}

TEST_CASE("Opt: text that is not a list of Opts is an error naming it") {
  CHECK_THROWS_WITH_AS(parse_opts("[upcast(3, 16"), doctest::Contains("upcast(3, 16"), Error);
  CHECK_THROWS_WITH_AS(parse_opts("[spin(3, 16)]"), doctest::Contains("unknown Opt kind 'spin'"), Error);
  CHECK_THROWS_WITH_AS(parse_opts("[upcast(3)]"), doctest::Contains("upcast takes 2"), Error);
  CHECK_THROWS_WITH_AS(parse_opts("[upcast(x, 16)]"), doctest::Contains("'x'"), Error);
  CHECK_THROWS_WITH_AS(parse_opts("upcast(3, 16)"), doctest::Contains("not a list of Opts"), Error);
  CHECK_THROWS_WITH_AS(parse_opts("[parallel(0) parallel(1)]"), doctest::Contains("expected ','"), Error);
}
