#include "fuzz/fuzz.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace loom::fuzz {

void Coverage::merge(const Coverage& o) {
  using Counts = std::map<std::string, int64_t>;
  const std::pair<Counts*, const Counts*> pairs[] = {{&api_ops, &o.api_ops},
                                                     {&uops, &o.uops},
                                                     {&dtypes, &o.dtypes},
                                                     {&ranks, &o.ranks},
                                                     {&stages, &o.stages},
                                                     {&kernel_checks, &o.kernel_checks},
                                                     {&gradient_checks, &o.gradient_checks},
                                                     {&targets, &o.targets},
                                                     {&recompute, &o.recompute}};
  for (const auto& [mine, theirs] : pairs)
    for (const auto& [k, v] : *theirs) (*mine)[k] += v;
  programs += o.programs;
  kernels += o.kernels;
  bounds_checked += o.bounds_checked;
  gradients += o.gradients;
  max_recompute = std::max(max_recompute, o.max_recompute);
}

namespace {
std::string line(const char* title, const std::map<std::string, int64_t>& m) {
  std::string out = fmt::format("  {:<16}", title);
  for (const auto& [k, v] : m) out += fmt::format(" {}:{}", k, v);
  return out + "\n";
}
}  // namespace

std::string Coverage::report() const {
  std::string out =
      fmt::format("coverage: {} programs, {} kernels run, {} under LOOM_CHECK_BOUNDS, {} gradients checked\n",
                  programs, kernels, bounds_checked, gradients);
  out += line("api ops", api_ops);
  out += line("uops", uops);
  out += line("dtypes", dtypes);
  out += line("ranks", ranks);
  out += line("stages", stages);
  out += line("kernel checks", kernel_checks);
  out += line("gradient probes", gradient_checks);
  out += line("targets", targets);
  out += line("recompute ratio", recompute);
  out += fmt::format("  {:<16} {:.3f}\n", "largest ratio", max_recompute);
  return out;
}

}  // namespace loom::fuzz
