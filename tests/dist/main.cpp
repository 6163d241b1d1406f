// The distributed tests' main: joins the job (loom::dist::Process; each rank of
// `mpirun -np N test_dist` runs every test case, and the cases' collectives meet
// across ranks), then runs doctest as tests/main.cpp does, each rank with a
// kernel cache directory of its own.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <loom/dist.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  loom::dist::Process job(argc, argv);
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/loom-test-cache-XXXXXX";
  if (!mkdtemp(dir.data())) return 1;
  setenv("LOOM_CACHE_DIR", dir.c_str(), 1);
  doctest::Context context(argc, argv);
  // Only rank 0 reports passes; every rank reports its failures.
  if (loom::dist::rank() != 0) context.setOption("minimal", true);
  const int result = context.run();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return result;
}
