// The disk cache on its own: round trips, stale and corrupt files, atomic
// replacement, several writers at once, and "off".
#include "runtime/disk_cache.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
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

namespace {
// The objects (.o files) in `dir`, by name.
std::vector<std::string> objects_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".o") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}
std::string name_of(const DiskCache& cache, const std::string& key) {
  return fs::path(cache.path_of(key)).filename().string();
}
// Keys of one length, so every entry's file has the same size.
std::string key_of(int i) { return "kernel " + std::to_string(100 + i); }
// The bound counts whole 4 KiB blocks, as du does.
uint64_t on_disk(const std::string& path) { return (fs::file_size(path) + 4095) / 4096 * 4096; }
void last_used(const std::string& path, std::chrono::minutes ago) {
  fs::last_write_time(path, fs::file_time_type::clock::now() - ago);
}
// Stores entries 0 to n - 1, entry i last used n - i hours ago (0 the oldest); the size
// each takes on disk.
uint64_t store_aged(const DiskCache& cache, int n) {
  for (int i = 0; i < n; ++i) {
    cache.store(key_of(i), {"sym", std::string(1000, 'o')});
    last_used(cache.path_of(key_of(i)), std::chrono::minutes(60 * (n - i)));
  }
  return on_disk(cache.path_of(key_of(0)));
}
}  // namespace

TEST_CASE("past its bound the cache deletes the least recently used objects, down to three quarters") {
  TempDir dir("bounded");
  const DiskCache unbounded(dir.path, kBackend);
  const uint64_t file = store_aged(unbounded, 10);
  CHECK(unbounded.trim().files == 0);  // no bound: nothing goes
  REQUIRE(objects_in(dir.path).size() == 10);

  // 10 files over a bound of 5: deleted oldest first until at most 3.75 files' bytes remain.
  const DiskCache bounded(dir.path, kBackend, 5 * file);
  const DiskCache::Trimmed t = bounded.trim();
  CHECK(t.files == 7);
  CHECK(t.bytes == 7 * file);
  std::vector<std::string> kept{name_of(bounded, key_of(7)), name_of(bounded, key_of(8)),
                                name_of(bounded, key_of(9))};
  std::sort(kept.begin(), kept.end());
  CHECK(objects_in(dir.path) == kept);
  CHECK(bounded.trim().files == 0);  // within the bound now
}

TEST_CASE("a load makes an object recently used, so the bound deletes others first") {
  TempDir dir("recency");
  const DiskCache cache(dir.path, kBackend);
  const uint64_t file = store_aged(cache, 3);
  REQUIRE(cache.find(key_of(0)));  // the oldest stored is the latest used
  const DiskCache bounded(dir.path, kBackend, 2 * file + file / 2);
  CHECK(bounded.trim().files == 2);
  CHECK(objects_in(dir.path) == std::vector<std::string>{name_of(cache, key_of(0))});
}

TEST_CASE("the bound deletes a dead writer's temporary files, and no other file") {
  TempDir dir("temporaries");
  const DiskCache cache(dir.path, kBackend, 1 << 20);
  cache.store(key_of(0), {"sym", "object"});
  write(dir.path + "/.tmp.1.2.3", "left by a writer that died");
  last_used(dir.path + "/.tmp.1.2.3", std::chrono::minutes(120));
  write(dir.path + "/.tmp.4.5.6", "a writer still writing");
  write(dir.path + "/notes.txt", "not the cache's");
  CHECK(cache.trim().files == 1);
  CHECK_FALSE(fs::exists(dir.path + "/.tmp.1.2.3"));
  CHECK(fs::exists(dir.path + "/.tmp.4.5.6"));
  CHECK(fs::exists(dir.path + "/notes.txt"));
  CHECK(cache.find(key_of(0)));
}

TEST_CASE("stores keep a bounded directory near its bound, the newest objects kept") {
  TempDir dir("stores");
  const DiskCache probe(dir.path, kBackend);
  probe.store(key_of(0), {"sym", std::string(1000, 'o')});
  const uint64_t file = on_disk(probe.path_of(key_of(0)));
  fs::remove(probe.path_of(key_of(0)));
  // A bound of 4 files: a store checks it after every half file stored, so it never
  // holds more than 4 files' bytes after a store, and the file just stored stays.
  const DiskCache cache(dir.path, kBackend, 4 * file);
  for (int i = 0; i < 12; ++i) {
    cache.store(key_of(i), {"sym", std::string(1000, 'o')});
    const auto objects = objects_in(dir.path);
    CHECK(objects.size() <= 4);
    CHECK(std::find(objects.begin(), objects.end(), name_of(cache, key_of(i))) != objects.end());
  }
  CHECK(objects_in(dir.path).size() >= 3);
  CHECK(cache.find(key_of(11)));
}
