// loom::Autocast: a thread's autocast dtype, saved and restored by each scope.
#include <loom/autocast.hpp>
#include <loom/error.hpp>

#include <fmt/format.h>

namespace loom {

namespace {
// Per thread, as torch.autocast: the graph a thread builds is what the state shapes.
thread_local std::optional<DType> t_autocast;
}  // namespace

Autocast::Autocast(DType dtype, bool enabled) : previous_(t_autocast) {
  if (dtype != DType::BFloat16 && dtype != DType::Float16)
    throw Error(
        fmt::format("Autocast: dtype must be BFloat16 or Float16, got {}", scalar_name(dtype.scalar)));
  t_autocast = enabled ? std::optional<DType>(dtype) : std::nullopt;
}

Autocast::~Autocast() { t_autocast = previous_; }

std::optional<DType> autocast_dtype() { return t_autocast; }

}  // namespace loom
