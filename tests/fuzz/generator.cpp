// Random tensor programs built through the public Tensor API, so the fuzzer
// checks what users build: the front end's decompositions, promotion and
// broadcasting included. A step that the API refuses (loom::Error at
// construction) is dropped and another is drawn. A gradient program
// (fuzz/gradient_check.hpp) computes in Float64 from continuous data, keeps
// every operand away from a pole, and ends in a random scalar loss.
#include "fuzz/fuzz.hpp"
#include "fuzz/gradient_check.hpp"
#include "fuzz/op_class.hpp"

#include <loom/loom.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

namespace loom::fuzz {

namespace {

struct Skip {};  // a step that does not apply to the drawn operands

struct Value {
  Tensor t;
  bool exact;  // no approximate op upstream (fuzz/op_class.hpp): safe before a discontinuity
};

class Generator {
 public:
  Generator(uint64_t seed, const GenerateOptions& options, Coverage* coverage)
      : rng_(seed), options_(options), gradient_(options.gradient), coverage_(coverage) {}

  std::vector<Tensor> program() {
    const int steps = between(1, options_.max_steps);
    values_.push_back(input_value(random_shape(), random_dtype()));
    for (int i = 0; i < steps; ++i) step();
    return gradient_ ? gradient_outputs() : outputs();
  }

