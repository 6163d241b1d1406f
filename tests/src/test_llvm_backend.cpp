// The LLVM backend (src/llvm_backend.hpp) through the Backend interface alone, as
// the engine uses it: a kernel rendered, compiled, loaded and run; its identity,
// which the disk cache's key holds.
#include "codegen/codegen.hpp"
#include "runtime/backend.hpp"
#include "src/engine.hpp"
#include "support/kernel_builders.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>

using namespace loom;
using namespace loom::kb;

TEST_CASE("kernel_backend renders, compiles and loads a kernel that then computes its values") {
  const Flags flags;
  const auto backend = detail::kernel_backend(flags);
  // out[i] = a[i] / b[i] in Int32: a division the emitter takes only as lower_kernel leaves it.
  auto out = global(0, DType::Int32), a = global(1, DType::Int32), b = global(2, DType::Int32);
  auto i = make_range(4, 0);
  const UOpPtr kernel = sink({end(store(index(out, i), load(index(a, i)) / load(index(b, i))), {i})});
  const UOpPtr lowered = lower_kernel(kernel, "backend_div", flags);
  const std::string source = backend->render(lowered, "backend_div", RenderOptions{});
  CHECK(source.find("define void @backend_div(") != std::string::npos);
  CHECK(backend->source_stage() == "llvm");
  CHECK(backend->source_extension() == "ll");
  const CompiledObject object = backend->compile(lowered, source, "backend_div", CompileOptions{});
  CHECK_FALSE(object.bytes.empty());
  CHECK(object.effort == "bulk");  // an elementwise body run 4 times (docs/pipeline.md §5)
  CHECK(object.assembly.empty());  // only when asked for
  const auto code = backend->load(object.bytes, "backend_div");
  CHECK(code->code_bytes() > 0);
  CHECK(code->footprint_bytes() >= code->code_bytes());
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  alignas(64) int32_t o[16] = {}, x[16] = {7, -7, kMin, 5}, y[16] = {2, 0, -1, -3};
  void* bufs[] = {o, x, y};
  code->fn()(bufs, nullptr, 0, parallel_extent(lowered, {}));
  // 7 / 2 truncates; by 0 gives 0; INT_MIN / -1 wraps to INT_MIN; 5 / -3 truncates toward 0
  CHECK(o[0] == 3);
  CHECK(o[1] == 0);
  CHECK(o[2] == kMin);
  CHECK(o[3] == -1);
}

TEST_CASE("the LLVM backend's cache identity names LLVM's version, the CPU and its features") {
  const std::string id = detail::kernel_backend(Flags{})->cache_identity();
  CHECK(id.rfind("llvm ", 0) == 0);
  CHECK(id.find("\ncpu ") != std::string::npos);
  CHECK(id.find("\nfeatures ") != std::string::npos);
  CHECK(id == detail::kernel_backend(Flags{})->cache_identity());  // the same for every kernel
}
