#include "src/env.hpp"

#include <cstdlib>
#include <string>

namespace loom::detail {

namespace {
int int_flag(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  try {
    return std::stoi(v);
  } catch (...) {
    return 0;
  }
}
}  // namespace

const Env& env() {
  static const Env e{int_flag("LOOM_DEBUG"), int_flag("LOOM_NOOPT") != 0};
  return e;
}

}  // namespace loom::detail
