// The disk cache on its own: round trips, stale and corrupt files, atomic
// replacement, several writers at once, and "off".
#include "runtime/disk_cache.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace loom;
namespace fs = std::filesystem;

namespace {
// A fresh directory under the test process's own cache directory.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& name) {
    path = std::string(std::getenv("LOOM_CACHE_DIR")) + "/" + name;
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
size_t files_in(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}
// A backend's cache_identity (runtime/backend.hpp).
const std::string kBackend = "test backend 1\ncpu test";

}  // namespace

TEST_CASE("the tests' own cache directory is a temporary one, never the user's") {
  const std::string dir = std::getenv("LOOM_CACHE_DIR");
  CHECK(dir.find("loom-test-cache-") != std::string::npos);
}

TEST_CASE("an object stored under a key comes back; another key finds nothing") {
  TempDir dir("round_trip");
  const DiskCache cache(dir.path, kBackend);
  CHECK(cache.enabled());
  CHECK_FALSE(cache.find("kernel A"));
  const std::string object(
      "\x7f"
      "ELF\0\1\2 binary",
      14);
  cache.store("kernel A", {"k_a", object});
  const auto hit = cache.find("kernel A");
  REQUIRE(hit);
  CHECK(hit->symbol == "k_a");
  CHECK(hit->object == object);
  CHECK_FALSE(cache.find("kernel B"));
  CHECK(files_in(dir.path) == 1);  // no temporary file left behind
  CHECK(cache.path_of("kernel A").rfind(dir.path + "/", 0) == 0);
}

TEST_CASE("an entry names the build's source identity, so another build of loom never loads it") {
  // The same version with other code (a codegen fix) must compile afresh: the entry's
  // full key, kept in its file and checked on load, names the sources' SHA-256.
  TempDir dir("source_id");
  const DiskCache cache(dir.path, kBackend);
  cache.store("kernel A", {"k_a", "object"});
  std::ifstream in(cache.path_of("kernel A"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = bytes.find("\nsource ");
  REQUIRE(at != std::string::npos);
  const std::string id = bytes.substr(at + 8, 64);
  CHECK(id.size() == 64);
  CHECK(
      std::all_of(id.begin(), id.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }));
}

TEST_CASE("an object stored by one backend is not found by another, in the same directory") {
  TempDir dir("backends");
  const DiskCache one(dir.path, kBackend), other(dir.path, "test backend 2\ncpu test");
  one.store("kernel A", {"k_a", "object of backend 1"});
  CHECK_FALSE(other.find("kernel A"));
  CHECK(one.path_of("kernel A") != other.path_of("kernel A"));
  other.store("kernel A", {"k_a", "object of backend 2"});
  REQUIRE(one.find("kernel A"));
  CHECK(one.find("kernel A")->object == "object of backend 1");
  CHECK(other.find("kernel A")->object == "object of backend 2");
}

TEST_CASE("a truncated, bit-flipped or foreign file is ignored, and the next store replaces it") {
  TempDir dir("corrupt");
  const DiskCache cache(dir.path, kBackend);
  cache.store("k", {"sym", std::string(300, 'x')});
  const std::string path = cache.path_of("k"), good = bytes_of(path);
  for (size_t cut : {size_t{0}, size_t{5}, good.size() / 2, good.size() - 1}) {
    write(path, good.substr(0, cut));
    CHECK_FALSE(cache.find("k"));
  }
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x10;
  write(path, flipped);
  CHECK_FALSE(cache.find("k"));
  write(path, "not an object at all");
  CHECK_FALSE(cache.find("k"));
  // A whole, valid file stored under another key, copied to this key's name.
  cache.store("other", {"sym", "other object"});
  write(path, bytes_of(cache.path_of("other")));
  CHECK_FALSE(cache.find("k"));
  cache.store("k", {"sym", std::string(300, 'x')});
  REQUIRE(cache.find("k"));
  CHECK(cache.find("k")->object == std::string(300, 'x'));
}

TEST_CASE("threads storing and finding one key at once always see a whole entry") {
  TempDir dir("writers");
  const DiskCache cache(dir.path, kBackend);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        cache.store("shared", {"sym", std::string(4096, 'z')});
        if (auto hit = cache.find("shared"); hit && hit->object != std::string(4096, 'z')) ++bad;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(bad == 0);
  CHECK(files_in(dir.path) == 1);
}

TEST_CASE("\"off\" and an empty directory store and find nothing; an unwritable directory is no error") {
  for (const char* off : {"off", ""}) {
    const DiskCache cache(off, kBackend);
    CHECK_FALSE(cache.enabled());
    cache.store("k", {"s", "o"});
    CHECK_FALSE(cache.find("k"));
  }
  const DiskCache unwritable("/proc/loom-cannot-be-here", kBackend);
  unwritable.store("k", {"s", "o"});
  CHECK_FALSE(unwritable.find("k"));
}
