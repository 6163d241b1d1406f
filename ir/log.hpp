#pragma once
// loom's own named spdlog logger ("loom"), writing to stderr. loom never logs
// through spdlog's default logger: that one belongs to the host program, and
// loom must not change its sinks, level or format. LOOM_LOG sets the level.
#include <spdlog/logger.h>

namespace loom {

// The logger, with LOOM_LOG (or a loom::Context) applied.
spdlog::logger& log();

namespace detail {
// The same logger without consulting the flags: for ir/flags.cpp, which sets its level.
spdlog::logger& raw_log();
}  // namespace detail

}  // namespace loom
