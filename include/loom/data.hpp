#pragma once
// Data loading (namespace loom::data): IDX files (the MNIST family) and a
// batch loader that prepares the next batch on a background thread while the
// training step runs. docs/api.md, "Data", is the reference.
//   Tensor images = data::read_idx("train-images-idx3-ubyte.gz");  // UInt8 [60000, 28, 28]
//   Tensor labels = data::read_idx("train-labels-idx1-ubyte.gz");  // UInt8 [60000]
//   data::DataLoader loader({images, labels}, 64, /*shuffle=*/true, /*seed=*/0);
//   while (auto batch = loader.next()) step((*batch)[0], (*batch)[1]);  // one epoch
#include <loom/tensor.hpp>
#include <loom/variable.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

namespace loom::data {

// Reads an IDX file, gzip-compressed or plain (told apart by gzip's magic
// bytes), into a realized tensor of the shape its header gives. Element types:
// unsigned byte -> UInt8, signed byte, short and int -> Int32 (loom has no
// 8- or 16-bit signed dtype), float -> Float32, double -> Float64. Any failure
// (a missing file, a bad magic number, an unknown type code, too few or too
// many data bytes) is a loom::Error naming the path.
Tensor read_idx(const std::filesystem::path& path);

// One rank's share of the data in a data-parallel job (docs/distributed.md), as
// PyTorch's DistributedSampler: each epoch's order of the n rows (shuffled or
// not) is padded, by repeating its start, to a multiple of `ranks`, and rank r
// takes positions r, r + ranks, r + 2 ranks, ... of it. So every rank gets
// ceil(n / ranks) rows and as many batches, and the ranks' shares of an epoch
// together are the whole order plus the padding. With the same seed on every
// rank (the shuffle depends on seed and epoch only) the ranks agree on the order:
//   data::DataLoader loader({x, y}, 32, true, seed, true, {dist::rank(), dist::world_size()});
struct Shard {
  int64_t rank = 0;
  int64_t ranks = 1;
};

// Batches of rows (along axis 0) of tensors that share their first size: each
// batch is a list of tensors of batch_size rows (the last one smaller unless
// drop_last), in buffers of their own. With shuffle, epoch e visits the rows in
// a permutation drawn from (seed, e) (std::mt19937_64, not PyTorch's stream),
// so a seeded run is reproducible (set_epoch resumes one); without, in order. A background thread
// copies the next batch while the caller uses the current one; destroying the
// loader stops and joins it, mid-epoch or not. The tensors are realized once
// and read from that thread: do not assign to them while the loader lives.
// `shard` makes it one rank's loader (Shard above); batches are of that rank's rows.
class DataLoader {
 public:
  DataLoader(std::vector<Tensor> tensors, int64_t batch_size, bool shuffle = false, uint64_t seed = 0,
             bool drop_last = false, Shard shard = {});
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The next batch of the current epoch, or nullopt when the epoch is over;
  // the call after a nullopt starts the next epoch.
  std::optional<std::vector<Tensor>> next();
  // Batches per epoch.
  int64_t size() const;
  // Rows per epoch: this rank's share (all rows, without a Shard).
  int64_t rows() const;
  // The epoch next() is in (0 first).
  int64_t epoch() const;
  // Makes the next next() the first batch of epoch `epoch` (>= 0), dropping
  // what was prepared: a run resumed from a checkpoint taken after epoch e
  // calls set_epoch(e + 1) and sees the batches the uninterrupted run saw (as
  // PyTorch's DistributedSampler.set_epoch).
  void set_epoch(int64_t epoch);
  // Makes every batch's first size `rows` bound to its rows: each batch is
  // slice(0, 0, rows.bind(n)) of a buffer of batch_size rows, so a step over
  // a batch is one graph for every batch, the smaller last one included, and
  // compiles once (docs/symbolic.md). `rows` must take every batch's size
  // (its bounds contain 1 to batch_size). Call it before the first next().
  void set_batch_variable(const Variable& rows);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::data
