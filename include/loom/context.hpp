#pragma once
// loom::Context overrides LOOM_* flags (docs/env.md) for the code in its scope,
// like tinygrad's Context:
//
//   {
//     loom::Context ctx{{"DEBUG", 5}, {"DISABLE", "range_merge,load_collapse"}};
//     y.realize();   // dumps every stage, with two stages off
//   }                // the flags are back as they were
//
// Names may omit the LOOM_ prefix. The override is process-wide (kernels compile
// and run on other threads too), nests, and ends with the object. An unknown
// flag or a value it cannot take is a loom::Error naming both.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

namespace loom {

class Context {
 public:
  // A flag's value: text, a whole number or a bool (true is 1).
  struct Value {
    std::string text;
    Value(const char* v) : text(v) {}
    Value(std::string v) : text(std::move(v)) {}
    Value(int v) : text(std::to_string(v)) {}
    Value(bool v) : text(v ? "1" : "0") {}
  };
  Context(std::initializer_list<std::pair<std::string, Value>> flags);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

 private:
  uint64_t token_;
};

}  // namespace loom
