// The tests' main: doctest's, after pointing LOOM_CACHE_DIR at a fresh
// directory of this process's own (removed at exit), so tests never read
// kernels another run left behind nor write into the user's cache, whatever
// LOOM_CACHE_DIR says. A test that starts a second process names the
// directory to share in LOOM_TEST_CACHE_DIR (kept: its creator removes it).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  if (const char* shared = std::getenv("LOOM_TEST_CACHE_DIR")) {
    setenv("LOOM_CACHE_DIR", shared, 1);
    return doctest::Context(argc, argv).run();
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/loom-test-cache-XXXXXX";
  if (!mkdtemp(dir.data())) return 1;
  setenv("LOOM_CACHE_DIR", dir.c_str(), 1);
  const int result = doctest::Context(argc, argv).run();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return result;
}
