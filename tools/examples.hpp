#pragma once
// loom-dump's built-in workloads (--example NAME), each a program in the
// inline language of tools/expression.hpp, so `--example` prints what it runs.
#include <string>
#include <vector>

namespace loom::tools {

struct Example {
  std::string name;     // matmul, softmax, onehot-gather, mla, ...
  std::string summary;  // one line for --help
  std::string source;   // the program
};

const std::vector<Example>& examples();

// The example called `name`; throws loom::Error listing the names if none is.
const Example& find_example(const std::string& name);

}  // namespace loom::tools
