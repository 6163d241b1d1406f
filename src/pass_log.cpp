#include "src/pass_log.hpp"

#include "ir/text.hpp"

#include <fmt/format.h>

namespace loom::detail {

std::string pass_heading(const PassEvent& e) {
  if (e.kernel.empty()) return fmt::format("stage {}", e.pass);
  return fmt::format("stage {}, kernel {}", e.pass, e.kernel);
}

std::string pass_log_text(const PassEvent& e) {
  if (e.before == e.after) return "";
  return fmt::format("{} changed the graph\nbefore:\n{}\nafter:\n{}", pass_heading(e), to_text(e.before),
                     to_text(e.after));
}

}  // namespace loom::detail
