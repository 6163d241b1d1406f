#include "check.hpp"
#include "src/random.hpp"
#include "src/tensor_ops.hpp"
#include "support/error_message.hpp"

#include <array>
#include <cmath>
#include <numbers>
#include <set>
#include <string>

using namespace loom;
using loom::test::check_values;

namespace {

using Block = std::array<uint32_t, 4>;

// An independent Philox4x32-10 on uint32_t, written from the paper's round
// function; the known-answer test below anchors it to Random123.
Block philox_host(Block c, std::array<uint32_t, 2> k) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
    const uint64_t p0 = uint64_t{0xD2511F53u} * c[0], p1 = uint64_t{0xCD9E8D57u} * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
  }
  return c;
}

// The block loom draws for counter `i` after manual_seed(seed): key = the seed's
// halves, counter = i in words 0 and 1 (docs/api.md, "Random numbers").
Block block_for(uint64_t seed, uint64_t i) {
  return philox_host({static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32), 0, 0},
                     {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

// Random123 tests/kat_vectors, the three "philox4x32 10" lines: counter, key, result.
struct Kat {
  Block counter;
  std::array<uint32_t, 2> key;
  Block result;
};
const std::array<Kat, 3> kKat{{
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
}};

// The four words of Philox on `n` (counter, key) rows given as Int64 tensors,
// laid out as one [n, 4] Int64 tensor (word k in column k) so it is one kernel.
Tensor philox_tensor(const std::vector<Block>& counters, const std::vector<std::array<uint32_t, 2>>& keys) {
  const auto n = static_cast<int64_t>(counters.size());
  auto column = [&](auto get) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(get(i));
    return Tensor::from_vector<int64_t>(v, {n}).node()->uop;
  };
  detail::Words4 c;
  for (size_t w = 0; w < 4; ++w) c[w] = column([&](int64_t i) { return counters[i][w]; });
  const detail::Words2 k{column([&](int64_t i) { return keys[i][0]; }),
                         column([&](int64_t i) { return keys[i][1]; })};
  const detail::Words4 out = detail::philox4x32_10(c, k);
  UOpPtr table;
  for (int64_t w = 0; w < 4; ++w) {
    const UOpPtr col = UOp::make(Op::PAD, DType::Int64, {detail::reshape_uop(out[w], {n, 1})},
                                 std::vector<int64_t>{0, 0, w, 3 - w});
    table = table ? table + col : col;
  }
  return detail::make_tensor(table);
}

struct Moments {
  double mean = 0, var = 0;
};
template <class T>
Moments moments(const std::vector<T>& v) {
  Moments m;
  for (T x : v) m.mean += static_cast<double>(x);
  m.mean /= static_cast<double>(v.size());
  for (T x : v) m.var += (static_cast<double>(x) - m.mean) * (static_cast<double>(x) - m.mean);
  m.var /= static_cast<double>(v.size() - 1);
  return m;
}

// Sample mean and variance within 4 standard errors of a distribution with
// mean mu, variance sigma2 and fourth central moment mu4.
template <class T>
void check_moments(const std::vector<T>& v, double mu, double sigma2, double mu4) {
  const Moments m = moments(v);
  const double n = static_cast<double>(v.size());
  CHECK(std::abs(m.mean - mu) < 4 * std::sqrt(sigma2 / n));
  CHECK(std::abs(m.var - sigma2) < 4 * std::sqrt((mu4 - sigma2 * sigma2) / n));
}

using test::error_of;

// Restores the thread count a test changes.
struct ThreadsGuard {
  int saved = get_num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

}  // namespace

TEST_CASE("random: the host Philox reproduces Random123's known answers") {
  for (const Kat& k : kKat) CHECK(philox_host(k.counter, k.key) == k.result);
}

TEST_CASE("random: Philox4x32-10 in a kernel reproduces Random123's known answers") {
  std::vector<Block> counters;
  std::vector<std::array<uint32_t, 2>> keys;
  std::vector<double> want;
  for (const Kat& k : kKat) {
    counters.push_back(k.counter);
    keys.push_back(k.key);
    for (uint32_t w : k.result) want.push_back(w);
  }
  check_values(philox_tensor(counters, keys), want);
}

TEST_CASE("random: Philox4x32-10 in a kernel matches the host Philox on many counters and keys") {
  std::vector<Block> counters;
  std::vector<std::array<uint32_t, 2>> keys;
  std::vector<double> want;
  uint32_t s = 12345;
  auto next = [&] { return s = s * 1664525u + 1013904223u; };  // an LCG just to spread the inputs
  for (int i = 0; i < 257; ++i) {
    counters.push_back({next(), next(), next(), next()});
    keys.push_back({next(), next()});
    for (uint32_t w : philox_host(counters.back(), keys.back())) want.push_back(w);
  }
  check_values(philox_tensor(counters, keys), want);
}

TEST_CASE("random: rand, randint and randn equal the host Philox's numbers bit for bit") {
  constexpr uint64_t seed = 0x123456789abcdefULL;
  SUBCASE("rand Float32: 24 bits of word 0 times 2^-24") {
    manual_seed(seed);
    std::vector<double> want;
    for (uint64_t i = 0; i < 37; ++i)
      want.push_back(static_cast<float>(block_for(seed, i)[0] >> 8) * 0x1p-24f);
    check_values(Tensor::rand({37}), want);
  }
  SUBCASE("rand Float64: 27 bits of word 0 and 26 of word 1 times 2^-53") {
    manual_seed(seed);
    std::vector<double> want;
    for (uint64_t i = 0; i < 37; ++i) {
      const Block b = block_for(seed, i);
      want.push_back(static_cast<double>((uint64_t{b[0] >> 5} << 26) | (b[1] >> 6)) * 0x1p-53);
    }
    check_values(Tensor::rand({37}, DType::Float64), want);
  }
  SUBCASE("randint: low + floor(v * range / 2^64) with v = word 0 : word 1") {
    for (auto [low, high] : {std::pair<int64_t, int64_t>{-5, 12}, {-2147483648LL, 2147483648LL}, {7, 8}}) {
      manual_seed(seed);
      std::vector<double> want;
      for (uint64_t i = 0; i < 37; ++i) {
        const Block b = block_for(seed, i);
        const unsigned __int128 v = (static_cast<unsigned __int128>(b[0]) << 32) | b[1];
        want.push_back(
            static_cast<double>(low + static_cast<int64_t>((v * static_cast<uint64_t>(high - low)) >> 64)));
      }
      check_values(Tensor::randint(low, high, {37}), want);
    }
  }
  SUBCASE("randn: Box-Muller sqrt(-2 ln(1 - u1)) sin(2 pi u2), within the transcendentals' error") {
    manual_seed(seed);
    // Float32's log is loom's polynomial, the reference's libm: both within 1 ulp, so 2 apart.
    const std::vector<double> f32 = loom::test::check_ref(Tensor::randn({37}), 2);
    manual_seed(seed);
    const std::vector<double> f64 = loom::test::check_ref(Tensor::randn({37}, DType::Float64), 0);
    for (uint64_t i = 0; i < 37; ++i) {
      const Block b = block_for(seed, i);
      const double u1 = 1 - (b[0] >> 8) * 0x1p-24, u2 = (b[1] >> 8) * 0x1p-24;
      const double want32 = std::sqrt(-2 * std::log(u1)) * std::sin(2 * std::numbers::pi * u2);
      CHECK(std::abs(f32[i] - want32) <= 1e-5 * std::max(1.0, std::abs(want32)));
      const double v1 = 1 - static_cast<double>((uint64_t{b[0] >> 5} << 26) | (b[1] >> 6)) * 0x1p-53;
      const double v2 = static_cast<double>((uint64_t{b[2] >> 5} << 26) | (b[3] >> 6)) * 0x1p-53;
      const double want64 = std::sqrt(-2 * std::log(v1)) * std::sin(2 * std::numbers::pi * v2);
      CHECK(std::abs(f64[i] - want64) <= 1e-13 * std::max(1.0, std::abs(want64)));
    }
  }
}

TEST_CASE("random: values lie in range, with the asked shape and dtype") {
  manual_seed(3);
  Tensor u = Tensor::rand({4, 5, 6});
  CHECK(u.shape() == Shape{4, 5, 6});
  CHECK(u.dtype() == DType::Float32);
  for (float x : u.to_vector<float>()) CHECK((x >= 0 && x < 1));
  for (double x : Tensor::rand({120}, DType::Float64).to_vector<double>()) CHECK((x >= 0 && x < 1));
  Tensor r = Tensor::randint(-3, 4, {2, 60});
  CHECK(r.dtype() == DType::Int32);
  CHECK(r.shape() == Shape{2, 60});
  for (int32_t x : r.to_vector<int32_t>()) CHECK((x >= -3 && x < 4));
  Tensor z = Tensor::randn({3, 40}, DType::Float64);
  CHECK(z.dtype() == DType::Float64);
  for (double x : z.to_vector<double>()) CHECK(std::isfinite(x));
  CHECK(Tensor::rand({}).shape() == Shape{});
  CHECK(Tensor::rand({0, 3}).numel() == 0);
  CHECK(Tensor::randn({3, 0}).to_vector<float>().empty());
}

TEST_CASE("random: one draw is one kernel, and a second draw of the shape reuses it") {
  manual_seed(11);
  Tensor a = Tensor::randn({64, 33});
  const Counters before = counters();
  a.realize();
  CHECK(counters().kernels_executed == before.kernels_executed + 1);
  Tensor b = Tensor::randn({64, 33});
  const uint64_t compiled = counters().kernels_compiled;
  b.realize();
  CHECK(counters().kernels_compiled == compiled);  // same kernel: seed and offset come in a buffer
  CHECK(a.to_vector<float>() != b.to_vector<float>());
}

TEST_CASE("random: a seed gives the same numbers bit for bit for 1 and 2 threads") {
  ThreadsGuard guard;
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    set_num_threads(threads);
    manual_seed(2024);
    const auto u = Tensor::rand({300, 100}).to_vector<float>();
    const auto n = Tensor::randn({300, 100}, DType::Float64).to_vector<double>();
    const auto k = Tensor::randint(0, 1000, {30000}).to_vector<int32_t>();
    set_num_threads(guard.saved);
    manual_seed(2024);
    CHECK(Tensor::rand({300, 100}).to_vector<float>() == u);
    CHECK(Tensor::randn({300, 100}, DType::Float64).to_vector<double>() == n);
    CHECK(Tensor::randint(0, 1000, {30000}).to_vector<int32_t>() == k);
  }
}

