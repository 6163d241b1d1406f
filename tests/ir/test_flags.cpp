// The flag registry: the table, value checks, and scoped overrides that nest
// and come off in any order.
#include "ir/flags.hpp"
#include "ir/log.hpp"
#include "support/error_message.hpp"

#include <doctest/doctest.h>
#include <spdlog/spdlog.h>

#include <string>

using namespace loom;
using test::error_of;

TEST_CASE("every flag of the table has a canonical name, with or without the LOOM_ prefix") {
  CHECK(flag_table().size() == 21);
  for (const auto& row : flag_table()) {
    CHECK(detail::canonical_flag_name(row.name) == row.name);
    CHECK(detail::canonical_flag_name(row.name.substr(5)) == row.name);
    CHECK(!row.values.empty());
    CHECK(!row.effect.empty());
  }
  CHECK(detail::canonical_flag_name("DEBGU").empty());
  CHECK(detail::canonical_flag_name("LOOM_").empty());
}

TEST_CASE("values a flag cannot take are named with what was expected") {
  CHECK(detail::flag_value_error("LOOM_DEBUG", "6") == "");
  CHECK(detail::flag_value_error("LOOM_DEBUG", "7") == "expected a whole number in [0, 6]");
  CHECK(detail::flag_value_error("LOOM_DEBUG", "2x") != "");
  CHECK(detail::flag_value_error("LOOM_DEBUG", " 2") != "");
  CHECK(detail::flag_value_error("LOOM_NOOPT", "2") == "expected a whole number in [0, 1]");
  for (const char* bad : {"0", "-1", "abc", "2x", "1025", "99999999999"}) {
    CAPTURE(bad);
    CHECK(detail::flag_value_error("LOOM_THREADS", bad) == "expected a whole number in [1, 1024]");
  }
  CHECK(detail::flag_value_error("LOOM_THREADS", "") == "");
  CHECK(detail::flag_value_error("LOOM_LOG", "warn") == "");
  CHECK(detail::flag_value_error("LOOM_LOG", "error") == "");
  CHECK(detail::flag_value_error("LOOM_LOG", "loud") ==
        "expected trace, debug, info, warn, error, critical or off");
  CHECK(detail::flag_value_error("LOOM_DUMP_DIR", "/tmp/x") == "");
  for (const char* flag : {"LOOM_JIT_CACHE_BYTES", "LOOM_CACHE_BYTES"}) {
    CAPTURE(flag);
    for (const char* good : {"0", "4096", "64K", "256M", "1G", "17179869183G"}) {
      CAPTURE(good);
      CHECK(detail::flag_value_error(flag, good) == "");
    }
    for (const char* bad : {"", "-1", "64KB", "M", "1T", "17179869184G", "99999999999999999999"}) {
      CAPTURE(bad);
      CHECK(detail::flag_value_error(flag, bad) ==
            "expected a number of bytes, optionally followed by K, M or G (like 64M)");
    }
  }
}

TEST_CASE("LOOM_JIT_CACHE_BYTES and LOOM_CACHE_BYTES read bytes with binary suffixes") {
  CHECK(Flags{}.cache_bytes == uint64_t{1} << 30);  // the disk cache's default bound: 1G
  for (const auto& [text, bytes] : {std::pair{"1000", uint64_t{1000}}, std::pair{"64K", uint64_t{65536}},
                                    std::pair{"3M", uint64_t{3} << 20}, std::pair{"2G", uint64_t{2} << 30}}) {
    const uint64_t token = detail::push_flag_overrides({{"JIT_CACHE_BYTES", text}, {"CACHE_BYTES", text}});
    CHECK(flags()->jit_cache_bytes == bytes);
    CHECK(flags()->cache_bytes == bytes);
    detail::pop_flag_overrides(token);
  }
}

