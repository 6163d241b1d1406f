// DataLoader: every row once per epoch, seeded shuffles that differ by epoch,
// drop_last, rows of every tensor kept together, errors, and destruction
// mid-epoch while the background thread waits.
#include "check.hpp"
#include "support/error_message.hpp"

#include <loom/data.hpp>

#include <algorithm>

using namespace loom;
using test::check_message;
using test::error_of;
using test::values;

namespace {
// One epoch: the row ids (first tensor) batch by batch.
std::vector<std::vector<double>> epoch_of(data::DataLoader& loader) {
  std::vector<std::vector<double>> out;
  while (auto b = loader.next()) out.push_back(values((*b)[0]));
  return out;
}
}  // namespace

TEST_CASE("DataLoader visits every row once per epoch, in order or in a seeded shuffle, rows kept together") {
  const Tensor ids = Tensor::arange(0, 10, 1, DType::Int64);
  const Tensor feats =
      Tensor::arange(0, 30, 1, DType::Float32).reshape({10, 3}) * 2.0f;  // lazy: realized once
  data::DataLoader plain({ids, feats}, 4);
  CHECK(plain.size() == 3);
  CHECK(epoch_of(plain) == std::vector<std::vector<double>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}});
  CHECK(plain.epoch() == 1);

  data::DataLoader shuffled({ids, feats}, 4, true, 7);
  const auto e0 = epoch_of(shuffled), e1 = epoch_of(shuffled);
  data::DataLoader again({ids, feats}, 4, true, 7);
  CHECK(epoch_of(again) == e0);  // seeded
  CHECK(e0 != e1);               // a new permutation per epoch
  for (const auto& epoch : {e0, e1}) {
    std::vector<double> all;
    for (const auto& b : epoch) all.insert(all.end(), b.begin(), b.end());
    std::sort(all.begin(), all.end());
    CHECK(all == values(ids));
  }
  data::DataLoader pairs({ids, feats}, 3, true, 1);
  while (auto b = pairs.next()) {  // each row's features travel with its id
    const auto id = values((*b)[0]), f = values((*b)[1]);
    CHECK((*b)[1].shape() == Shape{static_cast<int64_t>(id.size()), 3});
    for (size_t i = 0; i < id.size(); ++i) CHECK(f[3 * i + 1] == 2 * (3 * id[i] + 1));
  }
}

TEST_CASE("DataLoader drops the short last batch with drop_last, and stops cleanly mid-epoch") {
  const Tensor ids = Tensor::arange(0, 10, 1, DType::Int32);
  data::DataLoader loader({ids}, 4, false, 0, true);
  CHECK(loader.size() == 2);
  CHECK(epoch_of(loader).size() == 2);
  {
    data::DataLoader abandoned({ids}, 3, true, 2);
    CHECK(abandoned.next().has_value());  // the thread has the next batch ready and waits
  }                                       // destroyed: stopped and joined
  data::DataLoader tiny({ids}, 100);
  CHECK(epoch_of(tiny).size() == 1);
}

TEST_CASE("DataLoader rejects bad arguments, naming them") {
  check_message(error_of([] { data::DataLoader({Tensor::zeros({3})}, 0); }),
                {"DataLoader", "batch_size", "0"});
  check_message(error_of([] {
                  data::DataLoader({Tensor::zeros({3}), Tensor::zeros({4, 2})}, 2);
                }),
                {"DataLoader", "tensor 1", "[4, 2]", "[3]"});
  check_message(error_of([] { data::DataLoader({Tensor::scalar(1)}, 1); }), {"DataLoader", "0-d"});
  check_message(error_of([] { data::DataLoader({}, 1); }), {"DataLoader", "at least one"});
}

TEST_CASE("DataLoader::set_epoch resumes a seeded shuffle at any epoch, mid-epoch or not") {
  const Tensor ids = Tensor::arange(0, 10, 1, DType::Int64);
  data::DataLoader run({ids}, 4, true, 5);
  const auto e0 = epoch_of(run), e1 = epoch_of(run), e2 = epoch_of(run);
  data::DataLoader resumed({ids}, 4, true, 5);
  CHECK(resumed.next().has_value());  // mid-epoch 0, the next batch prepared
  resumed.set_epoch(2);
  CHECK(resumed.epoch() == 2);
  CHECK(epoch_of(resumed) == e2);
  CHECK(resumed.epoch() == 3);
  resumed.set_epoch(0);
  CHECK(epoch_of(resumed) == e0);
  CHECK(epoch_of(resumed) == e1);
  check_message(error_of([&] { resumed.set_epoch(-1); }), {"DataLoader::set_epoch", "-1", "negative"});
}

