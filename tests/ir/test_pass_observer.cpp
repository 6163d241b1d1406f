// Pass observers: registered, called in order with the event, removed.
#include "ir/pass_observer.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace loom;

TEST_CASE("observers see each event in the order they were added, until removed") {
  CHECK_FALSE(pass_observed());
  std::vector<std::string> seen;
  const UOpPtr a = const_int(DType::Int64, 1), b = const_int(DType::Int64, 2);
  const uint64_t first = add_pass_observer([&](const PassEvent& e) {
    seen.push_back("1:" + std::string(e.pass) + ":" + std::string(e.kernel));
    CHECK(e.before == a);
    CHECK(e.after == b);
  });
  const uint64_t second =
      add_pass_observer([&](const PassEvent& e) { seen.push_back("2:" + std::string(e.pass)); });
  CHECK(pass_observed());
  notify_pass({PassLevel::Kernel, "simplify", "E_4", a, b});
  remove_pass_observer(first);
  notify_pass({PassLevel::Graph, "buffer_removal", "", a, b});
  remove_pass_observer(second);
  CHECK_FALSE(pass_observed());
  notify_pass({PassLevel::Graph, "ignored", "", a, b});
  CHECK(seen == std::vector<std::string>{"1:simplify:E_4", "2:simplify", "2:buffer_removal"});
}
