#include "ir/profile.hpp"

#include "ir/flags.hpp"
#include "support/log_capture.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

using namespace loom;

namespace {

std::filesystem::path temp_file(const std::string& stem) {
  return std::filesystem::temp_directory_path() / (stem + "_" + std::to_string(getpid()) + ".json");
}

nlohmann::json load(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Profiling to `path` while the object lives.
struct Profiling {
  uint64_t token;
  explicit Profiling(const std::filesystem::path& path)
      : token(detail::push_flag_overrides({{"PROFILE", path.string()}})) {}
  ~Profiling() { detail::pop_flag_overrides(token); }
};

}  // namespace

TEST_CASE("spans become complete events with their args; the file is JSON after every flush") {
  const auto path = temp_file("loom_spans");
  std::filesystem::remove(path);
  {
    Profiling on(path);
    {
      ProfileSpan outer("schedule", "outer");
      CHECK(outer.active());
      ProfileSpan inner("stage", "inner");
      inner.arg("kernel", std::string("E_4"));
      inner.arg("GFLOP/s", 2.5);
    }
    profile_flush();
    const nlohmann::json first = load(path);
    std::vector<nlohmann::json> spans;
    for (const auto& e : first.at("traceEvents"))
      if (e.at("ph") == "X") spans.push_back(e);
    REQUIRE(spans.size() == 2);
    CHECK(spans[0].at("name") == "inner");  // recorded when it ends, before the outer one
    CHECK(spans[0].at("cat") == "stage");
    CHECK(spans[0].at("args").at("kernel") == "E_4");
    CHECK(spans[0].at("args").at("GFLOP/s") == 2.5);
    CHECK(spans[1].at("name") == "outer");
    CHECK(spans[1].at("ts").get<double>() <= spans[0].at("ts").get<double>());
    CHECK(spans[1].at("dur").get<double>() >= spans[0].at("dur").get<double>());
    { ProfileSpan later("run", "later"); }
    profile_flush();
  }
  const nlohmann::json second = load(path);
  int spans = 0;
  for (const auto& e : second.at("traceEvents")) spans += e.at("ph") == "X";
  CHECK(spans == 3);
  std::filesystem::remove(path);
}

TEST_CASE("each thread gets its own track, named in the file") {
  const auto path = temp_file("loom_threads");
  std::filesystem::remove(path);
  {
    Profiling on(path);
    { ProfileSpan here("run", "here"); }
    std::thread([] { ProfileSpan there("run", "there"); }).join();
    profile_flush();
  }
  const nlohmann::json trace = load(path);
  std::map<std::string, int> track;
  std::set<int> named;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X") track[e.at("name")] = e.at("tid");
    if (e.at("ph") == "M" && e.at("name") == "thread_name") named.insert(e.at("tid").get<int>());
  }
  REQUIRE(track.size() == 2);
  CHECK(track["here"] != track["there"]);
  CHECK(named.count(track["here"]));
  CHECK(named.count(track["there"]));
  std::filesystem::remove(path);
}

TEST_CASE("without LOOM_PROFILE a span records nothing; an unwritable file is a warning") {
  ProfileSpan off("run", "off");
  CHECK_FALSE(off.active());
  test::LogCapture capture;
  {
    Profiling on("/nonexistent-dir/loom.json");
    { ProfileSpan lost("run", "lost"); }
    profile_flush();
  }
  CHECK(capture.text().find("LOOM_PROFILE: cannot write '/nonexistent-dir/loom.json'") != std::string::npos);
}
