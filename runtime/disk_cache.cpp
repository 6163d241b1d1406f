#include "runtime/disk_cache.hpp"

#include "ir/flags.hpp"
#include "ir/key_hasher.hpp"
#include "ir/log.hpp"

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <vector>

#include "loom_source_id.hpp"  // generated: LOOM_SOURCE_ID (cmake/source_id.cmake)

#ifndef LOOM_VERSION
#define LOOM_VERSION "unknown"
#endif

namespace loom {

namespace {
namespace fs = std::filesystem;

// File layout: magic, then three length-prefixed strings (full key, symbol,
// object), then the 128-bit checksum of everything before it.
constexpr std::string_view kMagic = "LOOMOBJ1";

void put(std::string& out, const std::string& s) {
  const uint64_t n = s.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out += s;
}

// Reads one length-prefixed string at `pos`; false if the file ends first.
bool take(const std::string& in, size_t& pos, std::string& s) {
  uint64_t n = 0;
  if (in.size() - pos < sizeof n) return false;
  std::memcpy(&n, in.data() + pos, sizeof n);
  pos += sizeof n;
  if (in.size() - pos < n) return false;
  s.assign(in, pos, n);
  pos += n;
  return true;
}

Key128 checksum(std::string_view bytes) { return KeyHasher().text(bytes).key(); }

std::string encode(const std::string& key, const DiskObject& e) {
  std::string out(kMagic);
  put(out, key);
  put(out, e.symbol);
  put(out, e.object);
  const Key128 sum = checksum(out);
  out.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  return out;
}

// The entry in `bytes` if it is whole, uncorrupted and stored under `key`.
std::optional<DiskObject> decode(const std::string& bytes, const std::string& key, std::string& why) {
  if (bytes.size() < kMagic.size() + sizeof(Key128) || bytes.compare(0, kMagic.size(), kMagic) != 0) {
    why = "not a loom object file";
    return std::nullopt;
  }
  const size_t body = bytes.size() - sizeof(Key128);
  Key128 sum;
  std::memcpy(&sum, bytes.data() + body, sizeof sum);
  if (!(sum == checksum(std::string_view(bytes).substr(0, body)))) {
    why = "checksum mismatch (truncated or corrupt)";
    return std::nullopt;
  }
  const std::string head = bytes.substr(0, body);
  size_t pos = kMagic.size();
  std::string stored_key;
  DiskObject e;
  if (!take(head, pos, stored_key) || !take(head, pos, e.symbol) || !take(head, pos, e.object) ||
      pos != head.size()) {
    why = "malformed";
    return std::nullopt;
  }
  if (stored_key != key) {
    why = "another kernel's file (hash collision)";
    return std::nullopt;
  }
  return e;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// An object's file name ends so; a writer's file starts so until it is renamed into place.
constexpr std::string_view kObjectSuffix = ".o";
constexpr std::string_view kTempPrefix = ".tmp.";

// A name no other writer uses: this process, this thread, a counter.
std::string temp_name(const std::string& dir) {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{}/{}{}.{:x}.{}", dir, kTempPrefix, getpid(),
                     std::hash<std::thread::id>()(std::this_thread::get_id()), counter.fetch_add(1));
}

// Touched when a process checks the directory's bound: a process's first store checks
// it only if no process did within kCheckInterval. A writer's temporary file older
// than kTempAge was left by a writer that died.
constexpr std::string_view kCheckedStamp = ".checked";
constexpr auto kCheckInterval = std::chrono::minutes(10);
constexpr auto kTempAge = std::chrono::hours(1);

// What a file takes on disk, as du counts it: whole blocks of a filesystem's usual size
// (most of the cache's objects are a few KiB, so their sizes alone undercount it by a third).
constexpr uint64_t kDiskBlock = 4096;
uint64_t on_disk(uint64_t bytes) { return (bytes + kDiskBlock - 1) / kDiskBlock * kDiskBlock; }

bool older_than(const fs::path& path, fs::file_time_type::duration age) {
  std::error_code ec;
  const auto t = fs::last_write_time(path, ec);
  return ec || fs::file_time_type::clock::now() - t > age;
}

// Per directory, the bytes this process stored there since it last checked the bound
// (absent: never checked). Thread-safe; a directory's entry is a few dozen bytes.
struct StoredSinceCheck {
  std::mutex mu;
  std::unordered_map<std::string, uint64_t> bytes;
};
StoredSinceCheck& stored_since_check() {
  static StoredSinceCheck s;
  return s;
}
}  // namespace

DiskCache::DiskCache(std::string dir, std::string backend_identity, uint64_t max_bytes)
    : dir_(dir == "off" ? std::string() : std::move(dir)),
      backend_(std::move(backend_identity)),
      max_bytes_(max_bytes) {}

std::string DiskCache::full_key(const std::string& key) const {
  return fmt::format("loom {}\nsource {}\n{}\nformat {}\n{}", LOOM_VERSION, LOOM_SOURCE_ID, backend_, kMagic,
                     key);
}

std::string DiskCache::path_of(const std::string& key) const {
  return fmt::format("{}/{}{}", dir_, KeyHasher().text(full_key(key)).key().hex(), kObjectSuffix);
}

std::optional<DiskObject> DiskCache::find(const std::string& key) const {
  if (!enabled()) return std::nullopt;
  const std::string path = path_of(key);
  const std::string bytes = read_file(path);
  if (bytes.empty()) return std::nullopt;
  std::string why;
  auto entry = decode(bytes, full_key(key), why);
  if (!entry) {
    log().debug("disk cache: ignoring {}: {}", path, why);
    return entry;
  }
  std::error_code ec;  // the file's time is its last use: the bound deletes the least recent first
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);
  return entry;
}