TEST_CASE("overrides apply on top of the environment, nest, and pop in any order") {
  const int base = flags()->debug;
  const uint64_t a =
      detail::push_flag_overrides({{"DEBUG", "3"}, {"LOOM_DISABLE", "range_merge, load_collapse"}});
  CHECK(flags()->debug == 3);
  CHECK(flags()->disabled("range_merge"));
  CHECK(flags()->disabled("load_collapse"));
  CHECK_FALSE(flags()->disabled("range"));
  const uint64_t b = detail::push_flag_overrides({{"DEBUG", "5"}, {"PCONTIG", "3"}});
  CHECK(flags()->debug == 5);
  CHECK(flags()->pcontig == 3);
  CHECK(flags()->disabled("range_merge"));
  detail::pop_flag_overrides(a);  // the older one first: the newer one still holds
  CHECK(flags()->debug == 5);
  CHECK_FALSE(flags()->disabled("range_merge"));
  detail::pop_flag_overrides(b);
  CHECK(flags()->debug == base);
  CHECK(flags()->pcontig == 0);
}

TEST_CASE("a snapshot never changes once taken") {
  const auto before = flags();
  const uint64_t t = detail::push_flag_overrides({{"NOOPT", "1"}});
  CHECK(flags()->noopt);
  CHECK(before->noopt == false);
  detail::pop_flag_overrides(t);
}

TEST_CASE("an unknown flag or a bad value is an error naming both, and changes nothing") {
  const int base = flags()->debug;
  CHECK(error_of([] {
          detail::push_flag_overrides({{"DEBGU", "1"}});
        }) == "Context: no flag is called 'DEBGU' (docs/env.md lists loom's flags)");
  CHECK(error_of([] {
          detail::push_flag_overrides({{"DEBUG", "1"}, {"THREADS", "0"}});
        }) == "Context: LOOM_THREADS='0': expected a whole number in [1, 1024]");
  CHECK(flags()->debug == base);
}

TEST_CASE("LOOM_LOG sets the level of loom's own logger only") {
  const auto host_level = spdlog::default_logger()->level();
  const auto loom_level = log().level();
  const uint64_t t = detail::push_flag_overrides({{"LOG", "error"}});
  CHECK(log().level() == spdlog::level::err);
  CHECK(log().name() == "loom");
  CHECK(spdlog::default_logger()->level() == host_level);
  detail::pop_flag_overrides(t);
  CHECK(log().level() == loom_level);
}

TEST_CASE("LOOM_BEAM takes a width, LOOM_BEAM_BUDGET seconds with a fraction") {
  CHECK(Flags{}.beam == 0);  // off by default
  CHECK(detail::flag_value_error("LOOM_BEAM", "4") == "");
  CHECK(detail::flag_value_error("LOOM_BEAM", "65") == "expected a whole number in [0, 64]");
  for (const char* good : {"0", "2.5", "0.05", "30"})
    CHECK(detail::flag_value_error("LOOM_BEAM_BUDGET", good) == "");
  for (const char* bad : {"-1", "x", "1s", ""})
    CHECK(detail::flag_value_error("LOOM_BEAM_BUDGET", bad) ==
          "expected a number of seconds, 0 or more (like 2.5)");
  const uint64_t token = detail::push_flag_overrides({{"BEAM_BUDGET", "0.25"}, {"BEAM", "3"}});
  CHECK(flags()->beam_budget == 0.25);
  CHECK(flags()->beam == 3);
  detail::pop_flag_overrides(token);
}

TEST_CASE("LOOM_DIST_TIMEOUT takes seconds above 0, 300 by default") {
  CHECK(Flags{}.dist_timeout == 300);
  for (const char* good : {"300", "2", "0.5"})
    CHECK(detail::flag_value_error("LOOM_DIST_TIMEOUT", good) == "");
  for (const char* bad : {"0", "-1", "x", "5s", ""})
    CHECK(detail::flag_value_error("LOOM_DIST_TIMEOUT", bad) ==
          "expected a number of seconds, more than 0 (like 300 or 2.5)");
  const uint64_t token = detail::push_flag_overrides({{"DIST_TIMEOUT", "2.5"}});
  CHECK(flags()->dist_timeout == 2.5);
  detail::pop_flag_overrides(token);
}
