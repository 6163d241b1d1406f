// LOOM_PROFILE end to end: a realize under a Context writes a Chrome trace-event
// file that parses as JSON and holds scheduling, each stage, compilation and
// each kernel run (and its slices), each on its thread's track.
#include "check.hpp"

#include <loom/context.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>

using namespace loom;
using test::iota;
using test::make;

namespace {

nlohmann::json load_trace(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);  // throws (and fails the test) unless the whole file is JSON
}

// The complete ("X") events of `category`.
std::vector<nlohmann::json> events(const nlohmann::json& trace, const std::string& category) {
  std::vector<nlohmann::json> out;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("cat") == category) out.push_back(e);
  return out;
}

}  // namespace

TEST_CASE("LOOM_PROFILE writes scheduling, stages, compilation and kernel runs, with their threads") {
  const auto path =
      std::filesystem::temp_directory_path() / ("loom_profile_" + std::to_string(getpid()) + ".json");
  std::filesystem::remove(path);
  Tensor a = make(DType::Float32, iota(128 * 64), {128, 64});
  {
    Context ctx{{"PROFILE", path.string()}};
    Tensor y = (a * 5.125 - 2).exp().sum(1);
    y.realize();
  }
  const nlohmann::json trace = load_trace(path);
  REQUIRE(events(trace, "schedule").size() == 1);
  std::set<std::string> stages;
  for (const auto& e : events(trace, "stage")) stages.insert(e.at("name"));
  CHECK(stages.count("rangeify"));
  CHECK(stages.count("kernel_split"));
  const auto compiles = events(trace, "compile");
  REQUIRE(compiles.size() == 1);
  CHECK(compiles[0].at("name") == "r_128_64");
  const auto runs = events(trace, "run");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].at("name") == "r_128_64");
  CHECK(runs[0].at("args").contains("GFLOP/s"));
  CHECK(runs[0].at("args").contains("GB/s"));
  for (const auto& e : trace.at("traceEvents")) {
    CHECK(e.at("pid").is_number_integer());
    if (e.at("ph") == "X") {
      CHECK(e.at("tid").is_number_integer());
      CHECK(e.at("dur").get<double>() >= 0);
    }
  }
  // Its slices, on whichever threads ran them, cover the parallel range once.
  double covered = 0;
  for (const auto& e : events(trace, "slice")) {
    CHECK(e.at("name") == "r_128_64");
    CHECK(e.at("tid").is_number_integer());
    covered += e.at("args").at("end").get<double>() - e.at("args").at("begin").get<double>();
  }
  CHECK(covered == 128);
  // The run nests inside the realize on the same thread.
  const auto realize = events(trace, "realize");
  REQUIRE(realize.size() == 1);
  CHECK(realize[0].at("tid") == runs[0].at("tid"));
  CHECK(realize[0].at("ts").get<double>() <= runs[0].at("ts").get<double>());

  // A second realize appends to the same file, which stays valid JSON.
  {
    Context ctx{{"PROFILE", path.string()}};
    Tensor z = (a * 5.125 - 2).exp().sum(1);  // cached: runs without compiling
    z.realize();
  }
  const nlohmann::json again = load_trace(path);
  CHECK(events(again, "run").size() == 2);
  CHECK(events(again, "compile").size() == 1);
  std::filesystem::remove(path);
}
