// The kernel passes, in order, each reported to the pass observers so dumps
// (LOOM_DEBUG=5, LOOM_DUMP_DIR) and the tests' kernel-IR checker see every step.
#include "codegen/codegen.hpp"
#include "codegen/numeric_lowering.hpp"
#include "codegen/register_tile.hpp"
#include "ir/pass_observer.hpp"

#include <fmt/format.h>

#include <array>

namespace loom {

namespace {

struct KernelPass {
  std::string_view name;
  bool optional;  // may be switched off by LOOM_DISABLE (required ones lower what the emitter cannot take)
  UOpPtr (*run)(const UOpPtr&, const Flags&, const KernelLowering& how);
};

// half_widening runs first and is required: the passes after it and the emitter see
// half-precision values only in loads, stores, selects and conversions.
// The expander may be switched off: the linearizer runs upcast and unroll
// ranges as plain loops then. numeric_lowering runs last, on every op the
// passes before it made (a REDUCE MAX's updates, a lane fold's MAX), and is
// required: the emitter refuses what it did not lower.
const std::array<KernelPass, 9>& kernel_passes() {
  static const std::array<KernelPass, 9> passes{{
      {"half_widening", false,
       [](const UOpPtr& k, const Flags&, const KernelLowering&) { return widen_halves(k); }},
      {"optimizer", true,
       [](const UOpPtr& k, const Flags& f, const KernelLowering& how) {
         std::optional<std::vector<Opt>> opts;
         if (how.opts) opts = *how.opts;
         return optimize_kernel(k, OptimizerOptions{!f.noopt, target_of(f), std::move(opts)}, how.applied);
       }},
      {"gated_select", true,
       [](const UOpPtr& k, const Flags&, const KernelLowering&) { return fold_gated_selects(k); }},
      {"reduce_bounds", true,
       [](const UOpPtr& k, const Flags&, const KernelLowering&) { return bound_reduces(k); }},
      {"transcendental", true,
       [](const UOpPtr& k, const Flags&, const KernelLowering&) { return lower_transcendental(k); }},
      {"expander", true,
       [](const UOpPtr& k, const Flags&, const KernelLowering&) { return expand_lanes(k); }},
      {"lower_reduce", false,
       [](const UOpPtr& k, const Flags& f, const KernelLowering&) {
         return lower_reduce(k, target_of(f).vector_bytes);
       }},
      {"split_vectors", true,
       [](const UOpPtr& k, const Flags& f, const KernelLowering&) {
         return split_vectors(k, target_of(f).vector_bytes);
       }},
      {"numeric_lowering", false,
       [](const UOpPtr& k, const Flags& f, const KernelLowering&) {
         return lower_numerics(k, target_of(f).exact_float_max());
       }},
  }};
  return passes;
}

}  // namespace

const std::vector<std::string_view>& kernel_pass_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const auto& p : kernel_passes()) out.push_back(p.name);
    return out;
  }();
  return names;
}

const std::vector<std::string_view>& optional_kernel_pass_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const auto& p : kernel_passes())
      if (p.optional) out.push_back(p.name);
    return out;
  }();
  return names;
}

int64_t matmul_panel_bytes(const Flags& flags) {
  if (flags.noopt || flags.disabled("optimizer")) return 0;
  return tile_panel_bytes(target_of(flags));
}

int64_t matmul_panel_rows(const Flags& flags) {
  return matmul_panel_bytes(flags) > 0 ? tile_panel_rows(target_of(flags)) : 0;
}

UOpPtr lower_kernel(const UOpPtr& kernel, std::string_view name, const Flags& flags,
                    std::vector<Opt>* applied) {
  return lower_kernel(kernel, name, flags, KernelLowering{applied});
}

UOpPtr lower_kernel(const UOpPtr& kernel, std::string_view name, const Flags& flags,
                    const KernelLowering& how) {
  if (how.applied) how.applied->clear();
  UOpPtr k = kernel;
  for (const KernelPass& pass : kernel_passes()) {
    if (pass.optional && flags.disabled(pass.name)) continue;
    const UOpPtr before = k;
    k = pass.run(k, flags, how);
    if (how.observed) notify_pass({PassLevel::Kernel, pass.name, name, before, k});
  }
  return k;
}

}  // namespace loom
