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
//
// The directory is bounded (LOOM_CACHE_BYTES): a file's modification time is when it
// was last stored or loaded, and past the bound the least recently used files go. A
// store checks the bound the first time a process stores into a directory (unless
// another process checked it within the last ten minutes) and again after each eighth
// of the bound it has stored since, so a directory shared by many short processes, or
// by loom builds whose objects never load again, stays near its bound.
#include <cstddef>
#include <cstdint>
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
  // `max_bytes`: the bound on the directory's objects (0: none).
  DiskCache(std::string dir, std::string backend_identity, uint64_t max_bytes = 0);
  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }

  std::optional<DiskObject> find(const std::string& key) const;
  void store(const std::string& key, const DiskObject& entry) const;
  // The file `key` is stored in (for tests and tools).
  std::string path_of(const std::string& key) const;

  // If the directory's objects take more than `max_bytes` on disk (in 4 KiB blocks, as du
  // counts them), deletes the least recently used ones until they take at most three
  // quarters of it; and, whatever the bound, temporary files a writer left more than an
  // hour ago. What it deleted, in the same blocks.
  struct Trimmed {
    size_t files = 0;
    uint64_t bytes = 0;
  };
  Trimmed trim() const;

 private:
  std::string full_key(const std::string& key) const;
  void check_bound(uint64_t stored) const;
  std::string dir_;
  std::string backend_;
  uint64_t max_bytes_ = 0;
};

struct Flags;
// The directory LOOM_CACHE_DIR names in `flags`: the flag's value, the default
// when unset, or "" when it is "off".
std::string disk_cache_dir(const Flags& flags);

}  // namespace loom