TEST_CASE("random: different seeds and consecutive calls draw different numbers") {
  manual_seed(1);
  const auto a = Tensor::rand({1000}).to_vector<float>();
  const auto b = Tensor::rand({1000}).to_vector<float>();
  manual_seed(2);
  const auto c = Tensor::rand({1000}).to_vector<float>();
  manual_seed(1);
  const auto again = Tensor::rand({1000}).to_vector<float>();
  CHECK(again == a);
  int same_ab = 0, same_ac = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    same_ab += a[i] == b[i];
    same_ac += a[i] == c[i];
  }
  CHECK(same_ab < 5);  // 24-bit values: a chance coincidence is about 1000 / 2^24
  CHECK(same_ac < 5);
  CHECK(std::set<float>(a.begin(), a.end()).size() > 990);
}

TEST_CASE("random: a seed's numbers do not depend on the calls' shapes, only on their sizes and order") {
  manual_seed(9);
  const auto flat = Tensor::rand({24}).to_vector<float>();
  manual_seed(9);
  CHECK(Tensor::rand({2, 3, 4}).to_vector<float>() == flat);
  manual_seed(9);
  const auto first = Tensor::rand({10}).to_vector<float>();
  const auto rest = Tensor::rand({14}).to_vector<float>();
  CHECK(std::vector<float>(flat.begin(), flat.begin() + 10) == first);
  CHECK(std::vector<float>(flat.begin() + 10, flat.end()) == rest);
}

