// Random tensors computed inside kernels. Element i of a call is a pure function
// of (seed, offset + i) through Philox4x32-10, so a seeded program draws the same
// numbers for every thread count, and a whole draw fuses into one kernel.
#include "src/random.hpp"

#include "src/tensor_ops.hpp"

#include <loom/random.hpp>

#include <cmath>
#include <limits>
#include <mutex>
#include <numbers>

namespace loom {

using namespace detail;

namespace {

constexpr int64_t kWordMask = 0xffffffff;
constexpr int64_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57;  // Philox4x32 multipliers
constexpr int64_t kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;  // Weyl key increments

UOpPtr int64s(int64_t v, const Shape& s) { return expand_uop(const_int(DType::Int64, v), s); }
UOpPtr low_word(const UOpPtr& x) { return alu(Op::AND, {x, int64s(kWordMask, *x->shape())}); }
// Int64 SHR is arithmetic; the mask makes it the logical shift of the 64 bits.
UOpPtr shift_right(const UOpPtr& x, int64_t k) { return low_word(alu(Op::SHR, {x, int64s(k, *x->shape())})); }
UOpPtr high_word(const UOpPtr& x) { return shift_right(x, 32); }
UOpPtr bit_xor(const UOpPtr& a, const UOpPtr& b) { return alu(Op::XOR, {a, b}); }

// One round. A 32x32-bit product is below 2^64, so Int64 holds its bits exactly
// (wrapping past 2^63 is harmless: only the bits are read).
Words4 philox_round(const Words4& c, const UOpPtr& k0, const UOpPtr& k1) {
  const Shape& s = *c[0]->shape();
  const UOpPtr p0 = int64s(kM0, s) * c[0], p1 = int64s(kM1, s) * c[2];
  return {bit_xor(bit_xor(high_word(p1), c[1]), k0), low_word(p1), bit_xor(bit_xor(high_word(p0), c[3]), k1),
          low_word(p0)};
}

// The generator: the seed and how many Philox blocks were drawn since it was set.
// The only mutable state of random numbers; the mutex gives every call a counter
// range of its own, so calls from several threads never draw the same numbers.
class Generator {
 public:
  static Generator& instance() {
    static Generator g;
    return g;
  }
  void seed(uint64_t s) {
    const std::lock_guard lock(mu_);
    seed_ = s;
    drawn_ = 0;
  }
  // Reserves `n` blocks: returns the seed and the first block's counter.
  std::pair<uint64_t, uint64_t> reserve(int64_t n) {
    const std::lock_guard lock(mu_);
    const std::pair<uint64_t, uint64_t> r{seed_, drawn_};
    drawn_ += static_cast<uint64_t>(n);
    return r;
  }
  std::pair<uint64_t, uint64_t> state() {
    const std::lock_guard lock(mu_);
    return {seed_, drawn_};
  }
  void set_state(uint64_t seed, uint64_t drawn) {
    const std::lock_guard lock(mu_);
    seed_ = seed;
    drawn_ = drawn;
  }

 private:
  std::mutex mu_;
  uint64_t seed_ = 0;  // fixed default: programs are reproducible unless seeded otherwise
  uint64_t drawn_ = 0;
};

// Element i of a draw of `n` gets the Philox block of counter (offset + i) (64
// bits, in words 0 and 1) under the key (low, high half of the seed). The key,
// the offset and `extra` reach the kernel through a small Int64 buffer, so every
// call of one shape runs the same compiled kernel.
struct Draw {
  Words4 block;
  UOpPtr params;  // [key0, key1, offset, extra...]
};

UOpPtr param(const UOpPtr& params, int64_t i, const Dim& n) {
  const UOpPtr one = UOp::make(Op::SHRINK, DType::Int64, {params}, Shape{i, i + 1});
  return expand_uop(one, {n});
}

thread_local uint64_t t_draws = 0;

// A symbolic count (a batch of B rows) draws as many blocks as its bound value, and the
// kernel serves every value: the offset is data.
Draw draw(const Dim& n, const std::vector<int64_t>& extra) {
  ++t_draws;
  const auto [seed, offset] = Generator::instance().reserve(n.value());
  std::vector<int64_t> p{static_cast<int64_t>(seed & kWordMask), static_cast<int64_t>(seed >> 32),
                         static_cast<int64_t>(offset)};
  p.insert(p.end(), extra.begin(), extra.end());
  const UOpPtr params = Tensor::from_vector<int64_t>(p, {static_cast<int64_t>(p.size())}).node()->uop;
  const UOpPtr counter = param(params, 2, n) + UOp::make(Op::IOTA, DType::Int64, {}, Shape{n});
  const UOpPtr zero = int64s(0, {n});
  return {philox4x32_10({low_word(counter), high_word(counter), zero, zero},
                        {param(params, 0, n), param(params, 1, n)}),
          params};
}

// Uniform in [0, 1) from 24 (Float32: word `w`) or 53 (Float64: words w, w+1)
// random bits: every value is a multiple of 2^-24 (2^-53), so exact.
UOpPtr unit_interval(const Words4& x, size_t w, DType dt) {
  const Shape& s = *x[0]->shape();
  if (dt == DType::Float32) return cast_uop(shift_right(x[w], 8), dt) * const_tensor(0x1p-24, dt, s);
  const UOpPtr bits =
      alu(Op::OR, {alu(Op::SHL, {shift_right(x[w], 5), int64s(26, s)}), shift_right(x[w + 1], 6)});
  return cast_uop(bits, dt) * const_tensor(0x1p-53, dt, s);
}

// Box-Muller: sqrt(-2 ln u1) sin(2 pi u2), with u1 = 1 - u in (0, 1] so the log
// is finite. Float32 takes u1, u2 from words 0, 1; Float64 from words 0-1, 2-3.
UOpPtr standard_normal(const Words4& x, DType dt) {
  const Shape& s = *x[0]->shape();
  const UOpPtr u1 = const_tensor(1, dt, s) - unit_interval(x, 0, dt);
  const UOpPtr u2 = unit_interval(x, dt == DType::Float32 ? 1 : 2, dt);
  const UOpPtr radius = alu(Op::SQRT, {alu(Op::LOG2, {u1}) * const_tensor(-2 * std::numbers::ln2, dt, s)});
  return radius * alu(Op::SIN, {u2 * const_tensor(2 * std::numbers::pi, dt, s)});
}

// floor(v * range / 2^64) for the 64 random bits v = x0:x1, in 32-bit halves: in
// [0, range) for range <= 2^32, each value with probability within 2^-64 of 1/range.
UOpPtr below(const Words4& x, const UOpPtr& range) {
  const UOpPtr carry = high_word(x[1] * range);
  return high_word(x[0] * range + carry);
}

void check_float(DType dt, const char* op) {
  if (!dt.is_float())
    throw Error(
        fmt::format("{}: dtype {} is not a floating dtype (expected Float32, Float64, BFloat16 or Float16)",
                    op, scalar_name(dt.scalar)));
}

}  // namespace

namespace detail {
uint64_t thread_random_draws() { return t_draws; }

Words4 philox4x32_10(const Words4& counter, const Words2& key) {
  const Shape& s = *counter[0]->shape();
  Words4 c = counter;
  for (int64_t r = 0; r < 10; ++r)  // round r uses the key bumped r times
    c = philox_round(c, low_word(key[0] + int64s(r * kW0, s)), low_word(key[1] + int64s(r * kW1, s)));
  return c;
}
}  // namespace detail

void manual_seed(uint64_t seed) { Generator::instance().seed(seed); }

Tensor get_rng_state() {
  const auto [seed, drawn] = Generator::instance().state();
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(seed), static_cast<int64_t>(drawn)}, {2});
}

