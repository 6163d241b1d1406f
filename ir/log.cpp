#include "ir/log.hpp"

#include "ir/flags.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace loom {

namespace detail {
spdlog::logger& raw_log() {
  // Not registered with spdlog, so the host's spdlog::set_level or drop_all never touch it.
  // Colour only when stderr is a terminal (the sink's automatic mode).
  static auto* logger = new spdlog::logger("loom", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  return *logger;
}
}  // namespace detail

spdlog::logger& log() {
  (void)flags();  // the first read applies LOOM_LOG and reports bad LOOM_* variables
  return detail::raw_log();
}

}  // namespace loom