 private:
  // ---- randomness ----
  int64_t between(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  bool chance(double p) { return uniform(0, 1) < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v.at(static_cast<size_t>(between(0, static_cast<int64_t>(v.size()) - 1)));
  }

  DType random_dtype() {
    if (gradient_) return DType::Float64;  // finite differences need float64's precision
    static const std::vector<std::pair<DType, int>> weights{
        {DType::Float32, 27}, {DType::Float64, 12}, {DType::BFloat16, 4}, {DType::Float16, 4},
        {DType::Int32, 16},   {DType::Int64, 10},   {DType::UInt8, 10},   {DType::Bool, 17}};
    int64_t r = between(0, 99);
    for (const auto& [dt, w] : weights)
      if ((r -= w) < 0) return dt;
    return DType::Float32;
  }

  int64_t random_dim() {
    const int64_t r = between(0, 99);
    if (r < 3) return 0;
    if (r < 28) return 1;
    if (r < 75) return between(2, 4);
    return between(5, 9);
  }

  Shape random_shape() {
    static const std::vector<int> rank_weights{6, 20, 30, 24, 12, 8};  // rank 0..5
    int64_t r = between(0, 99), rank = 0;
    while ((r -= rank_weights[static_cast<size_t>(rank)]) >= 0) ++rank;
    Shape s;
    for (int64_t i = 0; i < rank; ++i) s.push_back(random_dim());
    while (numel(s) > options_.max_elements / 2)
      for (auto& d : s) d = std::max<int64_t>(1, d / 2);
    return s;
  }

  static int64_t numel(const Shape& s) {
    return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
  }

  double random_element(DType dt, bool wide, bool specials) {
    // Continuous values: ties and exact zeros would sit on kinks (relu, abs, max).
    if (dt.is_float() && gradient_) return uniform(-3, 3);
    if (dt.is_float()) {
      if (specials && chance(0.02)) {
        static const std::vector<double> special{0.0,
                                                 -0.0,
                                                 std::numeric_limits<double>::infinity(),
                                                 -std::numeric_limits<double>::infinity(),
                                                 std::numeric_limits<double>::quiet_NaN(),
                                                 1e30,
                                                 -1e-30};
        return pick(special);
      }
      if (chance(0.3)) return static_cast<double>(between(-12, 12)) / 4;  // exact small values, ties
      return uniform(-3, 3);
    }
    switch (dt.scalar) {
      case Scalar::Bool: return static_cast<double>(between(0, 1));
      case Scalar::UInt8: return static_cast<double>(between(0, 255));
      case Scalar::Int32:
        return static_cast<double>(
            wide ? between(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max())
                 : between(-20, 20));
      default:
        return static_cast<double>(wide ? between(-(int64_t{1} << 40), int64_t{1} << 40) : between(-20, 20));
    }
  }

  Tensor input(DType dt, const Shape& shape, double lo = 0, double hi = -1) {
    const bool wide = chance(0.1), specials = chance(0.2);
    std::vector<double> v(static_cast<size_t>(numel(shape)));
    for (auto& x : v)
      x = hi >= lo ? static_cast<double>(between(static_cast<int64_t>(lo), static_cast<int64_t>(hi)))
                   : random_element(dt, wide, specials);
    auto make = [&]<class T>(T) {
      std::vector<T> out;
      for (double x : v) out.push_back(static_cast<T>(x));
      return Tensor::from_vector<T>(out, shape);
    };
    Tensor t;
    switch (dt.scalar) {
      case Scalar::Float32: t = make(float{}); break;
      case Scalar::Float64: t = make(double{}); break;
      case Scalar::BFloat16: t = make(bfloat16{}); break;  // rounds to nearest even
      case Scalar::Float16: t = make(float16{}); break;
      case Scalar::Int32: t = make(int32_t{}); break;
      case Scalar::Int64: t = make(int64_t{}); break;
      case Scalar::UInt8: t = make(uint8_t{}); break;
      case Scalar::Bool: t = make(bool{}); break;
    }
    inputs_.push_back(t);
    return t;
  }
  Value input_value(const Shape& shape, DType dt) { return {input(dt, shape), true}; }

  // ---- steps ----
  void note(const std::string& api_op) {
    if (coverage_) ++coverage_->api_ops[api_op];
  }

  Value make_value(Tensor t) {
    const int64_t limit = std::max(options_.max_elements, options_.packed_matmul_elements);
    if (numel(t.shape()) > limit || t.ndim() > 5) throw Skip{};
    return {t, !graph_is_approximate({t})};
  }

  const Value& operand() { return chance(0.5) ? values_.back() : pick(values_); }

  void step() {
    for (int attempt = 0; attempt < 20; ++attempt) {
      try {
        const Value& x = operand();
        const int64_t r = between(0, 99);
        Value v = r < 22   ? unary(x)
                  : r < 47 ? binary(x)
                  : r < 72 ? movement(x)
                  : r < 84 ? reduce(x)
                           : special(x);
        values_.push_back(std::move(v));
        return;
      } catch (const Skip&) {
      } catch (const Error&) {  // the API refused the operands: draw again
      }
    }
  }

  // A float operand made safe for an op whose result is ill-conditioned near 0
  // (log, division, pow): |x| + 0.5, so an approximate input cannot blow up.
  static Tensor away_from_zero(const Tensor& t) { return t.abs() + 0.5; }
  // Where an exact operand may take a pole (division by 0, sqrt at 0): in a
  // gradient program it never does, since an infinite derivative has nothing to agree with.
  bool pole_allowed(const Value& x) const { return x.exact && !gradient_; }

  Value unary(const Value& x) {
    const Tensor& t = x.t;
    const bool is_float = t.dtype().is_float();
    static const std::vector<std::string> float_ops{
        "neg",   "exp",   "log",     "exp2",      "log2", "sqrt",     "rsqrt",      "sin",
        "cos",   "tanh",  "sigmoid", "relu",      "abs",  "sign",     "square",     "reciprocal",
        "clamp", "erf",   "gelu",    "gelu_tanh", "silu", "softplus", "leaky_relu", "log1p",
        "expm1", "floor", "ceil",    "round",     "trunc"};
    static const std::vector<std::string> int_ops{"neg",         "abs", "sign",  "square", "relu",
                                                  "bitwise_not", "exp", "clamp", "floor"};
    static const std::vector<std::string> bool_ops{"logical_not", "bitwise_not"};
    const std::string op = pick(is_float ? float_ops : t.dtype().is_bool() ? bool_ops : int_ops);
    const bool step = op == "sign" || op == "floor" || op == "ceil" || op == "round" || op == "trunc";
    if (step && !x.exact) throw Skip{};  // a discontinuity: exact inputs only
    note(op);
    if (op == "neg") return make_value(-t);
    if (op == "exp") return make_value(t.clamp(-30, 30).exp());
    if (op == "exp2") return make_value(t.clamp(-40, 40).exp2());
    if (op == "log") return make_value(away_from_zero(t).log());
    if (op == "log2") return make_value(away_from_zero(t).log2());
    if (op == "sqrt") return make_value(gradient_ ? away_from_zero(t).sqrt() : t.abs().sqrt());
    if (op == "rsqrt") return make_value(away_from_zero(t).rsqrt());
    // sin and cos of a large approximate value are ill-conditioned: an allowed ulp
    // of exp2 at 1e9 is 64, which moves sin anywhere in [-1, 1]. Keep it within ±64.
    if (op == "sin") return make_value((x.exact ? t : t.clamp(-64, 64)).sin());
    if (op == "cos") return make_value((x.exact ? t : t.clamp(-64, 64)).cos());
    if (op == "tanh") return make_value(t.tanh());
    if (op == "sigmoid") return make_value(t.sigmoid());
    if (op == "relu") return make_value(t.relu());
    if (op == "abs") return make_value(t.abs());
    if (op == "sign") return make_value(t.sign());
    if (op == "square") return make_value(t.square());
    if (op == "reciprocal")
      return make_value(pole_allowed(x) ? t.reciprocal() : away_from_zero(t).reciprocal());
    if (op == "clamp")
      return make_value(t.clamp(-static_cast<double>(between(0, 3)), static_cast<double>(between(0, 5))));
    if (op == "erf") return make_value(t.erf());
    if (op == "gelu") return make_value(t.gelu());
    if (op == "gelu_tanh") return make_value(t.gelu("tanh"));
    if (op == "silu") return make_value(t.silu());
    if (op == "softplus") return make_value(t.softplus(pick(std::vector<double>{1, 2, 0.5}), 20));
    if (op == "leaky_relu") return make_value(t.leaky_relu(0.1));
    if (op == "log1p") return make_value((t.abs() - 0.5).log1p());
    if (op == "expm1") return make_value(t.clamp(-30, 30).expm1());
    if (op == "floor") return make_value(t.floor());
    if (op == "ceil") return make_value(t.ceil());
    if (op == "round") return make_value(t.round());
    if (op == "trunc") return make_value(t.trunc());
    if (op == "logical_not") return make_value(t.logical_not());
    return make_value(~t);
  }

  // A second operand for x: the same shape, a broadcastable one, or an existing value.
  Value partner(const Value& x, bool same_dtype) {
    const DType dt = same_dtype || chance(0.6) ? x.t.dtype() : random_dtype();
    const int64_t r = between(0, 99);
    if (r < 30) {
      for (auto it = values_.rbegin(); it != values_.rend(); ++it)
        if (it->t.shape() == x.t.shape() && (!same_dtype || it->t.dtype() == x.t.dtype()) && chance(0.7))
          return *it;
    }
    if (r < 45 && !same_dtype) return pick(values_);
    Shape s = x.t.shape();
    for (auto& d : s)
      if (chance(0.3)) d = 1;
    if (!s.empty() && chance(0.2)) s.erase(s.begin(), s.begin() + between(0, static_cast<int64_t>(s.size())));
    return input_value(s, dt);
  }

  Value binary(const Value& x) {
    static const std::vector<std::string> ops{"add", "sub",     "mul",     "div", "floor_div", "mod",
                                              "pow", "maximum", "minimum", "lt",  "le",        "gt",
                                              "ge",  "eq",      "ne",      "and", "or",        "scalar"};
    const std::string op = pick(ops);
    if (op == "scalar") return scalar_op(x);
    Value y = partner(x, false);
    const Tensor &a = x.t, &b = y.t;
    const bool exact = x.exact && y.exact;
    const bool any_float = a.dtype().is_float() || b.dtype().is_float();
    note(op);
    if (op == "add") return make_value(a + b);
    if (op == "sub") return make_value(a - b);
    if (op == "mul") return make_value(a * b);
    if (op == "maximum") return make_value(a.maximum(b));
    if (op == "minimum") return make_value(a.minimum(b));
    if (op == "div") {
      // A Bool or integer divisor is exact and may be 0: allowed, but not in a gradient
      // program, where d(a/b)/da = 1/b is infinite there (cast it to Float64 first).
      if ((pole_allowed(y) && x.exact) || (!b.dtype().is_float() && !gradient_)) return make_value(a / b);
      return make_value(a / away_from_zero(b.dtype().is_float() ? b : b.cast(DType::Float64)));
    }
    if (op == "pow") {
      if (any_float) return make_value(away_from_zero(a).pow(b.clamp(-3, 3)));
      return make_value(a.pow(b.clamp(0, 5)));
    }
    if (!exact) throw Skip{};  // the rest are discontinuous: exact inputs only
    // A float quotient's floor is a staircase in the inputs a gradient program probes;
    // where |a / b| is large its steps are finer than the finite differences' step, and
    // both step sizes see a slope where the derivative is 0 (seed 3071837).
    if (gradient_ && any_float && (op == "floor_div" || op == "mod")) throw Skip{};
    if (op == "floor_div") return make_value(a.floor_div(b));
    if (op == "mod") return make_value(a % b);
    if (op == "lt") return make_value(a < b);
    if (op == "le") return make_value(a <= b);
    if (op == "gt") return make_value(a > b);
    if (op == "ge") return make_value(a >= b);
    if (op == "eq") return make_value(a.eq(b));
    if (op == "ne") return make_value(a.ne(b));
    if (op == "and") return make_value(a & b);
    return make_value(a | b);
  }

  Value scalar_op(const Value& x) {
    const Tensor& t = x.t;
    const bool int_scalar = chance(0.5);
    const double s =
        int_scalar ? static_cast<double>(between(-3, 5)) : static_cast<double>(between(-12, 12)) / 4;
    switch (between(0, 5)) {
      case 0: note("add_scalar"); return make_value(int_scalar ? t + static_cast<int>(s) : t + s);
      case 1: note("mul_scalar"); return make_value(int_scalar ? static_cast<int>(s) * t : s * t);
      case 2: note("sub_scalar"); return make_value(int_scalar ? static_cast<int>(s) - t : t - s);
      case 3:
        if (s == 0 && gradient_) throw Skip{};
        note("div_scalar");
        return make_value(int_scalar ? t / static_cast<int>(s) : t / s);
      case 4:
        if (!x.exact) throw Skip{};
        note("lt_scalar");
        return make_value(int_scalar ? t < static_cast<int>(s) : t < s);
      default:
        if (!x.exact) throw Skip{};
        note("mod_scalar");
        return make_value(int_scalar ? t % static_cast<int>(s) : t % s);
    }
  }

  int random_axis(const Tensor& t) {
    if (t.ndim() == 0) throw Skip{};
    const int a = static_cast<int>(between(0, t.ndim() - 1));
    return chance(0.3) ? a - static_cast<int>(t.ndim()) : a;  // negative axes too
  }

  Shape factor_shape(int64_t n) {
    Shape s;
    int64_t rest = n;
    const int64_t rank = between(1, 4);
    for (int64_t i = 1; i < rank && rest > 1; ++i) {
      std::vector<int64_t> divisors;
      for (int64_t d = 1; d <= rest; ++d)
        if (rest % d == 0) divisors.push_back(d);
      const int64_t d = pick(divisors);
      s.push_back(d);
      rest /= d;
    }
    s.push_back(rest);
    if (chance(0.3)) s.insert(s.begin() + between(0, static_cast<int64_t>(s.size())), 1);
    std::shuffle(s.begin(), s.end(), rng_);
    return s;
  }

  Value movement(const Value& x) {
    const Tensor& t = x.t;
    const Shape& s = t.shape();
    const int64_t rank = t.ndim();
    switch (between(0, 12)) {
      case 0: {
        note("reshape");
        Shape to = numel(s) == 0 ? Shape{0, between(1, 3)} : factor_shape(numel(s));
        if (chance(0.2) && !to.empty())
          to[static_cast<size_t>(between(0, static_cast<int64_t>(to.size()) - 1))] = -1;
        return make_value(t.reshape(to));
      }
      case 1: {
        note("permute");
        std::vector<int> order(static_cast<size_t>(rank));
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng_);
        return make_value(t.permute(order));
      }
      case 2: {
        note("expand");
        Shape to = s;
        for (auto& d : to)
          if (d == 1 && chance(0.7))
            d = between(0, 4);
          else if (chance(0.3))
            d = -1;
        if (rank < 5 && chance(0.4)) to.insert(to.begin(), between(1, 3));
        return make_value(t.expand(to));
      }
      case 3: {
        note("pad");
        std::vector<std::pair<int64_t, int64_t>> p;
        for (int64_t i = 0; i < rank; ++i) p.emplace_back(between(0, 2), between(0, 2));
        const double value = t.dtype().is_bool() ? 1.0 : static_cast<double>(between(-2, 2));
        return make_value(t.pad(p, chance(0.5) ? 0.0 : value));
      }
      case 4: {
        note("shrink");
        std::vector<std::pair<int64_t, int64_t>> b;
        for (int64_t d : s) {
          const int64_t lo = between(0, d), hi = between(lo, d);
          b.emplace_back(lo, hi);
        }
        return make_value(t.shrink(b));
      }
      case 5: {
        note("flip");
        std::vector<int> axes;
        for (int64_t i = 0; i < rank; ++i)
          if (chance(0.5)) axes.push_back(chance(0.3) ? static_cast<int>(i - rank) : static_cast<int>(i));
        return make_value(t.flip(axes));
      }
      case 6: {
        note("slice");
        const int axis = random_axis(t);
        const int64_t n = s[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
        return make_value(t.slice(axis, between(-n - 1, n + 1), between(-n - 1, n + 2), between(1, 3)));
      }
      case 7: note("transpose"); return make_value(t.transpose(random_axis(t), random_axis(t)));
      case 8: note("squeeze"); return make_value(t.squeeze(random_axis(t)));
      case 9: note("unsqueeze"); return make_value(t.unsqueeze(static_cast<int>(between(0, rank))));
      case 10: note("flatten"); return make_value(rank < 2 ? t.flatten() : t.flatten(1, -1));
      case 11: {
        note("cat");
        const int axis = random_axis(t);
        Shape other = s;
        other[static_cast<size_t>(axis < 0 ? axis + rank : axis)] = between(0, 3);
        std::vector<Tensor> parts{t, input(t.dtype(), other)};
        if (chance(0.3)) parts.push_back(t);
        std::shuffle(parts.begin(), parts.end(), rng_);
        return make_value(cat(parts, axis));
      }
      default: {
        note("stack");
        const Value& y = partner(x, true);
        if (y.t.shape() != s) throw Skip{};
        return make_value(stack({t, y.t}, static_cast<int>(between(-rank - 1, rank))));
      }
    }
  }

  // How many elements a reduce over `axes` (none: all) combines into each output.
  static int64_t reduced_count(const Tensor& t, const std::vector<int>& axes) {
    int64_t n = 1;
    for (int64_t d = 0; d < t.ndim(); ++d) {
      const bool reduced = axes.empty() || std::any_of(axes.begin(), axes.end(),
                                                       [&](int a) { return a == d || a + t.ndim() == d; });
      if (reduced) n *= t.shape()[static_cast<size_t>(d)];
    }
    return n;
  }

  Value reduce(const Value& x) {
    const Tensor& t = x.t;
    std::vector<int> axes;
    for (int64_t i = 0; i < t.ndim(); ++i)
      if (chance(0.4)) axes.push_back(chance(0.3) ? static_cast<int>(i - t.ndim()) : static_cast<int>(i));
    const bool keepdim = chance(0.4);
    switch (between(0, 6)) {
      case 0: note("sum"); return make_value(t.sum(axes, keepdim));
      case 1: note("max"); return make_value(t.max(axes, keepdim));
      case 2: note("min"); return make_value(t.min(axes, keepdim));
      case 3: note("mean"); return make_value(t.mean(axes, keepdim));
      case 4: {
        // A float product's partial products overflow in one order and not in another
        // (the reference multiplies in order, loom as a tree: seed 3080300); factors
        // within [-2, 2] and at most 64 of them keep every order below 2^64.
        const bool is_float = t.dtype().is_float();
        if (is_float && reduced_count(t, axes) > 64) throw Skip{};
        note("prod");
        return make_value((is_float ? t.clamp(-2, 2) : t).prod(axes, keepdim));
      }
      case 5:
        if (!x.exact) throw Skip{};  // ties decide the index: exact inputs only
        note("argmax");
        return make_value(chance(0.5) ? t.argmax(random_axis(t)) : t.argmin(random_axis(t)));
      default: {
        const int axis = random_axis(t);
        const int64_t which = between(0, 2);
        note(which == 0 ? "softmax" : which == 1 ? "log_softmax" : "logsumexp");
        return make_value(which == 0   ? t.softmax(axis)
                          : which == 1 ? t.log_softmax(axis)
                                       : t.logsumexp(axis));
      }
    }
  }

  Value special(const Value& x) {
    const Tensor& t = x.t;
    // nn_step has two slots: its ten op families would otherwise be too rare to meet in CI.
    switch (between(0, 10)) {
      case 8:
      case 10: return nn_step(x);
      case 0: return matmul_step(x);
      case 1: return gather_step(x);
      case 2: {
        note("where");
        Tensor cond =
            x.exact && chance(0.5) ? t.gt(input(t.dtype(), t.shape())) : input(DType::Bool, t.shape());
        Value other = partner(x, false);
        return make_value(chance(0.5) ? where(cond, t, other.t) : where(cond, other.t, t));
      }
      case 3: {
        const DType to =
            gradient_ && chance(0.3) ? pick(std::vector<DType>{DType::Int32, DType::Bool}) : random_dtype();
        if (!x.exact && !to.is_float()) throw Skip{};  // float -> integer truncates: exact inputs only
        note("cast");
        return make_value(t.cast(to));
      }
      case 4: note("contiguous"); return make_value(t.contiguous());
      case 5: note("clone"); return make_value(t.clone());
      case 6: return assign_step(x);
      case 7: {
        note("one_hot");
        Tensor idx = input(chance(0.5) ? DType::Int32 : DType::Int64, random_shape(), 0, 4);
        return make_value(idx.one_hot(between(5, 6)));
      }
      default: {
        note("index_select");
        const int axis = random_axis(t);
        const int64_t n = t.shape()[static_cast<size_t>(axis < 0 ? axis + t.ndim() : axis)];
        if (n == 0) throw Skip{};
        Tensor idx = input(chance(0.5) ? DType::Int32 : DType::Int64, {between(0, 5)}, 0, n - 1);
        return make_value(t.index_select(axis, idx));
      }
    }
  }

  // cumsum, topk, and nn.functional's convolution, pools, batch norm (training and evaluation)
  // and interpolation (nearest and bilinear) on a 4-D view of x.
  Value nn_step(const Value& x) {
    const Tensor& t = x.t;
    switch (between(0, 6)) {
      case 0: note("cumsum"); return make_value(t.cumsum(random_axis(t)));
      case 1: {
        if (t.dtype().is_bool()) throw Skip{};
        const int axis = random_axis(t);
        const int64_t n = t.shape()[static_cast<size_t>(axis < 0 ? axis + t.ndim() : axis)];
        auto [values, indices] = t.topk(between(0, n), axis, chance(0.7));
        // The indices of approximate values may swap at near-ties: exact inputs only.
        if (!gradient_ && x.exact && chance(0.5)) {
          note("topk_indices");
          return make_value(indices);
        }
        note("topk");
        return make_value(values);
      }
      default: break;
    }
    if (!t.dtype().is_float() || t.numel() == 0) throw Skip{};
    const Tensor img = t.ndim() == 4   ? t
                       : t.ndim() == 0 ? t.reshape({1, 1, 1, 1})
                                       : t.reshape({1, 1, -1, t.shape().back()});
    const int64_t c = img.shape()[1], h = img.shape()[2], w = img.shape()[3];
    const int64_t kh = between(1, std::min<int64_t>(3, h + 2)), kw = between(1, std::min<int64_t>(3, w + 2));
    namespace F = nn::functional;
    switch (between(0, 5)) {
      case 0: {
        const int64_t groups = chance(0.6) ? 1 : c, out = groups * between(1, 2);
        const Tensor weight = input(img.dtype(), {out, c / groups, kh, kw});
        const Tensor bias = chance(0.5) ? input(img.dtype(), {out}) : Tensor{};
        note("conv2d");
        return make_value(F::conv2d(img, weight, bias, {between(1, 2), between(1, 2)},
                                    {between(0, kh / 2), between(0, kw / 2)}, {between(1, 2), 1}, groups));
      }
      case 1:
        note("max_pool2d");
        return make_value(F::max_pool2d(img, {kh, kw}, chance(0.5) ? F::Size2d{} : F::Size2d{1, 2},
                                        {between(0, kh / 2), between(0, kw / 2)}));
      case 2:
        note("avg_pool2d");
        return make_value(F::avg_pool2d(img, {kh, kw}, {}, {between(0, kh / 2), 0}, false, chance(0.5)));
      case 3: {
        // Training normalises by the batch's statistics; evaluation by running ones (a
        // positive variance), with the weight and bias each present or not.
        const Tensor weight = chance(0.7) ? input(img.dtype(), {c}) : Tensor{};
        const Tensor bias = chance(0.5) ? input(img.dtype(), {c}) : Tensor{};
        if (chance(0.5)) {
          note("batch_norm");
          return make_value(F::batch_norm(img, Tensor{}, Tensor{}, weight, bias, true));
        }
        note("batch_norm_eval");
        return make_value(F::batch_norm(img, input(img.dtype(), {c}), away_from_zero(input(img.dtype(), {c})),
                                        weight, bias, false));
      }
      default: {
        // Upsampling by a scale factor (2 or 1.5) or to a size, smaller or larger.
        const bool bilinear = chance(0.5), by_scale = chance(0.5);
        note(bilinear ? "interpolate_bilinear" : "interpolate_nearest");
        const F::Size2d size =
            by_scale ? F::Size2d{} : F::Size2d{between(1, 2 * h + 1), between(1, 2 * w + 1)};
        const std::optional<double> scale =
            by_scale ? std::optional<double>(chance(0.7) ? 2.0 : 1.5) : std::nullopt;
        return make_value(
            F::interpolate(img, size, scale, bilinear ? "bilinear" : "nearest", bilinear && chance(0.3)));
      }
    }
  }

  Value matmul_step(const Value& x) {
    if (options_.packed_matmul_elements > 0 && chance(0.5)) return packed_matmul_step(x);
    const Tensor& t = x.t;
    if (t.ndim() == 0 || t.dtype().is_bool()) throw Skip{};
    const int64_t k = t.shape().back();
    // Columns past one vector and past one register tile (16 or 32 floats), with tails.
    const int64_t wide = chance(0.3) ? between(6, 40) : 0;
    Shape b;
    switch (between(0, 2)) {
      case 0: b = {k}; break;
      case 1: b = {k, wide ? wide : between(1, 5)}; break;
      default:
        b = {t.ndim() >= 3 ? int64_t{t.shape()[static_cast<size_t>(t.ndim() - 3)]} : between(1, 3), k,
             wide ? wide : between(1, 4)};
    }
    note("matmul");
    row_sums_of(t);
    return make_value(t.matmul(input(chance(0.7) ? t.dtype() : random_dtype(), b)));
  }

  // Sometimes a's row sums are an output too: a sum whose loads the product makes, which
  // schedule/multi_output.hpp stores from the product's kernel (outputs() appends them).
  void row_sums_of(const Tensor& a) {
    if (gradient_ || a.ndim() == 0 || !a.dtype().is_float() || !chance(0.3)) return;
    note("matmul_row_sums");
    row_sums_.push_back(a.sum(-1));
  }

  // A product of fresh float operands past panel packing's thresholds (32 rows, 32 KiB
  // of b: schedule/panel_packing.cpp), sometimes batched, sometimes plus x's sum: odd
  // row, column and k counts, columns past whole panels. BFloat16 operands with an even k
  // take the pair-dot unit where the Target has one (codegen/pair_dot.hpp).
  Value packed_matmul_step(const Value& x) {
    const DType dt = gradient_ || chance(0.3) ? DType::Float64
                     : chance(0.3)            ? DType::BFloat16
                                              : DType::Float32;
    const int64_t rows = between(32, 70), k = between(64, 130), batch = chance(0.25) ? 2 : 1;
    const int64_t fewest = 8192 / k + 1;  // b over 32 KiB in Float32
    const int64_t cols = between(fewest, fewest + 24);
    if (batch * std::max(rows, k) * cols > options_.packed_matmul_elements ||
        batch * rows * k > options_.packed_matmul_elements)
      throw Skip{};
    const Shape a_shape = batch > 1 ? Shape{batch, rows, k} : Shape{rows, k};
    const Shape b_shape = batch > 1 ? Shape{batch, k, cols} : Shape{k, cols};
    const Tensor a = input(dt, a_shape);
    row_sums_of(a);
    Tensor product = a.matmul(input(dt, b_shape));
    if (!x.t.dtype().is_bool() && chance(0.5)) product = product + x.t.sum().cast(dt);
    note(dt == DType::BFloat16 ? "packed_matmul_bf16" : "packed_matmul");
    return make_value(product);
  }

  Value gather_step(const Value& x) {
    const Tensor& t = x.t;
    const int axis = random_axis(t);
    const auto a = static_cast<size_t>(axis < 0 ? axis + t.ndim() : axis);
    const int64_t n = t.shape()[a];
    if (n == 0) throw Skip{};
    Shape is = t.shape();
    for (size_t d = 0; d < is.size(); ++d) is[d] = d == a ? between(1, 4) : between(0, is[d]);
    note("gather");
    return make_value(t.gather(axis, input(chance(0.5) ? DType::Int32 : DType::Int64, is, 0, n - 1)));
  }

  // target.assign(value) on an input buffer of the value's shape, an in-place update of
  // some of its elements (target.assign(where(mask, value, target))), or a write through
  // a slice of it (target.slice(a, lo, hi).assign(value's slice), a KV cache's write);
  // the target becomes an output, and later steps may read it.
  Value assign_step(const Value& x) {
    for (size_t i = 0; i < inputs_.size(); ++i) {  // by index: input() below appends to inputs_
      if (inputs_[i].shape() != x.t.shape() || assigned_ >= 2) continue;
      if (!x.exact && !inputs_[i].dtype().is_float()) continue;
      Tensor value = x.t.cast(inputs_[i].dtype());
      const Shape& shape = x.t.shape();
      const int axis =
          shape.empty() ? 0 : static_cast<int>(between(0, static_cast<int64_t>(shape.size()) - 1));
      if (chance(0.5)) {
        note("masked assign");
        const Tensor mask = input(DType::Bool, x.t.shape());
        value = chance(0.5) ? where(mask, value, inputs_[i]) : where(mask, inputs_[i], value);
      } else if (!shape.empty() && !shape[axis].is_symbolic() && shape[axis].value() > 1 && chance(0.5)) {
        Tensor& target = inputs_[i];
        const int64_t lo = between(0, shape[axis].value() - 1), hi = between(lo + 1, shape[axis].value());
        Tensor piece = target.slice(axis, lo, hi);
        const int64_t kind = between(0, 2);
        if (kind == 1 && !target.dtype().is_bool() && !target.requires_grad()) {
          note("slice add");  // piece += value: in place through the view
          piece += value.slice(axis, lo, hi);
        } else if (kind == 2) {
          note("slice broadcast assign");  // one row of the value written over every row of the piece
          piece.assign(value.slice(axis, lo, lo + 1));
        } else {
          note("slice assign");
          piece.assign(value.slice(axis, lo, hi));
        }
        ++assigned_;
        assigned_targets_.push_back(target);
        return make_value(target);
      } else {
        note("assign");
      }
      Tensor& target = inputs_[i];  // after input() above, which may move inputs_
      target.assign(value);
      ++assigned_;
      assigned_targets_.push_back(target);
      return make_value(target);
    }
    throw Skip{};
  }

  std::vector<Tensor> outputs() {
    std::vector<Tensor> out{values_.back().t};
    const int64_t extra = between(0, 2);
    for (int64_t i = 0; i < extra; ++i) out.push_back(pick(values_).t);
    for (const auto& t : assigned_targets_) out.push_back(t);
    out.insert(out.end(), row_sums_.begin(), row_sums_.end());
    std::vector<Tensor> unique;
    for (const auto& t : out)
      if (std::none_of(unique.begin(), unique.end(), [&](const Tensor& u) { return u.node() == t.node(); }))
        unique.push_back(t);
    if (unique.size() > 1) note("multi_output");
    return unique;
  }

  // Output 0 a scalar loss of the last value and up to two others, then the assigned inputs.
  std::vector<Tensor> gradient_outputs() {
    std::vector<Tensor> parts{values_.back().t};
    for (int64_t i = 0, extra = between(0, 2); i < extra; ++i) parts.push_back(pick(values_).t);
    Tensor loss;
    for (const auto& t : parts) loss = loss.defined() ? loss + loss_term(t) : loss_term(t);
    note("gradient");
    std::vector<Tensor> out{loss};
    out.insert(out.end(), assigned_targets_.begin(), assigned_targets_.end());
    return out;
  }

  Tensor loss_term(const Tensor& v) {
    const Tensor t = v.dtype() == DType::Float64 ? v : v.cast(DType::Float64);
    switch (between(0, 3)) {
      case 0: note("loss_weighted_sum"); return (t * input(DType::Float64, t.shape())).sum();
      case 1: note("loss_sum_of_squares"); return t.square().sum();
      case 2: note("loss_logsumexp"); return t.reshape({-1}).logsumexp(0);
      default:
        if (numel(t.shape()) == 0) return t.sum();
        note("loss_max");
        return t.reshape({-1}).max();
    }
  }

  std::mt19937_64 rng_;
  GenerateOptions options_;
  bool gradient_;
  Coverage* coverage_;
  std::vector<Value> values_;
  std::vector<Tensor> inputs_, assigned_targets_, row_sums_;
  int assigned_ = 0;
};

}  // namespace

std::string generate_program(uint64_t seed, const GenerateOptions& options, Coverage* coverage) {
  Generator g(seed, options, coverage);
  const std::string text = graph_to_text(g.program());
  if (!options.gradient) return text;
  const size_t header_end = text.find('\n') + 1;
  return text.substr(0, header_end) + std::string(kGradientMarker) +
         ": output 0 is a loss; loom-fuzz checks its gradient by every Float64 buffer\n" +
         text.substr(header_end);
}

}  // namespace loom::fuzz
