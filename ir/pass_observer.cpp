#include "ir/pass_observer.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace loom {

namespace {

using Observers = std::vector<std::pair<uint64_t, PassObserver>>;

// Copy-on-write list: notify_pass takes a snapshot, so observers run without the
// lock and may add or remove observers themselves.
struct Registry {
  std::mutex mu;
  uint64_t next = 1;
  std::atomic<std::shared_ptr<const Observers>> list{std::make_shared<const Observers>()};
  std::atomic<bool> any{false};
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: stages may run during exit
  return *r;
}

}  // namespace

uint64_t add_pass_observer(PassObserver f) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto next = std::make_shared<Observers>(*r.list.load());
  const uint64_t token = r.next++;
  next->emplace_back(token, std::move(f));
  r.list.store(std::move(next));
  r.any.store(true, std::memory_order_release);
  return token;
}

void remove_pass_observer(uint64_t token) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto next = std::make_shared<Observers>(*r.list.load());
  std::erase_if(*next, [&](const auto& entry) { return entry.first == token; });
  r.any.store(!next->empty(), std::memory_order_release);
  r.list.store(std::move(next));
}

bool pass_observed() { return registry().any.load(std::memory_order_acquire); }

void notify_pass(const PassEvent& e) {
  if (!pass_observed()) return;
  const std::shared_ptr<const Observers> list = registry().list.load();
  for (const auto& [token, f] : *list) f(e);
}

}  // namespace loom
