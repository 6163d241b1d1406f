#include "ir/profile.hpp"

#include "ir/flags.hpp"
#include "ir/log.hpp"

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

namespace loom {

namespace {

double now_us() {
  static const auto epoch = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - epoch).count();
}

// Small, stable track numbers: 1 for the first thread that records, and so on.
int thread_track() {
  static std::atomic<int> next{1};
  thread_local const int track = next.fetch_add(1);
  return track;
}

// One open trace file. Its text always ends with kTail, which the next flush
// overwrites, so the file parses as JSON between flushes.
struct TraceFile {
  std::FILE* f = nullptr;
  bool has_events = false;
  std::vector<int> named_tracks;
};
constexpr std::string_view kTail = "\n]}\n";

struct Profiler {
  std::mutex mu;
  std::vector<std::pair<std::string, nlohmann::json>> pending;  // (file, event)
  std::map<std::string, TraceFile> files;

  void write(const std::string& path, const std::vector<nlohmann::json>& events) {
    TraceFile& t = files[path];
    if (!t.f) {
      t.f = std::fopen(path.c_str(), "w");
      if (!t.f) {
        log().warn("LOOM_PROFILE: cannot write '{}'; the profile is lost", path);
        return;
      }
      const nlohmann::json process{
          {"name", "process_name"}, {"ph", "M"}, {"pid", getpid()}, {"args", {{"name", "loom"}}}};
      std::fprintf(t.f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n%s", process.dump().c_str());
    } else {
      std::fseek(t.f, -static_cast<long>(kTail.size()), SEEK_END);
    }
    for (const nlohmann::json& e : events) {
      const int tid = e["tid"];
      if (std::find(t.named_tracks.begin(), t.named_tracks.end(), tid) == t.named_tracks.end()) {
        t.named_tracks.push_back(tid);
        const nlohmann::json name{{"name", "thread_name"},
                                  {"ph", "M"},
                                  {"pid", getpid()},
                                  {"tid", tid},
                                  {"args", {{"name", "thread " + std::to_string(tid)}}}};
        std::fprintf(t.f, ",\n%s", name.dump().c_str());
      }
      std::fprintf(t.f, ",\n%s", e.dump().c_str());
    }
    std::fwrite(kTail.data(), 1, kTail.size(), t.f);
    std::fflush(t.f);
  }
};

Profiler& profiler() {
  static Profiler* p = [] {
    std::atexit(profile_flush);  // what the last realize left unflushed
    return new Profiler();       // never destroyed: spans may end during exit
  }();
  return *p;
}

}  // namespace

ProfileSpan::ProfileSpan(std::string_view category, std::string name) {
  const std::shared_ptr<const Flags> f = flags();
  if (f->profile.empty()) return;
  file_ = f->profile;
  category_ = category;
  name_ = std::move(name);
  start_us_ = now_us();
}

void ProfileSpan::arg(std::string key, std::string value) {
  if (active()) text_args_.emplace_back(std::move(key), std::move(value));
}

void ProfileSpan::arg(std::string key, double value) {
  if (active()) number_args_.emplace_back(std::move(key), value);
}

ProfileSpan::~ProfileSpan() {
  if (!active()) return;
  const double end = now_us();
  nlohmann::json args = nlohmann::json::object();
  for (auto& [k, v] : text_args_) args[k] = v;
  for (auto& [k, v] : number_args_) args[k] = v;
  nlohmann::json event{
      {"name", name_},   {"cat", category_},      {"ph", "X"},   {"ts", start_us_}, {"dur", end - start_us_},
      {"pid", getpid()}, {"tid", thread_track()}, {"args", args}};
  Profiler& p = profiler();
  std::lock_guard lock(p.mu);
  p.pending.emplace_back(file_, std::move(event));
}

void profile_flush() {
  Profiler& p = profiler();
  std::lock_guard lock(p.mu);
  if (p.pending.empty()) return;
  std::map<std::string, std::vector<nlohmann::json>> by_file;
  for (auto& [file, event] : p.pending) by_file[file].push_back(std::move(event));
  p.pending.clear();
  for (const auto& [file, events] : by_file) p.write(file, events);
}

}  // namespace loom
