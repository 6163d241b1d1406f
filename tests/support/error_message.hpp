#pragma once
// The message of the loom::Error a callable throws: how tests check that bad
// input is reported, and reported well.
#include <loom/error.hpp>

#include <doctest/doctest.h>

#include <initializer_list>
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

// Checks that an error was thrown and its message holds every one of `parts`.
inline void check_message(const std::string& msg, std::initializer_list<const char*> parts) {
  CHECK_MESSAGE(!msg.empty(), "no loom::Error was thrown");
  for (const char* p : parts)
    CHECK_MESSAGE(msg.find(p) != std::string::npos, "'" << p << "' missing from: " << msg);
}

}  // namespace loom::test
