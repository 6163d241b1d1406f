#pragma once
// loom::Variable: a named size with inclusive bounds, such as a sequence length
// T in [1, 4096]. bind(n) gives the size T=n, a loom::Dim usable where a size is
// taken (docs/symbolic.md):
//
//   const loom::Variable T("T", 1, 4096);
//   auto x = cache.slice(1, 0, T.bind(17));  // shape [4, T=17, 64]
#include <loom/dim.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace loom {

class Variable {
 public:
  // Error unless the name is non-empty and 0 <= min <= max.
  Variable(std::string name, int64_t min, int64_t max);

  const std::string& name() const;
  int64_t min() const;
  int64_t max() const;
  // The size this variable names, bound to `value`; Error naming the variable
  // when `value` is outside [min, max].
  Dim bind(int64_t value) const;

 private:
  std::shared_ptr<const UOp> var_;  // DEFINE_VAR
};

}  // namespace loom