void set_rng_state(const Tensor& state) {
  if (!state.defined()) throw Error("set_rng_state: the state is undefined (expected Int64 [2])");
  if (state.dtype() != DType::Int64 || state.shape() != Shape{2})
    throw Error(fmt::format("set_rng_state: expected an Int64 [2] tensor (seed, blocks drawn), got {} {}",
                            scalar_name(state.dtype().scalar), str(state.shape())));
  const auto v = state.to_vector<int64_t>();
  Generator::instance().set_state(static_cast<uint64_t>(v[0]), static_cast<uint64_t>(v[1]));
}

Tensor Tensor::rand(Shape shape, DType dtype) {
  check_float(dtype, "rand");
  check_shape(shape, "rand", dtype);
  const Dim n = count(shape);
  if (n == 0) return zeros(std::move(shape), dtype);
  if (dtype.is_half()) {  // a multiple of 2^-digits in Float32, so the cast is exact and below 1
    const int digits = dtype.scalar == Scalar::BFloat16 ? 8 : 11;
    const Words4 x = draw(n, {}).block;
    const Shape& s = *x[0]->shape();
    const UOpPtr u = cast_uop(shift_right(x[0], 32 - digits), DType::Float32) *
                     const_tensor(std::ldexp(1.0, -digits), DType::Float32, s);
    return make_tensor(reshape_uop(cast_uop(u, dtype.base()), shape));
  }
  return make_tensor(reshape_uop(unit_interval(draw(n, {}).block, 0, dtype.base()), shape));
}

Tensor Tensor::randn(Shape shape, DType dtype) {
  check_float(dtype, "randn");
  check_shape(shape, "randn", dtype);
  const Dim n = count(shape);
  if (n == 0) return zeros(std::move(shape), dtype);
  if (dtype.is_half())  // drawn in Float32, rounded once (as PyTorch's normal_ for halves)
    return make_tensor(
        reshape_uop(cast_uop(standard_normal(draw(n, {}).block, DType::Float32), dtype.base()), shape));
  return make_tensor(reshape_uop(standard_normal(draw(n, {}).block, dtype.base()), shape));
}

Tensor Tensor::randint(int64_t low, int64_t high, Shape shape) {
  constexpr int64_t kMin = std::numeric_limits<int32_t>::min(), kEnd = int64_t{1} << 31;
  if (high <= low)
    throw Error(fmt::format(
        "randint: high ({}) must be greater than low ({}): the range [low, high) is empty", high, low));
  if (low < kMin || high > kEnd)
    throw Error(
        fmt::format("randint: [{}, {}) does not fit the Int32 result (expected {} <= low < high <= {})", low,
                    high, kMin, kEnd));
  check_shape(shape, "randint", DType::Int32);
  const Dim n = count(shape);
  if (n == 0) return zeros(std::move(shape), DType::Int32);
  const Draw d = draw(n, {low, high - low});
  const UOpPtr value = param(d.params, 3, n) + below(d.block, param(d.params, 4, n));
  return make_tensor(reshape_uop(cast_uop(value, DType::Int32), shape));
}

}  // namespace loom