TEST_CASE("random: mean and variance on 100k samples within 4 standard errors") {
  manual_seed(77);
  constexpr int64_t n = 100000;
  SUBCASE("rand: uniform [0, 1): mean 1/2, variance 1/12, mu4 1/80") {
    check_moments(Tensor::rand({n}).to_vector<float>(), 0.5, 1.0 / 12, 1.0 / 80);
    check_moments(Tensor::rand({n}, DType::Float64).to_vector<double>(), 0.5, 1.0 / 12, 1.0 / 80);
  }
  SUBCASE("randn: mean 0, variance 1, mu4 3") {
    check_moments(Tensor::randn({n}).to_vector<float>(), 0, 1, 3);
    check_moments(Tensor::randn({n}, DType::Float64).to_vector<double>(), 0, 1, 3);
  }
  SUBCASE("randint(-4, 6): discrete uniform on 10 values, each drawn n/10 times within 4 standard errors") {
    const auto v = Tensor::randint(-4, 6, {n}).to_vector<int32_t>();
    const double r = 10;
    check_moments(v, 0.5, (r * r - 1) / 12, (r * r - 1) * (3 * r * r - 7) / 240);
    std::vector<int> hits(10);
    for (int32_t x : v) ++hits.at(static_cast<size_t>(x + 4));
    for (int h : hits) CHECK(std::abs(h - n / 10.0) < 4 * std::sqrt(n * 0.1 * 0.9));
  }
}