void DiskCache::store(const std::string& key, const DiskObject& entry) const {
  if (!enabled()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  const std::string tmp = temp_name(dir_), path = path_of(key);
  const std::string bytes = encode(full_key(key), entry);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      log().debug("disk cache: cannot write {} ({})", tmp, std::strerror(errno));
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);  // atomic: readers see the old file or this one
  if (ec) {
    log().debug("disk cache: cannot rename {} to {}: {}", tmp, path, ec.message());
    fs::remove(tmp, ec);
    return;
  }
  check_bound(on_disk(bytes.size()));
}

void DiskCache::check_bound(uint64_t stored) const {
  if (max_bytes_ == 0) return;
  const fs::path stamp = fs::path(dir_) / kCheckedStamp;
  {
    StoredSinceCheck& since = stored_since_check();
    const std::lock_guard lock(since.mu);
    const auto [it, first] = since.bytes.try_emplace(dir_, 0);
    it->second += stored;
    if (first ? !older_than(stamp, kCheckInterval) : it->second < max_bytes_ / 8) return;
    it->second = 0;
  }
  std::ofstream{stamp.string(), std::ios::trunc};  // creating it sets its time: checked now
  const Trimmed t = trim();
  if (t.files) log().debug("disk cache: deleted {} files ({} bytes) from {}", t.files, t.bytes, dir_);
}

DiskCache::Trimmed DiskCache::trim() const {
  Trimmed out;
  if (!enabled()) return out;
  struct Object {
    fs::path path;
    uint64_t bytes;
    fs::file_time_type used;
  };
  std::vector<Object> objects;
  uint64_t total = 0;
  std::error_code ec;
  auto remove = [&](const fs::path& path, uint64_t bytes) {
    std::error_code gone;  // another process may have deleted it first
    if (fs::remove(path, gone)) ++out.files, out.bytes += bytes;
  };
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code stat;
    const uintmax_t size = it->file_size(stat);
    if (stat) continue;  // deleted meanwhile, or not a regular file
    const uint64_t bytes = on_disk(size);
    if (name.starts_with(kTempPrefix)) {
      if (older_than(it->path(), kTempAge)) remove(it->path(), bytes);
    } else if (name.ends_with(kObjectSuffix)) {
      const auto used = it->last_write_time(stat);
      if (stat) continue;
      objects.push_back({it->path(), bytes, used});
      total += bytes;
    }
  }
  if (max_bytes_ == 0 || total <= max_bytes_) return out;
  std::sort(objects.begin(), objects.end(), [](const Object& a, const Object& b) { return a.used < b.used; });
  const uint64_t keep = max_bytes_ / 4 * 3;
  for (const Object& o : objects) {
    if (total <= keep) break;
    remove(o.path, o.bytes);
    total -= o.bytes;
  }
  return out;
}

std::string disk_cache_dir(const Flags& flags) {
  const std::string& dir = flags.cache_dir;
  if (dir == "off") return "";
  if (!dir.empty()) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/loom";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/loom";
  return "";
}

}  // namespace loom
