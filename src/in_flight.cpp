#include "src/in_flight.hpp"

#include "ir/log.hpp"
#include "ir/profile.hpp"

#include <loom/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace loom::detail {

namespace {
double in_flight_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

InFlight::~InFlight() {
  for (Item& i : items_) try {
      comm::wait(i.request);
    } catch (...) {  // a destructor must not throw; the run's own error is on its way
    }
}

void InFlight::start(const PlanCollective& c, const void* in, void* out,
                     const std::vector<const void*>& pieces, int debug) {
  ProfileSpan span("collective", c.name + " start");
  if (pieces.size() != c.pieces.size())
    throw Error(fmt::format("engine: {} has {} pieces, given {}", c.name, c.pieces.size(), pieces.size()));
  // A bucket's pieces, and zeros in the gaps between their 64-byte slots, so the
  // collective never reduces uninitialised memory.
  const auto item = static_cast<size_t>(c.dtype.itemsize());
  auto* bytes = static_cast<std::byte*>(out);
  int64_t filled = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const BucketPiece& p = c.pieces[i];
    std::memset(bytes + filled * item, 0, static_cast<size_t>(p.offset - filled) * item);
    std::memcpy(bytes + p.offset * item, pieces[i], static_cast<size_t>(p.size) * item);
    filled = p.offset + p.size;
  }
  if (!pieces.empty()) std::memset(bytes + filled * item, 0, static_cast<size_t>(c.size - filled) * item);
  items_.push_back(
      {c, comm::start_collective(c.arg, in, out, c.dtype, c.size), std::chrono::steady_clock::now(), debug});
}

void InFlight::wait(const PlanCollective& c) {
  const auto it =
      std::find_if(items_.begin(), items_.end(), [&](const Item& i) { return i.c.name == c.name; });
  if (it == items_.end()) throw Error("engine: waiting for " + c.name + ", which was not started");
  ProfileSpan span("collective", c.name);
  const auto t0 = std::chrono::steady_clock::now();
  comm::wait(it->request);
  if (it->debug >= 2)
    log().info("  {} {:.3f} ms from start to end ({:.3f} ms waited), {} elements of {}{}", c.name,
               in_flight_ms(it->started), in_flight_ms(t0), c.size, to_string(c.dtype),
               c.input == c.output ? ", in place" : "");
  items_.erase(it);
}

void InFlight::progress() {
  for (Item& i : items_) comm::test(i.request);
}

}  // namespace loom::detail
