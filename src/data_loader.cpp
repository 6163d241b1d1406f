// DataLoader: a producer thread copies the rows of the next batch into fresh
// buffers while the caller trains on the current one (one batch ahead), and
// hands over epoch ends as a marker. Destruction stops and joins it.
#include "src/engine.hpp"
#include "src/tensor_ops.hpp"

#include <loom/data.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

namespace loom::data {

using namespace detail;

namespace {
struct Source {
  Tensor tensor;  // realized, held so its buffer lives
  const unsigned char* data;
  size_t row_bytes;
  Shape row_shape;
};
}  // namespace

struct DataLoader::Impl {
  std::vector<Source> sources;
  int64_t rows = 0, batch = 0, batches = 0;  // rows: this shard's, per epoch
  int64_t all_rows = 0;                      // the tensors'
  Shard shard;
  bool shuffle = false, drop_last = false;
  uint64_t seed = 0;
  std::optional<Variable> batch_rows;  // set_batch_variable's
  bool handed_out = false;             // next() has been called

  std::mutex mu;
  std::condition_variable cv;
  bool has_ready = false, stop = false;
  std::optional<std::vector<Tensor>> ready;  // nullopt: the epoch ended
  std::exception_ptr error;
  int64_t consumer_epoch = 0, first_epoch = 0;
  std::thread worker;

  // The epoch's rows in the order this shard visits them: the whole order (the
  // same on every rank), padded cyclically to shard.ranks * rows, every
  // shard.ranks-th position from shard.rank on.
  std::vector<int64_t> order_of(int64_t epoch) const {
    std::vector<int64_t> order(static_cast<size_t>(all_rows));
    std::iota(order.begin(), order.end(), 0);
    if (shuffle) {
      std::mt19937_64 rng(seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(epoch + 1)));
      std::shuffle(order.begin(), order.end(), rng);
    }
    if (shard.ranks == 1) return order;
    std::vector<int64_t> mine(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i)
      mine[static_cast<size_t>(i)] = order[static_cast<size_t>((shard.rank + i * shard.ranks) % all_rows)];
    return mine;
  }

  // With a batch variable, the buffer has room for a whole batch and the batch is
  // its first rows, bound: the same graph for every batch.
  std::vector<Tensor> make_batch(const std::vector<int64_t>& order, int64_t b) const {
    const int64_t begin = b * batch, end = std::min(rows, begin + batch);
    std::vector<Tensor> out;
    for (const Source& s : sources) {
      Shape shape = s.row_shape;
      shape.insert(shape.begin(), batch_rows ? batch : end - begin);
      const UOpPtr buf = allocate_buffer(s.tensor.dtype(), count(shape), false);
      auto* dst = static_cast<unsigned char*>(buffer_data(buf));
      for (int64_t i = begin; i < end; ++i)
        std::memcpy(dst + static_cast<size_t>(i - begin) * s.row_bytes,
                    s.data + static_cast<size_t>(order[static_cast<size_t>(i)]) * s.row_bytes, s.row_bytes);
      const Tensor whole = make_tensor(reshape_uop(buf, shape));
      out.push_back(batch_rows ? whole.slice(0, 0, batch_rows->bind(end - begin)) : whole);
    }
    return out;
  }

  // Waits for the slot to empty, then fills it; false once stopped.
  bool hand_over(std::optional<std::vector<Tensor>> item) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return !has_ready || stop; });
    if (stop) return false;
    ready = std::move(item);
    has_ready = true;
    cv.notify_all();
    return true;
  }

  void stop_worker() {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }

  void produce() {
    try {
      for (int64_t epoch = first_epoch;; ++epoch) {
        const auto order = order_of(epoch);
        for (int64_t b = 0; b < batches; ++b)
          if (!hand_over(make_batch(order, b))) return;
        if (!hand_over(std::nullopt)) return;
      }
    } catch (...) {
      std::lock_guard lock(mu);
      error = std::current_exception();
      has_ready = true;
      cv.notify_all();
    }
  }
};

