// Kernels persisted in LOOM_CACHE_DIR, end to end: a second process loads every
// kernel and compiles none; a corrupt file is ignored and rewritten; results
// are the same either way.
#include "check.hpp"

#include "runtime/disk_cache.hpp"
#include "runtime/kernel_cache.hpp"
#include "src/schedule_cache.hpp"

#include <loom/context.hpp>

#include <fmt/format.h>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace loom;
using test::iota;
using test::make;
namespace fs = std::filesystem;

namespace {
// A small network's forward pass: several kernels, each new to a fresh process.
std::vector<float> workload() {
  Tensor x = make(DType::Float32, iota(40, 0.05, -1), {10, 4});
  Tensor w1 = make(DType::Float32, iota(24, -0.1, 1), {4, 6});
  Tensor w2 = make(DType::Float32, iota(12, 0.2, -1), {6, 2});
  return (x.matmul(w1).relu().matmul(w2).softmax(1) * 7.5f).to_vector<float>();
}

std::string cache_dir(const std::string& name) {
  const std::string dir = std::string(std::getenv("LOOM_CACHE_DIR")) + "/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Forgets every compiled kernel and plan of this process, as a new process would start.
void forget_everything() {
  detail::schedule_cache().clear();
  kernel_cache().clear();
}

// Runs this test binary again, alone on the child test case below, with `dir`
// as its cache; returns what the child printed on its "child:" line.
std::string run_child(const std::string& dir) {
  const std::string self = fs::read_symlink("/proc/self/exe");
  const std::string cmd =
      fmt::format("LOOM_TEST_CACHE_DIR='{}' LOOM_TEST_CHILD=1 '{}' -tc='disk cache: child*' 2>&1", dir, self);
  FILE* out = popen(cmd.c_str(), "r");
  REQUIRE(out);
  std::string text;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, out)) text.append(buf, n);
  CHECK(pclose(out) == 0);
  const size_t at = text.find("child: ");
  REQUIRE_MESSAGE(at != std::string::npos, text);
  return text.substr(at + 7, text.find('\n', at) - at - 7);
}
}  // namespace

TEST_CASE("disk cache: child of the two-process test (runs only when started by it)") {
  if (!std::getenv("LOOM_TEST_CHILD")) return;
  const std::vector<float> values = workload();
  const Counters c = counters();
  std::string line = fmt::format("compiled={} loaded={} values=", c.kernels_compiled, c.kernels_loaded);
  for (float v : values) line += fmt::format("{:a},", v);
  std::printf("child: %s\n", line.c_str());
}

TEST_CASE("a second process with the same LOOM_CACHE_DIR loads every kernel and compiles none") {
  const std::string dir = cache_dir("two_processes");
  const std::string first = run_child(dir), second = run_child(dir);
  CAPTURE(first);
  CAPTURE(second);
  CHECK(first.rfind("compiled=0 ", 0) != 0);  // the first process compiled
  CHECK(first.find(" loaded=0 ") != std::string::npos);
  CHECK(second.rfind("compiled=0 loaded=", 0) == 0);  // the second compiled nothing
  CHECK(second.find(" loaded=0 ") == std::string::npos);
  CHECK(first.substr(first.find("values=")) == second.substr(second.find("values=")));  // bitwise
}

TEST_CASE("kernels forgotten in memory come back from disk; with LOOM_CACHE_DIR=off they compile again") {
  Context ctx{{"CACHE_DIR", cache_dir("reload")}};
  forget_everything();
  const std::vector<float> expected = workload();
  forget_everything();
  auto before = counters();
  CHECK(workload() == expected);
  CHECK(counters().kernels_compiled == before.kernels_compiled);
  CHECK(counters().kernels_loaded > before.kernels_loaded);
  {
    Context off{{"CACHE_DIR", "off"}};
    forget_everything();
    before = counters();
    CHECK(workload() == expected);
    CHECK(counters().kernels_compiled > before.kernels_compiled);
    CHECK(counters().kernels_loaded == before.kernels_loaded);
  }
}

TEST_CASE(
    "a corrupted cache file is ignored, the kernel compiled again and the file rewritten; results stay "
    "right") {
  const std::string dir = cache_dir("corrupted");
  Context ctx{{"CACHE_DIR", dir}};
  forget_everything();
  const std::vector<float> expected = workload();
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))  // the kernels' objects (not the bound's stamp)
    if (e.path().extension() == ".o") files.push_back(e.path());
  REQUIRE(files.size() >= 2);
  std::vector<std::string> good;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    good.push_back(s.str());
  }
  // One file truncated, every other one with a flipped byte in its object code.
  for (size_t i = 0; i < files.size(); ++i) {
    std::string bad = i == 0 ? good[i].substr(0, good[i].size() / 3) : good[i];
    if (i != 0) bad[bad.size() / 2] ^= 0x5a;
    std::ofstream(files[i], std::ios::binary | std::ios::trunc)
        .write(bad.data(), static_cast<std::streamsize>(bad.size()));
  }
  forget_everything();
  const auto before = counters();
  CHECK(workload() == expected);
  CHECK(counters().kernels_loaded == before.kernels_loaded);  // nothing corrupt was loaded
  CHECK(counters().kernels_compiled - before.kernels_compiled == files.size());
  for (size_t i = 0; i < files.size(); ++i) {  // rewritten whole
    std::ifstream in(files[i], std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    CHECK(s.str() == good[i]);
  }
}
