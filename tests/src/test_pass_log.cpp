#include "src/pass_log.hpp"

#include "ir/text.hpp"

#include <doctest/doctest.h>

using namespace loom;

TEST_CASE("a pass event prints its heading and the graph before and after; no change prints nothing") {
  const UOpPtr x = const_int(DType::Int64, 3), y = x + const_int(DType::Int64, 4);
  const UOpPtr folded = const_int(DType::Int64, 7);
  const std::string text = detail::pass_log_text({PassLevel::Kernel, "fold", "E_4", y, folded});
  CHECK(text ==
        "stage fold, kernel E_4 changed the graph\nbefore:\n" + to_text(y) + "\nafter:\n" + to_text(folded));
  CHECK(detail::pass_log_text({PassLevel::Graph, "fold", "", y, y}) == "");
  CHECK(detail::pass_heading({PassLevel::Graph, "rangeify", "", y, y}) == "stage rangeify");
}
