#include <loom/variable.hpp>

#include "ir/dim_expr.hpp"
#include "ir/uop.hpp"
#include "runtime/buffer.hpp"

#include <fmt/format.h>

namespace loom {

namespace {
// Symbolic sizes exist only once a variable does: the first one hands the cache of
// combined sizes (ir/dim_expr.hpp) to loom::empty_cache, like any other spare holder.
void release_dim_cache_on_empty() {
  [[maybe_unused]] static const uint64_t holder = add_spare_holder([] { clear_dim_cache(); });
}
}  // namespace

Variable::Variable(std::string name, int64_t min, int64_t max) {
  release_dim_cache_on_empty();
  if (name.empty()) throw Error("Variable: the name is empty (expected a name such as \"T\")");
  if (min < 0 || min > max)
    throw Error(
        fmt::format("Variable '{}': bounds [{}, {}] are not a range of sizes (expected 0 <= min <= max)",
                    name, min, max));
  var_ = make_var(name, min, max);
}

const std::string& Variable::name() const { return var_->get<VarArg>().name; }
int64_t Variable::min() const { return var_->get<VarArg>().min; }
int64_t Variable::max() const { return var_->get<VarArg>().max; }

Dim Variable::bind(int64_t value) const {
  if (value < min() || value > max())
    throw Error(fmt::format("Variable '{}': cannot bind {}, outside its bounds [{}, {}]", name(), value,
                            min(), max()));
  return Dim(bind_var(var_, value));
}

}  // namespace loom
