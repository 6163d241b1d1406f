#pragma once
// LOOM_PROFILE=file.json: a Chrome trace-event file of what loom spends time on
// (scheduling, each stage, each kernel's compilation and each kernel run), one
// track per thread. Perfetto (ui.perfetto.dev) and chrome://tracing open it.
//
//   { ProfileSpan span("compile", kernel_name); ... }   // one complete event
//
// Off (LOOM_PROFILE empty), a span costs one read of the flags. Events collect
// in memory; profile_flush() appends them to the file, which is valid JSON
// after every flush (the engine flushes at the end of each realize).
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom {

class ProfileSpan {
 public:
  // Starts a span named `name` in `category` (schedule, stage, compile, run, ...)
  // if LOOM_PROFILE is set now.
  ProfileSpan(std::string_view category, std::string name);
  ~ProfileSpan();  // records the span on the calling thread's track
  ProfileSpan(const ProfileSpan&) = delete;
  ProfileSpan& operator=(const ProfileSpan&) = delete;

  bool active() const { return !file_.empty(); }
  // Extra facts shown with the event (kernel name, GFLOP/s, ...).
  void arg(std::string key, std::string value);
  void arg(std::string key, double value);

 private:
  std::string file_;  // the profile this span goes to; empty: not profiling
  std::string category_, name_;
  double start_us_ = 0;
  std::vector<std::pair<std::string, std::string>> text_args_;
  std::vector<std::pair<std::string, double>> number_args_;
};

// Writes every event recorded so far to its file (creating it on first use).
// Thread-safe. A file that cannot be written is a warning on loom's logger.
void profile_flush();

}  // namespace loom