TEST_CASE("random: bad arguments name the op and what was expected") {
  CHECK(error_of([] { Tensor::rand({2}, DType::Int32); }) ==
        "rand: dtype Int32 is not a floating dtype (expected Float32, Float64, BFloat16 or Float16)");
  CHECK(error_of([] { Tensor::randn({2}, DType::Bool); }) ==
        "randn: dtype Bool is not a floating dtype (expected Float32, Float64, BFloat16 or Float16)");
  CHECK(error_of([] { Tensor::randint(5, 5, {2}); }) ==
        "randint: high (5) must be greater than low (5): the range [low, high) is empty");
  CHECK(error_of([] { Tensor::randint(0, 1LL << 32, {2}); }) ==
        "randint: [0, 4294967296) does not fit the Int32 result (expected -2147483648 <= low < high <= "
        "2147483648)");
  CHECK(error_of([] { Tensor::rand({2, -1}); }) == "rand: shape [2, -1] has a negative size");
}

TEST_CASE("random: get_rng_state and set_rng_state resume the stream bit for bit") {
  manual_seed(11);
  (void)Tensor::rand({5}).to_vector<float>();
  const Tensor state = get_rng_state();
  CHECK(state.to_vector<int64_t>() == std::vector<int64_t>{11, 5});  // the seed, blocks drawn
  const auto next = Tensor::rand({7}).to_vector<float>();
  manual_seed(3);  // elsewhere in the stream of another seed
  (void)Tensor::randn({4}).to_vector<float>();
  set_rng_state(state);
  CHECK(Tensor::rand({7}).to_vector<float>() == next);
  CHECK(error_of([] { set_rng_state(Tensor::zeros({2})); }) ==
        "set_rng_state: expected an Int64 [2] tensor (seed, blocks drawn), got Float32 [2]");
  CHECK(error_of([] { set_rng_state({}); }) == "set_rng_state: the state is undefined (expected Int64 [2])");
}
