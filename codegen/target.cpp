#include "codegen/target.hpp"

#include <llvm/ADT/StringMap.h>
#include <llvm/TargetParser/Host.h>

namespace loom {

namespace {
struct HostVectors {
  int bytes = 16;
  std::string isa = "sse";
};

HostVectors detect() {
  const auto features = llvm::sys::getHostCPUFeatures();
  auto has = [&](const char* f) {
    const auto it = features.find(f);
    return it != features.end() && it->second;
  };
  if (has("avx512f")) return {64, "avx512"};
  if (has("avx2")) return {32, "avx2"};
  if (has("avx")) return {32, "avx"};
  return {};
}

const HostVectors& host() {
  static const HostVectors h = detect();
  return h;
}
}  // namespace

int host_vector_bytes() { return host().bytes; }
int vector_registers(int vector_bytes) { return vector_bytes >= 64 ? 32 : 16; }
std::string host_vector_isa() { return host().isa; }

}  // namespace loom
