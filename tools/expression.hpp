#pragma once
// loom-dump's inline language: a few statements that build tensors with the
// Tensor API, so a computation can be dumped without writing C++.
//
//   a = rand(1024, 1024); b = rand(1024, 1024); out = (a * b).sum(1)
//
// docs/loom-dump.md is the reference: statements, operators, functions and
// methods, and which values are inputs and which are outputs.
#include <loom/tensor.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace loom::tools {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

struct Program {
  std::vector<NamedTensor> inputs;   // made by constructors (rand, zeros, ...): realized
  std::vector<NamedTensor> outputs;  // assigned and never read later: lazy, for loom-dump to schedule
};

// Runs the statements of `source`. Throws loom::Error whose message names the
// column (and the line, for a source of several lines) of the first problem,
// followed by the line and a caret under the column:
//   column 17: expected ')' closing the arguments of sum, got ';'
//     out = a.sum(1, ; b
//                    ^
Program run_program(std::string_view source);

}  // namespace loom::tools
