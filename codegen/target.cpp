#include "codegen/target.hpp"

#include <llvm/ADT/StringMap.h>
#include <llvm/TargetParser/Host.h>

#include <cstdlib>
#include <fstream>

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
// A common L3 per core complex (AMD's CCX, a mid-size Intel part's whole L3).
constexpr int64_t kDefaultL3Bytes = int64_t{32} << 20;

int64_t detect_l3() {
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    int level = 0;
    std::string size;
    if (!(std::ifstream(dir + "level") >> level) || level != 3 || !(std::ifstream(dir + "size") >> size))
      continue;
    const int64_t n = std::atoll(size.c_str());
    const char unit = size.empty() ? ' ' : size.back();
    const int64_t bytes = unit == 'K' ? n << 10 : unit == 'M' ? n << 20 : n;
    if (bytes > 0) return bytes;
  }
  return kDefaultL3Bytes;
}
}  // namespace

// Bytes a core's L1/L2 moves a cycle, stores and loads of a streamed buffer together
// (two 64-byte lines per cycle at best; streaming a buffer out and back sustains half).
constexpr double kCacheBytesPerCycle = 64;
// Vector ALU ops a core issues a cycle (two FMA pipes).
constexpr double kVectorOpsPerCycle = 2;

double ops_per_byte(int vector_bytes) {
  return kVectorOpsPerCycle * (vector_bytes / 4.0) / kCacheBytesPerCycle;
}

int64_t host_l3_bytes() {
  static const int64_t bytes = detect_l3();
  return bytes;
}
int host_vector_bytes() { return host().bytes; }
int vector_registers(int vector_bytes) { return vector_bytes >= 64 ? 32 : 16; }
std::string host_vector_isa() { return host().isa; }

}  // namespace loom
