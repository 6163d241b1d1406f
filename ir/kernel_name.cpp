#include "ir/kernel_name.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace loom {

namespace {

// A range's size as a name part: the constant, a variable's name, or `n`.
std::string size_part(const UOpPtr& range) {
  const UOpPtr& end = range->src.at(0);
  if (end->is_const()) return std::to_string(end->const_int());
  if (end->op == Op::DEFINE_VAR) {
    std::string name = end->get<VarArg>().name;
    std::erase_if(name, [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); });
    if (!name.empty()) return name;
  }
  return "n";
}

std::string hash_hex(const UOpPtr& kernel) { return fmt::format("{:016x}", kernel->hash()); }

}  // namespace

std::string kernel_name(const UOpPtr& kernel) {
  if (!kernel) throw Error("kernel_name: the kernel AST is null");
  std::vector<UOpPtr> outputs, reduces;
  bool has_reduce = false;
  for (const UOpPtr& u : toposort(kernel)) {
    has_reduce |= u->op == Op::REDUCE;
    if (u->op == Op::RANGE) (u->get<AxisArg>().kind == AxisKind::Reduce ? reduces : outputs).push_back(u);
  }
  auto by_id = [](const UOpPtr& a, const UOpPtr& b) { return a->get<AxisArg>().id < b->get<AxisArg>().id; };
  std::stable_sort(outputs.begin(), outputs.end(), by_id);
  std::stable_sort(reduces.begin(), reduces.end(), by_id);
  std::string name = has_reduce ? "r" : "E";
  for (const auto* group : {&outputs, &reduces})
    for (const UOpPtr& r : *group) name += "_" + size_part(r);
  return outputs.empty() && reduces.empty() ? name + "_1" : name;
}

std::vector<std::string> kernel_names(const std::vector<UOpPtr>& kernels) {
  std::vector<std::string> names;
  std::map<std::string, std::set<std::string>> hashes_by_name;  // distinct kernels per base name
  for (const UOpPtr& k : kernels) {
    names.push_back(kernel_name(k));
    hashes_by_name[names.back()].insert(hash_hex(k));
  }
  // Per shared name, the shortest hash prefix (from 4 digits) that tells its kernels apart.
  std::map<std::string, size_t> digits;
  for (const auto& [name, hashes] : hashes_by_name) {
    if (hashes.size() < 2) continue;
    size_t d = 4;
    auto distinct = [&](size_t n) {
      std::set<std::string> prefixes;
      for (const std::string& h : hashes) prefixes.insert(h.substr(0, n));
      return prefixes.size() == hashes.size();
    };
    while (d < 16 && !distinct(d)) ++d;
    digits[name] = d;
  }
  for (size_t i = 0; i < kernels.size(); ++i)
    if (auto it = digits.find(names[i]); it != digits.end())
      names[i] += "_h" + hash_hex(kernels[i]).substr(0, it->second);
  return names;
}

}  // namespace loom