DataLoader::DataLoader(std::vector<Tensor> tensors, int64_t batch_size, bool shuffle, uint64_t seed,
                       bool drop_last, Shard shard)
    : impl_(std::make_unique<Impl>()) {
  if (tensors.empty()) throw Error("DataLoader: expected at least one tensor");
  if (batch_size <= 0)
    throw Error(fmt::format("DataLoader: batch_size must be positive, got {}", batch_size));
  if (shard.ranks < 1 || shard.rank < 0 || shard.rank >= shard.ranks)
    throw Error(
        fmt::format("DataLoader: shard rank {} of {} ranks (expected ranks >= 1 and 0 <= rank < ranks)",
                    shard.rank, shard.ranks));
  Impl& m = *impl_;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) throw Error(fmt::format("DataLoader: tensor {} is undefined", i));
    if (tensors[i].ndim() == 0)
      throw Error(fmt::format("DataLoader: tensor {} is 0-d; expected rows along axis 0", i));
    if (tensors[i].shape()[0] != tensors[0].shape()[0])
      throw Error(
          fmt::format("DataLoader: tensor {} has shape {} but tensor 0 has {}; expected the same first size",
                      i, str(tensors[i].shape()), str(tensors[0].shape())));
    Tensor t = tensors[i].contiguous().realize();
    const UOpPtr& view = t.node()->uop;
    Shape row(t.shape().begin() + 1, t.shape().end());
    const auto row_bytes = static_cast<size_t>(count(row)) * t.dtype().itemsize();
    const auto* data =
        static_cast<const unsigned char*>(buffer_data(view->op == Op::BUFFER ? view : view->src[0]));
    m.sources.push_back({std::move(t), data, row_bytes, std::move(row)});
  }
  m.all_rows = tensors[0].shape()[0];
  m.shard = shard;
  // ceil(n / ranks) rows each; with no rows there is nothing to pad with.
  m.rows = m.all_rows == 0 ? 0 : (m.all_rows + shard.ranks - 1) / shard.ranks;
  m.batch = batch_size;
  m.shuffle = shuffle;
  m.seed = seed;
  m.drop_last = drop_last;
  m.batches = drop_last ? m.rows / batch_size : (m.rows + batch_size - 1) / batch_size;
  m.worker = std::thread([&m] { m.produce(); });
}

DataLoader::~DataLoader() { impl_->stop_worker(); }

void DataLoader::set_batch_variable(const Variable& rows) {
  Impl& m = *impl_;
  const int64_t smallest = m.batches == 0 ? 1 : std::min(m.batch, m.rows - (m.batches - 1) * m.batch);
  if (rows.min() > smallest || rows.max() < m.batch)
    throw Error(
        fmt::format("DataLoader::set_batch_variable: variable '{}' in [{}, {}] cannot take every batch's "
                    "size ({} to {} rows); expected bounds containing them",
                    rows.name(), rows.min(), rows.max(), smallest, m.batch));
  {
    std::lock_guard lock(m.mu);
    if (m.handed_out)
      throw Error(
          fmt::format("DataLoader::set_batch_variable('{}'): call it before the first next()", rows.name()));
  }
  m.stop_worker();  // the prepared batch has the old form: prepare it again
  m.stop = m.has_ready = false;
  m.ready.reset();
  m.error = nullptr;
  m.batch_rows = rows;
  m.worker = std::thread([&m] { m.produce(); });
}

void DataLoader::set_epoch(int64_t epoch) {
  if (epoch < 0) throw Error(fmt::format("DataLoader::set_epoch: epoch {} is negative", epoch));
  Impl& m = *impl_;
  m.stop_worker();  // then restart it at `epoch`, with nothing prepared
  m.stop = m.has_ready = false;
  m.ready.reset();
  m.error = nullptr;
  m.consumer_epoch = m.first_epoch = epoch;
  m.worker = std::thread([&m] { m.produce(); });
}

std::optional<std::vector<Tensor>> DataLoader::next() {
  Impl& m = *impl_;
  std::unique_lock lock(m.mu);
  m.handed_out = true;
  m.cv.wait(lock, [&] { return m.has_ready; });
  if (m.error) std::rethrow_exception(m.error);
  auto item = std::move(m.ready);
  m.ready.reset();
  m.has_ready = false;
  if (!item) ++m.consumer_epoch;
  m.cv.notify_all();
  return item;
}

int64_t DataLoader::size() const { return impl_->batches; }
int64_t DataLoader::rows() const { return impl_->rows; }
int64_t DataLoader::epoch() const {
  std::lock_guard lock(impl_->mu);
  return impl_->consumer_epoch;
}

}  // namespace loom::data
