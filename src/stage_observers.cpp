#include "src/stage_observers.hpp"

#include "ir/log.hpp"
#include "ir/pass_observer.hpp"
#include "ir/text.hpp"
#include "src/dump_files.hpp"
#include "src/pass_log.hpp"

#include <mutex>

namespace loom::detail {

namespace {

void observe(const PassEvent& e) {
  const std::shared_ptr<const Flags> f = flags();
  if (f->debug >= 5)
    if (std::string text = pass_log_text(e); !text.empty()) log().info("{}", text);
  if (!f->dump_dir.empty())
    dump_stage_file(f->dump_dir, e.kernel.empty() ? "graph" : e.kernel, e.pass, "uop", to_text(e.after));
}

// One registration shared by every live StageObservers.
std::mutex mu;
int users = 0;
uint64_t token = 0;

}  // namespace

StageObservers::StageObservers(const Flags& flags) {
  if (flags.debug < 5 && flags.dump_dir.empty()) return;
  std::lock_guard lock(mu);
  if (users++ == 0) token = add_pass_observer(observe);
  registered_ = true;
}

StageObservers::~StageObservers() {
  if (!registered_) return;
  std::lock_guard lock(mu);
  if (--users == 0) remove_pass_observer(token);
}

}  // namespace loom::detail
