#pragma once
// The kernel-level checker: hung on libloom's pass observer (ir/pass_observer.hpp)
// for its lifetime, it evaluates each kernel before and after every kernel-level
// pass with the kernel-IR interpreter, on the same seeded random buffers (three sets), and
// compares what every buffer holds afterwards. A pass that changes a kernel's
// result is named with the kernel. It also records which stages ran.
#include "fuzz/fuzz.hpp"
#include "ir/pass_observer.hpp"

#include <cstdint>
#include <mutex>
#include <optional>

namespace loom::fuzz {

class KernelChecker {
 public:
  // check=false: only record the stages that ran.
  KernelChecker(bool check, Coverage* coverage);
  ~KernelChecker();
  KernelChecker(const KernelChecker&) = delete;
  KernelChecker& operator=(const KernelChecker&) = delete;

  // The first pass that changed a kernel's result, if any.
  std::optional<Failure> failure() const;

 private:
  void observe(PassLevel level, std::string_view pass, std::string_view kernel, const UOpPtr& before,
               const UOpPtr& after);
  bool check_;
  Coverage* coverage_;
  uint64_t token_;
  mutable std::mutex mu_;
  std::optional<Failure> failure_;
};

// Evaluates `before` and `after` on the same random buffers, three sets (a kernel over
// variables at several bindings: its bounds, 1 and the middle); "" if every buffer
// ends equal (floats within the approximate-class tolerance), "skipped: why" if
// the interpreter cannot run them, else what differs. `plain_after`: `after` is
// numeric_lowering's, so an op whose plain instruction would be undefined on the
// values it sees there (a division by 0: KernelRunFacts::plain_undefined) fails too.
std::string compare_kernels(const UOpPtr& before, const UOpPtr& after, uint64_t seed,
                            bool plain_after = false);

}  // namespace loom::fuzz
