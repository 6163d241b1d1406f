#pragma once
// The message of the loom::Error a callable throws: how tests check that bad
// input is reported, and reported well.
#include <loom/error.hpp>

#include <string>

namespace loom::test {

// "" if `f` throws no loom::Error.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace loom::test
