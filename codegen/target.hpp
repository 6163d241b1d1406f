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
// What writing a value to memory and reading it back costs, in the ALU ops that
// would recompute it: the arithmetic a core issues while one byte goes to its
// cache, 2 vector ops a cycle of host_vector_bytes()/4 float lanes each, over
// kCacheBytesPerCycle (buffer_removal's compute-vs-memory ratio, docs/pipeline.md):
// 0.5 with AVX-512, 0.25 with AVX2.
double ops_per_byte(int vector_bytes);
// The host's name for the width, for logs and docs: "avx512", "avx2", "sse".
std::string host_vector_isa();

}  // namespace loom
