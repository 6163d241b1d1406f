#include "runtime/disk_cache.hpp"

#include "ir/flags.hpp"
#include "ir/key_hasher.hpp"
#include "ir/log.hpp"

#include <fmt/format.h>

#include <unistd.h>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

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

// A name no other writer uses: this process, this thread, a counter.
std::string temp_name(const std::string& dir) {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{}/.tmp.{}.{:x}.{}", dir, getpid(),
                     std::hash<std::thread::id>()(std::this_thread::get_id()), counter.fetch_add(1));
}
}  // namespace

DiskCache::DiskCache(std::string dir, std::string backend_identity)
    : dir_(dir == "off" ? std::string() : std::move(dir)), backend_(std::move(backend_identity)) {}

std::string DiskCache::full_key(const std::string& key) const {
  return fmt::format("loom {}\nsource {}\n{}\nformat {}\n{}", LOOM_VERSION, LOOM_SOURCE_ID, backend_, kMagic,
                     key);
}

std::string DiskCache::path_of(const std::string& key) const {
  return fmt::format("{}/{}.o", dir_, KeyHasher().text(full_key(key)).key().hex());
}

std::optional<DiskObject> DiskCache::find(const std::string& key) const {
  if (!enabled()) return std::nullopt;
  const std::string path = path_of(key);
  const std::string bytes = read_file(path);
  if (bytes.empty()) return std::nullopt;
  std::string why;
  auto entry = decode(bytes, full_key(key), why);
  if (!entry) log().debug("disk cache: ignoring {}: {}", path, why);
  return entry;
}

void DiskCache::store(const std::string& key, const DiskObject& entry) const {
  if (!enabled()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  const std::string tmp = temp_name(dir_), path = path_of(key);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    const std::string bytes = encode(full_key(key), entry);
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
  }
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
