#pragma once
// Compiled kernels that outlive the process: one object file per kernel under
// LOOM_CACHE_DIR (default $XDG_CACHE_HOME/loom, else ~/.cache/loom; "off"
// disables it), reloaded with LLJIT::addObjectFile in a fraction of a
// millisecond instead of being compiled again.
//
// The caller's key text must name everything the object depends on (the
// engine gives the kernel's text and its codegen options); the cache adds
// loom's version, the backend's identity (runtime/backend.hpp: the compiler's
// version, the host CPU and its features) and a format version, so a stale
// object never loads. A file is named by the 128-bit hash
// of that full key and holds the full key itself, checked on load, so even a
// hash collision cannot load the wrong kernel.
//
// Files are written whole to a temporary name and renamed into place, so
// several processes may share one directory and a reader sees an old file or a
// new one, never half of one. A truncated or corrupt file (checksum) is
// ignored, and the next store replaces it. Failing to read or write the cache
// is never an error: loom compiles instead, and logs why at debug level.
#include <optional>
#include <string>

namespace loom {

struct DiskObject {
  std::string symbol;  // the kernel function's name inside the object
  std::string object;  // a relocatable object file for this host
};

class DiskCache {
 public:
  // `dir` empty or "off": a cache that finds and stores nothing.
  // `backend_identity`: Backend::cache_identity of the objects' backend.
  DiskCache(std::string dir, std::string backend_identity);
  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }

  std::optional<DiskObject> find(const std::string& key) const;
  void store(const std::string& key, const DiskObject& entry) const;
  // The file `key` is stored in (for tests and tools).
  std::string path_of(const std::string& key) const;

 private:
  std::string full_key(const std::string& key) const;
  std::string dir_;
  std::string backend_;
};

struct Flags;
// The directory LOOM_CACHE_DIR names in `flags`: the flag's value, the default
// when unset, or "" when it is "off".
std::string disk_cache_dir(const Flags& flags);

}  // namespace loom