TEST_CASE("DataLoader with a Shard: rank r takes positions r, r + ranks, ... of the epoch's order, padded") {
  const Tensor ids = Tensor::arange(0, 10, 1, DType::Int64);
  // In order, 3 ranks: 0..9 padded with 0, 1 to 12 rows, 4 a rank (PyTorch's DistributedSampler).
  const std::vector<std::vector<std::vector<double>>> want = {
      {{0, 3}, {6, 9}}, {{1, 4}, {7, 0}}, {{2, 5}, {8, 1}}};
  for (int64_t r = 0; r < 3; ++r) {
    data::DataLoader shard({ids}, 2, false, 0, false, {r, 3});
    CHECK(shard.rows() == 4);
    CHECK(shard.size() == 2);
    CHECK(epoch_of(shard) == want[static_cast<size_t>(r)]);
  }
  // Shuffled: every rank's share of every epoch is its positions of the unsharded
  // loader's order for that epoch, so the ranks agree on the order (seed, epoch).
  data::DataLoader whole({ids}, 10, true, 11);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    auto order = epoch_of(whole).at(0);
    order.insert(order.end(), order.begin(), order.begin() + 2);
    std::vector<double> seen;
    for (int64_t r = 0; r < 3; ++r) {
      data::DataLoader shard({ids}, 3, true, 11, false, {r, 3});
      shard.set_epoch(epoch);
      std::vector<double> mine;
      for (const auto& b : epoch_of(shard)) mine.insert(mine.end(), b.begin(), b.end());
      std::vector<double> expected;
      for (size_t i = static_cast<size_t>(r); i < order.size(); i += 3) expected.push_back(order[i]);
      CHECK(mine == expected);
      seen.insert(seen.end(), mine.begin(), mine.end());
    }
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    CHECK(seen == values(ids));  // the shares cover every row
  }
  // More ranks than rows: the order repeats, one row each; drop_last counts the share's batches.
  const Tensor two = Tensor::arange(0, 2, 1, DType::Int64);
  for (int64_t r = 0; r < 5; ++r) {
    data::DataLoader shard({two}, 1, false, 0, true, {r, 5});
    CHECK(epoch_of(shard) == std::vector<std::vector<double>>{{static_cast<double>(r % 2)}});
  }
  data::DataLoader dropped({ids}, 3, false, 0, true, {1, 3});
  CHECK(dropped.size() == 1);  // 4 rows, batches of 3
  check_message(error_of([&] {
                  data::DataLoader({ids}, 2, false, 0, false, {3, 3});
                }),
                {"DataLoader: shard rank 3 of 3 ranks", "0 <= rank < ranks"});
}

TEST_CASE(
    "DataLoader::set_batch_variable: every batch is [B=n, ...], so a step compiles once, the last included") {
  const int64_t rows = 100, features = 4, batch = 32;  // batches of 32, 32, 32 and 4
  const Tensor x = Tensor::arange(0, rows * features, 1, DType::Float32).reshape({rows, features});
  const Tensor y = Tensor::arange(0, rows, 1, DType::Float32).reshape({rows, 1});
  const Variable b("B", 1, batch);
  data::DataLoader loader({x, y}, batch);
  loader.set_batch_variable(b);
  Tensor w = Tensor::ones({features, 1}).requires_grad_();
  optim::SGD opt({w}, 1e-6);
  std::vector<int64_t> sizes;
  double first_row_sum = 0;
  while (auto batch_tensors = loader.next()) {
    const Tensor& xb = (*batch_tensors)[0];
    const Tensor& yb = (*batch_tensors)[1];
    const auto n = static_cast<int64_t>(sizes.size() < 3 ? batch : rows - 3 * batch);
    CHECK(xb.shape() == Shape{b.bind(n), features});
    const auto before = counters();
    opt.zero_grad();
    const Tensor loss = ((xb.matmul(w) - yb) * (xb.matmul(w) - yb)).mean();
    loss.backward();
    opt.step();
    // Every row's mean squared error, by hand: row r is 4r .. 4r+3 (sum 16r + 6), target r.
    double want = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double r = static_cast<double>(sizes.size() * batch + i);
      want += (16 * r + 6 - r) * (16 * r + 6 - r) / static_cast<double>(n);
    }
    if (sizes.empty()) first_row_sum = values(xb.sum())[0];
    if (sizes.empty()) CHECK(loss.item<float>() == doctest::Approx(want).epsilon(1e-5));
    if (sizes.size() >= 2) {  // the first step builds w's graph; from the second on one plan serves all
      CHECK(counters().schedule_cache_misses == before.schedule_cache_misses);
      CHECK(counters().kernels_compiled + counters().kernels_loaded ==
            before.kernels_compiled + before.kernels_loaded);
    }
    sizes.push_back(n);
  }
  CHECK(sizes == std::vector<int64_t>{32, 32, 32, 4});
  CHECK(first_row_sum == doctest::Approx(32.0 * 4 * (32 * 4 - 1) / 2));
  // Bounds that cannot take every batch, and a call after next(), are errors naming the variable.
  data::DataLoader other({x}, batch);
  check_message(error_of([&] { other.set_batch_variable(Variable("B", 8, 32)); }), {"'B'", "4 to 32"});
  check_message(error_of([&] { other.set_batch_variable(Variable("B", 1, 16)); }), {"'B'", "[1, 16]"});
  (void)other.next();
  check_message(error_of([&] { other.set_batch_variable(b); }), {"'B'", "before the first next()"});
}
