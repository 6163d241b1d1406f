#pragma once
// The one exception type loom throws. Messages name the op, the shapes, axes or
// dtypes involved, and what was expected.
#include <stdexcept>
#include <string>

namespace loom {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace loom
