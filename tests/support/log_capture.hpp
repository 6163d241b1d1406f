#pragma once
// Captures what loom's logger writes while the object lives, so tests read
// LOOM_DEBUG output set through a loom::Context. The logger's own stderr sink
// is muted meanwhile, to keep test output short.
#include "ir/log.hpp"

#include <spdlog/sinks/ostream_sink.h>

#include <memory>
#include <sstream>
#include <string>

namespace loom::test {

class LogCapture {
 public:
  LogCapture() {
    auto& sinks = log().sinks();
    for (auto& s : sinks) {
      saved_levels_.push_back(s->level());
      s->set_level(spdlog::level::off);
    }
    sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    sink_->set_pattern("%v");
    sinks.push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = log().sinks();
    sinks.pop_back();
    for (size_t i = 0; i < sinks.size(); ++i) sinks[i]->set_level(saved_levels_[i]);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::string text() {
    log().flush();
    return out_.str();
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  std::vector<spdlog::level::level_enum> saved_levels_;
};

}  // namespace loom::test
