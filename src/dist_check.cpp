// LOOM_DIST_CHECK: each rank all-gathers a fixed-size digest of its call (a hash
// of the call's name, the dtype, the rank and a hash of the shape); only when
// the digests differ do the ranks gather the names and shapes themselves, so the
// error can print them. Both exchanges are collectives every rank enters, so
// every rank learns of the mismatch and throws: none is left waiting.
#include "src/dist_check.hpp"

#include "ir/collective.hpp"
#include "runtime/communicator.hpp"
#include "src/tensor_ops.hpp"

#include <loom/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string_view>

namespace loom::detail {

namespace {

int64_t call_hash(const void* data, size_t bytes, uint64_t h = 14695981039346656037ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return static_cast<int64_t>(h);
}

// Every rank's `mine`, rank r's at [r * n, (r + 1) * n).
std::vector<int64_t> gather_from_ranks(const std::vector<int64_t>& mine, int ranks) {
  const auto n = static_cast<int64_t>(mine.size());
  std::vector<int64_t> all(static_cast<size_t>(n * ranks));
  comm::run_collective({CollectiveKind::AllGather, CollectiveReduce::Sum, 0, ranks}, mine.data(), all.data(),
                       DType::Int64, n * ranks);
  return all;
}

std::string describe_call(const CollectiveCall& c) {
  return fmt::format("{} of {} {}", c.call, to_string(c.dtype), str(to_shape(c.shape)));
}

}  // namespace

void check_collective_call(const CollectiveCall& mine) {
  const int ranks = comm::world_size(mine.call.c_str()), me = comm::rank(mine.call.c_str());
  if (ranks == 1) return;
  const std::vector<int64_t> digest{call_hash(mine.call.data(), mine.call.size()),
                                    static_cast<int64_t>(mine.dtype.scalar),
                                    static_cast<int64_t>(mine.shape.size()),
                                    call_hash(mine.shape.data(), mine.shape.size() * sizeof(int64_t))};
  const std::vector<int64_t> digests = gather_from_ranks(digest, ranks);
  const size_t d = digest.size();
  bool agree = true;
  for (size_t i = 0; i < digests.size(); ++i) agree = agree && digests[i] == digest[i % d];
  if (agree) return;

  // Some rank differs: gather every rank's call name, dtype and shape, each padded
  // to a length every rank knows from the digests.
  constexpr size_t name_words = 8;  // 64 bytes of the call's name, plenty for "reduce_scatter(dim -10)"
  int64_t most_dims = 0;
  for (int r = 0; r < ranks; ++r) most_dims = std::max(most_dims, digests[static_cast<size_t>(r) * d + 2]);
  std::vector<int64_t> record(name_words + 1 + static_cast<size_t>(most_dims), 0);
  std::memcpy(record.data(), mine.call.data(), std::min(mine.call.size(), name_words * 8 - 1));
  record[name_words] = static_cast<int64_t>(mine.dtype.scalar);
  std::copy(mine.shape.begin(), mine.shape.end(), record.begin() + name_words + 1);
  const std::vector<int64_t> records = gather_from_ranks(record, ranks);
  auto call_of = [&](int r) {
    const int64_t* at = records.data() + static_cast<size_t>(r) * record.size();
    const auto dims = static_cast<size_t>(digests[static_cast<size_t>(r) * d + 2]);
    CollectiveCall c{std::string(reinterpret_cast<const char*>(at)),
                     DType{static_cast<Scalar>(at[name_words])},
                     std::vector<int64_t>(at + name_words + 1, at + name_words + 1 + dims)};
    return c;
  };
  for (int r = 0; r < ranks; ++r) {
    const CollectiveCall other = call_of(r);
    if (other.call == mine.call && other.dtype == mine.dtype && other.shape == mine.shape) continue;
    throw Error(fmt::format(
        "{}: the ranks disagree (LOOM_DIST_CHECK): rank {} (this one) calls {}, rank {} calls {} (expected "
        "the same collective on a tensor of the same shape and dtype on every rank)",
        mine.call, me, describe_call(mine), r, describe_call(other)));
  }
  // The digests differ but the records agree: only a name longer than a record
  // holds gets here.
  throw Error(fmt::format("{}: the ranks disagree (LOOM_DIST_CHECK) on the collective called", mine.call));
}

}  // namespace loom::detail
