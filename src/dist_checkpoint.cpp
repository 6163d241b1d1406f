// loom::dist::save: rank 0 writes, and its outcome, broadcast to the other ranks,
// is what they wait for: the broadcast returns on a rank only once rank 0 has
// sent it, after the file is complete (renamed from its .partial), and tells
// every rank whether the write failed.
#include <loom/dist.hpp>

#include "ir/collective.hpp"
#include "runtime/communicator.hpp"

#include <fmt/format.h>

#include <string>

namespace loom::dist {

void save(const std::filesystem::path& path, const NamedTensors& tensors) {
  comm::require_job("loom::dist::save");
  std::vector<Tensor> defined;
  for (const auto& [name, t] : tensors)
    if (t.defined()) defined.push_back(t);
  realize(defined);
  int64_t failed = 0;
  std::string error;
  if (rank() == 0) {
    try {
      loom::save(path, tensors);
    } catch (const Error& e) {
      failed = 1;
      error = e.what();
    }
  }
  comm::run_collective({CollectiveKind::Broadcast, CollectiveReduce::Sum, 0, world_size()}, &failed, &failed,
                       DType::Int64, 1);
  if (!failed) return;
  throw Error(rank() == 0 ? error
                          : fmt::format("loom::dist::save {}: rank 0 failed to write it (its error says why)",
                                        path.string()));
}

}  // namespace loom::dist
