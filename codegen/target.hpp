#pragma once
// What the optimiser needs to know of the host CPU: the width of its SIMD
// registers, from the features LLVM detects (the same ones the JIT compiles for).
#include <cstdint>
#include <string>

namespace loom {

// Bytes in one SIMD register: 64 with AVX-512, 32 with AVX/AVX2, 16 otherwise.
int host_vector_bytes();
// SIMD registers an x86-64 core has of `vector_bytes` width: 32 zmm with AVX-512
// (64 bytes), 16 ymm or xmm otherwise.
int vector_registers(int vector_bytes);
// Bytes of the L3 cache a core shares, from Linux's sysfs (the per-CCX size on
// AMD, where sysconf reports the package's); kDefaultL3Bytes if it cannot tell.
int64_t host_l3_bytes();
// The host's name for the width, for logs and docs: "avx512", "avx2", "sse".
std::string host_vector_isa();

}  // namespace loom
