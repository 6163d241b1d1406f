#pragma once
// The check every symbolic-extent test makes (tests/codegen/test_symbolic_extent.cpp,
// test_symbolic_tile.cpp): a kernel over one DEFINE_VAR lowered for a Target and
// compiled once, then run at every binding against the kernel-IR interpreter on the
// kernel as written, so one compiled kernel serves them all.
#include "codegen/codegen.hpp"
#include "codegen/run_kernel.hpp"
#include "tests/support/host_runs.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace loom::test {

// Small values of both signs, whole multiples of a quarter.
inline std::vector<float> ramp(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(static_cast<int64_t>(i * 7 % 13) - 6) * 0.25f;
  return x;
}

// Lowers `kernel` for `target`, compiles it once, and (where the host runs the target's
// instructions) runs it at every binding of its
// one variable (in two slices of its parallel range, the later first) against the
// interpreter on the original kernel, over buffers of
// `slot_floats` floats each (sized for the variable's bound). Returns the Opts the
// optimiser applied.
inline std::vector<Opt> check_bindings(const UOpPtr& kernel, const std::string& name,
                                       const std::string& target, const std::vector<int64_t>& bindings,
                                       const std::vector<size_t>& slot_floats) {
  Flags flags;
  flags.target = target;
  std::vector<Opt> applied;
  const UOpPtr lowered = lower_kernel(kernel, name, flags, &applied);
  const Target& t = target_named(target);
  const KernelFn fn =
      Jit::instance()
          .compile(emit_llvm_ir(lowered, name, EmitOptions{.target = t}), name, JitOptions{.target = target})
          .fn;
  if (!host_runs(target)) return applied;
  for (int64_t n : bindings) {
    INFO(target << " " << name << " n = " << n);
    std::vector<Aligned<float>> bufs;
    for (size_t s = 0; s < slot_floats.size(); ++s) bufs.emplace_back(ramp(slot_floats[s]));
    std::vector<Slot> slots(bufs.begin(), bufs.end());
    std::vector<std::vector<std::byte>> copies;
    std::vector<void*> oracle;
    for (const Slot& s : slots)
      copies.emplace_back(static_cast<std::byte*>(s.data), static_cast<std::byte*>(s.data) + s.bytes);
    for (auto& c : copies) oracle.push_back(c.data());
    interpret_kernel(kernel, oracle.data(), {n});
    std::vector<void*> ptrs;
    for (const Slot& s : slots) ptrs.push_back(s.data);
    // In two slices of the parallel range, as two threads run it: the range's extent
    // is the binding's, and each slice stores only its own outputs.
    const int64_t extent = parallel_extent(lowered, {n}), half = extent / 2;
    const std::vector<int64_t> vars{n};
    fn(ptrs.data(), vars.data(), half, extent);
    fn(ptrs.data(), vars.data(), 0, half);
    for (size_t s = 0; s < slots.size(); ++s) {
      INFO("slot " << s);
      loom::test::detail::check_floats<float>(static_cast<const std::byte*>(slots[s].data), copies[s].data(),
                                              slot_floats[s], true);
    }
  }
  return applied;
}

}  // namespace loom::test
