// Each optimisation of docs/performance.md, proved on real programs by what the
// engine generated (never by timing): the kernels after the kernel passes, and
// the LLVM IR loom emits for them before LLVM's own pipeline runs.
#include "check.hpp"

#include "codegen/codegen.hpp"
#include "codegen/register_tile.hpp"
#include "ir/buffer_access.hpp"
#include "ir/pass_observer.hpp"
#include "ir/symbolic.hpp"
#include "ir/target.hpp"
#include "runtime/kernel_cache.hpp"
#include "src/schedule_cache.hpp"

#include <loom/context.hpp>
#include <loom/debug.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>

using namespace loom;

namespace {

// The kernels compiled while it lives, as the last kernel pass left them.
class Kernels {
 public:
  Kernels() {
    token_ = add_pass_observer([this](const PassEvent& e) {
      if (e.level != PassLevel::Kernel) return;
      std::lock_guard lock(mu_);
      if (e.pass == "optimizer")
        optimized_[std::string(e.kernel)] = e.after, unoptimized_[std::string(e.kernel)] = e.before;
      if (e.pass == kernel_pass_names().back()) lowered_[std::string(e.kernel)] = e.after;
    });
  }
  ~Kernels() { remove_pass_observer(token_); }
  Kernels(const Kernels&) = delete;
  Kernels& operator=(const Kernels&) = delete;

  std::map<std::string, UOpPtr> all() const {
    std::lock_guard lock(mu_);
    return lowered_;
  }
  // The one kernel compiled; fails the test if there were several.
  UOpPtr only() const {
    const auto k = all();
    REQUIRE(k.size() == 1);
    return k.begin()->second;
  }
  // The kernels as the optimiser left them (their choices as RANGE kinds).
  std::map<std::string, UOpPtr> all_optimized() const {
    std::lock_guard lock(mu_);
    return optimized_;
  }
  // Every kernel as the optimiser took it.
  std::map<std::string, UOpPtr> all_unoptimized() const {
    std::lock_guard lock(mu_);
    return unoptimized_;
  }
  // The one kernel as the optimiser left it (its choices as RANGE kinds).
  UOpPtr only_optimized() const {
    std::lock_guard lock(mu_);
    REQUIRE(optimized_.size() == 1);
    return optimized_.begin()->second;
  }

 private:
  uint64_t token_;
  mutable std::mutex mu_;
  std::map<std::string, UOpPtr> lowered_;
  std::map<std::string, UOpPtr> optimized_, unoptimized_;
};

// Kernels are compiled once; forgetting every plan and kernel makes the observer see them.
struct FreshCaches {
  FreshCaches() {
    detail::schedule_cache().clear();
    kernel_cache().clear();
  }
};

int native_f32_lanes() { return current_target().vector_bytes / 4; }

std::string vector_type(int lanes) { return "<" + std::to_string(lanes) + " x float>"; }

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The RANGEs of `kernel` of kind `kind`.
std::vector<UOpPtr> ranges_of_kind(const UOpPtr& kernel, AxisKind kind) {
  std::vector<UOpPtr> out;
  for (const auto& n : toposort(kernel))
    if (n->op == Op::RANGE && n->get<AxisArg>().kind == kind) out.push_back(n);
  return out;
}

int64_t end_of(const UOpPtr& range) { return range->src.at(0)->const_int(); }

// Is `range` among the ranges some REDUCE of `kernel` reduces over?
bool reduced(const UOpPtr& kernel, const UOpPtr& range) {
  for (const auto& n : toposort(kernel))
    if (n->op == Op::REDUCE && std::find(n->src.begin() + 1, n->src.end(), range) != n->src.end())
      return true;
  return false;
}

std::vector<float> run_with_threads(int threads, const std::function<Tensor()>& program) {
  Context ctx{{"THREADS", threads}};
  return program().to_vector<float>();
}

// Realizes `program` with LOOM_THREADS 1 and 2, checks the results are bitwise
// equal, and returns them.
std::vector<float> same_bits_on_1_and_2_threads(const std::function<Tensor()>& program) {
  const auto one = run_with_threads(1, program), two = run_with_threads(2, program);
  REQUIRE(one.size() == two.size());
  CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
  return one;
}

// Every element of a sum of k products within docs/semantics.md's bound for any
// order of the sum: (k + 1) u times the sum of the terms' magnitudes (`scale`).
void check_within_sum_bound(const std::vector<float>& got, const ref::RefTensor& want,
                            const ref::RefTensor& scale, int64_t k) {
  REQUIRE(static_cast<int64_t>(got.size()) == want.size());
  for (int64_t e = 0; e < want.size(); ++e) {
    INFO("element " << e);
    CHECK(std::abs(got[static_cast<size_t>(e)] - want.at(e)) <= (k + 1) * std::ldexp(1.0, -24) * scale.at(e));
  }
}

}  // namespace

TEST_CASE("add [4096,4096]: upcast to the native lanes, vector loads and stores in loom's own IR") {
  FreshCaches fresh;
  Tensor a = Tensor::full({4096, 4096}, 1.5).realize(), b = Tensor::full({4096, 4096}, 2.25).realize();
  Kernels seen;
  Tensor c = (a + b).realize();
  const UOpPtr k = seen.only();
  const auto upcast = ranges_of_kind(seen.only_optimized(), AxisKind::Upcast);
  REQUIRE(upcast.size() == 1);
  CHECK(end_of(upcast[0]) == native_f32_lanes());  // 16 with AVX-512, 8 with AVX2
  const std::string ir = emit_llvm_ir(k, "add");
  INFO(ir);
  const std::string vec = vector_type(native_f32_lanes());
  CHECK(count_of(ir, "load " + vec) == 2);
  CHECK(count_of(ir, "store " + vec) == 1);
  CHECK(c.to_vector<float>()[4096 * 4096 - 1] == 3.75f);
}

// A store past the L3 streams (no read for ownership), fenced before the kernel
// returns; a small output, which the next kernel reads from cache, is cached.
TEST_CASE("a 64 MB output gets non-temporal vector stores and an sfence; a 4 MB one does not") {
  FreshCaches fresh;
  CHECK(current_target().l3_complex_bytes >= (int64_t{1} << 20));
  const EmitOptions l3_of_32mb{.streaming_store_bytes = int64_t{32} << 20};
  Tensor a = Tensor::randn({4096, 4096}).realize(), b = Tensor::randn({4096, 4096}).realize();
  Kernels big;
  Tensor c = (a + b).realize();
  const std::string streamed = emit_llvm_ir(big.only(), "add_big", l3_of_32mb);
  CHECK(count_of(streamed, "!nontemporal") == 1);
  CHECK(count_of(streamed, "@llvm.x86.sse.sfence") >= 1);
  const auto as = a.to_vector<float>(), bs = b.to_vector<float>(), cs = c.to_vector<float>();
  int64_t wrong = 0;
  for (size_t i = 0; i < cs.size(); ++i) wrong += cs[i] != as[i] + bs[i];
  CHECK(wrong == 0);
  Tensor x = Tensor::randn({1024, 1024}).realize();
  Kernels small;
  Tensor y = (x + x).realize();
  const std::string cached = emit_llvm_ir(small.only(), "add_small", l3_of_32mb);
  CHECK(count_of(cached, "store " + vector_type(native_f32_lanes())) == 1);
  CHECK(count_of(cached, "nontemporal") == 0);
  CHECK(count_of(cached, "sfence") == 0);
}

TEST_CASE("float32 sum: several vector accumulators in loom's own IR, folded at the end") {
  FreshCaches fresh;
  Tensor a = Tensor::full({1 << 20}, 0.5).realize();
  Kernels seen;
  Tensor s = a.sum().realize();
  for (const auto& [name, k] : seen.all()) {
    const std::string ir = emit_llvm_ir(k, name);
    INFO(ir);
    CHECK(count_of(ir, "alloca " + vector_type(native_f32_lanes())) >= 2);
  }
  CHECK(s.to_vector<float>()[0] == float(1 << 19));
}

// Each kernel's column tile walks 8 rows at a time, not 4096: split_reduceop's blocks
// of 64 rows, each streamed 8 rows at a time by the column-sum tiles (codegen/recipes.cpp).
TEST_CASE(
    "sum over axis 0 of [4096,4096]: blocks of 64 rows streamed 8 at a time, the SIMD lanes output columns") {
  FreshCaches fresh;
  Tensor a = Tensor::full({4096, 4096}, 0.25).realize();
  Kernels seen;
  Tensor s = a.sum(std::vector<int>{0}, false).realize();
  const auto kernels = seen.all_optimized();
  CHECK(kernels.size() == 2);  // 4096 -> 64 -> 1 rows
  for (const auto& [name, k] : kernels) {
    CAPTURE(name);
    const auto upcast = ranges_of_kind(k, AxisKind::Upcast);
    REQUIRE(upcast.size() == 1);
    CHECK(end_of(upcast[0]) == native_f32_lanes());
    CHECK_FALSE(reduced(k, upcast[0]));
    const auto reduce = ranges_of_kind(k, AxisKind::Reduce);
    REQUIRE(reduce.size() == 1);
    CHECK(end_of(reduce[0]) == 8);
    const auto parallel = ranges_of_kind(k, AxisKind::Parallel);
    REQUIRE(parallel.size() == 1);
    const std::string ir = emit_llvm_ir(seen.all().at(name), name);
    CHECK(count_of(ir, "load " + vector_type(native_f32_lanes())) >= 1);
  }
  REQUIRE(kernels.count("r_64_4096_64") == 1);
  CHECK(end_of(ranges_of_kind(kernels.at("r_64_4096_64"), AxisKind::Parallel)[0]) ==
        64);  // the blocks of rows
  const auto out = s.to_vector<float>();
  CHECK(out[0] == 1024.0f);
  CHECK(out[4095] == 1024.0f);
}

TEST_CASE("a tiny kernel runs on the calling thread: the dispatch counter does not rise") {
  Context ctx{{"THREADS", 2}};
  Tensor a = Tensor::full({64}, 1.0).realize(), b = Tensor::full({64}, 2.0).realize();
  const Counters before = counters();
  Tensor c = (a * b + a).realize();
  const Counters after = counters();
  CHECK(after.kernels_executed > before.kernels_executed);
  CHECK(after.kernels_dispatched == before.kernels_dispatched);
  CHECK(c.to_vector<float>()[63] == 3.0f);
  // A large one is shared between the threads, and counted.
  Tensor x = Tensor::full({2048, 2048}, 1.0).realize();
  const Counters big_before = counters();
  Tensor y = (x * x + x).realize();
  CHECK(counters().kernels_dispatched > big_before.kernels_dispatched);
}

// softmax multiplies by the reciprocal of the row's sum: one division per row, none per element.
// Its exp is computed once per element: buffer_removal keeps it (read by the sum and by the
// normalisation, it would run twice), in a kernel over rows that computes each row's max then
// its exps; the second computes each row's sum then its normalised values while the row is in
// L1 (docs/pipeline.md, rules 3 and 4), each loop in SIMD lanes (the optimiser).
TEST_CASE(
    "softmax [256, 1024]: the exp once per element, two kernels with lanes in each loop, a division per "
    "row") {
  FreshCaches fresh;
  const Tensor x = Tensor::randn({256, 1024}).realize();
  Kernels seen;
  const Tensor y = x.softmax(-1).realize();
  const auto kernels = seen.all();
  REQUIRE(kernels.size() == 2);
  int exps = 0;
  for (const auto& [name, k] : seen.all_unoptimized())
    for (const UOpPtr& u : toposort(k)) exps += u->op == Op::EXP;
  CHECK(exps == 1);
  int vector_divisions = 0, scalar_divisions = 0;
  for (const auto& [name, k] : kernels) {
    const std::string ir = emit_llvm_ir(k, name);
    vector_divisions += count_of(ir, "fdiv <");
    scalar_divisions += count_of(ir, "fdiv float");
    CHECK(count_of(ir, "load <") >= 2);  // the max's and the exps', or the sum's and the normalising loop's
  }
  CHECK(vector_divisions == 0);
  CHECK(scalar_divisions == 1);
  const auto xs = x.to_vector<float>(), ys = y.to_vector<float>();
  for (int64_t row : {0, 255}) {
    double sum = 0;
    for (int64_t j = 0; j < 1024; ++j) sum += std::exp(static_cast<double>(xs[row * 1024 + j]));
    for (int64_t j : {0, 511, 1023}) {
      const double want = std::exp(static_cast<double>(xs[row * 1024 + j])) / sum;
      CHECK(std::abs(ys[row * 1024 + j] - want) <= 1e-6 * want);  // exp, the sum, 1/sum, the product
    }
  }
}

TEST_CASE("results are bitwise equal for LOOM_THREADS 1 and 2") {
  Tensor a = Tensor::randn({1024, 1000}).realize();
  Tensor rows = Tensor::randn({2048, 1024}).realize();  // summed over axis 0 in blocks of 64 rows
  const std::vector<std::function<Tensor()>> programs{
      [&] { return rows.sum(std::vector<int>{0}, false); },
      [&] { return a.sum(); },
      [&] { return a.sum(std::vector<int>{0}, false); },
      [&] { return a.sum(std::vector<int>{1}, false); },
      [&] { return a.softmax(1); },
      [&] { return (a * a + 1.0f).exp().sum(); },
  };
  for (size_t i = 0; i < programs.size(); ++i) {
    CAPTURE(i);
    same_bits_on_1_and_2_threads(programs[i]);
  }
}

TEST_CASE("a float32 sum is exact on ones far past 2^24, and within 1e-6 of float64 on random data") {
  CHECK(Tensor::ones({20000000}).sum().to_vector<float>()[0] == 20000000.0f);
  CHECK(Tensor::ones({20000000}).mean().to_vector<float>()[0] == 1.0f);
  const int64_t big = int64_t{1} << 31;
  CHECK(Tensor::ones({big}).sum().to_vector<float>()[0] == static_cast<float>(big));
  Tensor r = Tensor::rand({10000000}).realize();
  const auto values = r.to_vector<float>();
  double exact = 0;
  for (float v : values) exact += v;
  const double got = r.sum().to_vector<float>()[0];
  CHECK(std::abs(got - exact) / exact <= 1e-6);
}

TEST_CASE("relu(a*b+c).exp(): one kernel, vectorised, with no libm call in loom's own IR") {
  FreshCaches fresh;
  Tensor a = Tensor::full({1024, 1024}, 0.5).realize(), b = Tensor::full({1024, 1024}, -1.5).realize();
  Tensor c = Tensor::full({1024, 1024}, 2.0).realize();
  Kernels seen;
  Tensor y = (a * b + c).relu().exp().realize();
  const auto kernels = seen.all();
  REQUIRE(kernels.size() == 1);
  const std::string ir = emit_llvm_ir(kernels.begin()->second, kernels.begin()->first);
  INFO(ir);
  CHECK(count_of(ir, "@llvm.exp") == 0);
  CHECK(count_of(ir, "@exp") == 0);
  CHECK(count_of(ir, "store " + vector_type(native_f32_lanes())) >= 1);
  const float want = std::exp(1.25f);
  CHECK(std::abs(y.to_vector<float>()[12345] - want) <= 2e-7f * want);
}

// The Float32 exp family from UOps (ir/float_math.hpp): one range reduction per exp, clamps
// as compare-and-select, n read from the float's bits (no float-to-int conversion, no floor).
TEST_CASE("exp, sigmoid and tanh on Float32: one range reduction, no libm call, no conversions") {
  for (const auto& [name, f] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&)>>{
           {"exp", [](const Tensor& t) { return t.exp(); }},
           {"sigmoid", [](const Tensor& t) { return t.sigmoid(); }},
           {"tanh", [](const Tensor& t) { return t.tanh(); }}}) {
    CAPTURE(name);
    FreshCaches fresh;
    const Tensor x = Tensor::full({256, 256}, 0.75).realize();
    Kernels seen;
    const Tensor y = f(x).realize();
    const UOpPtr k = seen.only();
    const std::string ir = emit_llvm_ir(k, seen.all().begin()->first);
    INFO(ir);
    // The only calls: multiply-adds, and on AVX-512 one vscalefps scaling exp's by 2^n (tanh's
    // 2^n is exact, its bits made directly).
    const size_t scalings =
        count_of(ir, "call " + vector_type(native_f32_lanes()) + " @llvm.x86.avx512.mask.scalef");
    CHECK(scalings == (current_target().isa.avx512f && name != "tanh" ? 1 : 0));
    CHECK(count_of(ir, "call " + vector_type(native_f32_lanes()) + " @llvm.fmuladd") + scalings ==
          count_of(ir, "call "));
    for (const char* absent : {"@llvm.exp", "@llvm.maximum", "fptosi", "@llvm.trunc", "@llvm.floor"})
      CHECK(count_of(ir, absent) == 0);
    // Two multiply-adds for the Cody-Waite reduction, one for n, the polynomial's degree: one
    // reduction, where there used to be two (exp's and then EXP2's of the reduced argument).
    CHECK(count_of(ir, "@llvm.fmuladd") <= 2 + 1 + 8 + 1);  // + the declaration
    const double want = name == "exp"    ? std::exp(0.75)
                        : name == "tanh" ? std::tanh(0.75)
                                         : 1 / (1 + std::exp(-0.75));
    CHECK(std::abs(y.to_vector<float>()[777] - want) <= 3e-7 * want);
  }
}

TEST_CASE(
    "linear + bias + relu: one kernel with a register tile, within the FMA tolerance of docs/semantics.md") {
  FreshCaches fresh;
  // Tails in rows and columns; 31 rows, below the 32 that b's copy into panels needs
  // (schedule/panel_packing.cpp), so one kernel (the packed product: below).
  const int64_t m = 31, k = 300, n = 53;
  Tensor a = Tensor::randn({m, k}).realize(), w = Tensor::randn({k, n}).realize(),
         b = Tensor::randn({n}).realize();
  const Tensor y = (a.matmul(w) + b).relu();
  const ref::RefTensor want = test::reference(y);
  const ref::RefTensor scale = test::reference(a.abs().matmul(w.abs()) + b.abs());  // sum of |a w| + |b|
  Kernels seen;
  const std::vector<float> got = Tensor(y).realize().to_vector<float>();
  const UOpPtr opt = seen.only_optimized();                  // bias and relu fused: one kernel
  CHECK(ranges_of_kind(opt, AxisKind::Unroll).size() == 2);  // rows, column vectors
  CHECK(ranges_of_kind(opt, AxisKind::Upcast).size() == 1);
  check_within_sum_bound(got, want, scale, k);
}

TEST_CASE("a tiled matmul is bitwise equal for LOOM_THREADS 1 and 2") {
  Tensor a = Tensor::randn({515, 300}).realize(), b = Tensor::randn({300, 517}).realize();
  same_bits_on_1_and_2_threads([&] { return a.matmul(b); });
}

TEST_CASE(
    "GEMV and skinny products on odd shapes agree with the reference; GEMV is bitwise equal on 1 and 2 "
    "threads") {
  struct Case {
    int64_t m, k, n;
  };
  // [1, K] @ [K, N]: one-row tiles of one cache line, k in blocks (100 = 10 x 10) or
  // whole (37 and 97 are prime); m = 3: the many-row tile with padded rows.
  for (const Case c : {Case{1, 37, 53}, Case{1, 100, 300}, Case{1, 97, 24}, Case{3, 64, 33}}) {
    INFO("[" << c.m << "," << c.k << "] @ [" << c.k << "," << c.n << "]");
    FreshCaches fresh;
    Tensor a = Tensor::randn({c.m, c.k}).realize(), b = Tensor::randn({c.k, c.n}).realize();
    const Tensor y = a.matmul(b);
    const ref::RefTensor want = test::reference(y), scale = test::reference(a.abs().matmul(b.abs()));
    Kernels seen;
    const std::vector<float> got = Tensor(y).realize().to_vector<float>();
    CHECK(ranges_of_kind(seen.only_optimized(), AxisKind::Upcast).size() == 1);  // columns in the lanes
    check_within_sum_bound(got, want, scale, c.k);
  }
  // Two chunks of 2048 columns, one per thread, each summed over k in the same order.
  Tensor x = Tensor::randn({1, 72}).realize(), w = Tensor::randn({72, 4096}).realize();
  same_bits_on_1_and_2_threads([&] { return x.matmul(w); });
}

TEST_CASE(
    "a GEMV of 2 MB or more: parts of 64 rows of b that the threads share, then their sum; bitwise equal "
    "on 1 and 2 threads") {
  const int64_t k = 192, n = 4096;  // 3 MB of b: 3 parts
  Tensor x = Tensor::randn({1, k}).realize(), w = Tensor::randn({k, n}).realize();
  FreshCaches fresh;
  Kernels seen;
  const auto one = run_with_threads(1, [&] { return x.matmul(w); });
  const auto kernels = seen.all_optimized();
  REQUIRE(kernels.size() == 2);              // the parts, then the sum of the 3 partial rows
  REQUIRE(kernels.contains("r_3_4096_64"));  // 3 parts x 4096 columns, 64 rows of b each
  const auto parallel = ranges_of_kind(kernels.at("r_3_4096_64"), AxisKind::Parallel);
  REQUIRE(parallel.size() == 1);
  CHECK(end_of(parallel[0]) == 3);  // the parts, outermost, each 64 whole rows of b
  const auto two = run_with_threads(2, [&] { return x.matmul(w); });
  REQUIRE(one.size() == two.size());
  CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
  // Against float64 sums, within (k + 1) u sum |a b| (docs/semantics.md).
  const std::vector<float> a = x.to_vector<float>(), b = w.to_vector<float>();
  for (int64_t j = 0; j < n; j += 5) {
    double want = 0, scale = 0;
    for (int64_t i = 0; i < k; ++i) {
      const double p = double(a[size_t(i)]) * b[size_t(i * n + j)];
      want += p, scale += std::abs(p);
    }
    INFO("column " << j);
    CHECK(std::abs(one[size_t(j)] - want) <= (k + 1) * std::ldexp(1.0, -24) * scale);
  }
}

// The name of the one optimised kernel with a REDUCE: a packed matmul's product
// (the other kernel is the copy of b into panels).
std::string the_product(const std::map<std::string, UOpPtr>& optimized) {
  std::string found;
  for (const auto& [name, k] : optimized) {
    const auto nodes = toposort(k);
    if (std::none_of(nodes.begin(), nodes.end(), [](const UOpPtr& u) { return u->op == Op::REDUCE; }))
      continue;
    REQUIRE(found.empty());
    found = name;
  }
  REQUIRE_FALSE(found.empty());
  return found;
}

TEST_CASE("LOOM_VECTOR_WIDTH=512: a 1024 matmul's tile has 12 accumulators of 16 lanes, and still runs") {
  FreshCaches fresh;
  Tensor a = Tensor::randn({1024, 1024}).realize(), b = Tensor::randn({1024, 1024}).realize();
  const std::vector<float> native = a.matmul(b).realize().to_vector<float>();
  Context wide{{"VECTOR_WIDTH", 512}};
  Kernels seen;  // compiled again: the flag is part of the kernel cache's key
  const std::vector<float> got = a.matmul(b).realize().to_vector<float>();
  // Three kernels: a copied into row panels of 6 (its rows 4 KiB apart share one set of
  // L1), b into panels of 32 columns (two 16-lane vectors), then the tile.
  REQUIRE(seen.all().size() == 3);
  const std::string product = the_product(seen.all_optimized());
  const auto upcast = ranges_of_kind(seen.all_optimized().at(product), AxisKind::Upcast);
  REQUIRE(upcast.size() == 1);
  CHECK(end_of(upcast[0]) == 16);
  const std::string ir = emit_llvm_ir(seen.all().at(product), "matmul_1024");
  CHECK(count_of(ir, "alloca <16 x float>") >= 12);
  CHECK(count_of(ir, "gather") == 0);
  REQUIRE(got.size() == native.size());
  for (size_t e = 0; e < got.size(); e += 4099) {  // same blocks of k, each summed in the same order
    INFO("element " << e);
    CHECK(got[e] == native[e]);
  }
}

// Kernels of a matmul whose b, [k, n] row-major, many rows read: b's panel copy and the
// product, or the product alone where b is one panel already: n columns one tile spans
// (the usual panel's, or whole vectors within Target::tile_wide_col_vectors).
size_t panel_kernels(int64_t n) {
  const Target t = current_target();
  const int64_t lanes = t.vector_bytes / 4, usual = matmul_panel_bytes(*flags()) / 4;
  const bool one_panel = n == usual || (n > usual && t.one_tile_wide(n, lanes));
  return one_panel ? 1 : 2;
}

// A packed matmul's values against the reference interpreter, within the
// bound of docs/semantics.md for any order of a sum of products: (k + 1) u sum |a b|.
// Two kernels (b's panel copy, the product) or three (a's row panels too); one where b
// is read as its panel (panel_kernels).
void check_matmul(const Tensor& a, const Tensor& b, const Tensor& bias, int64_t k, size_t kernels = 2) {
  FreshCaches fresh;
  const Tensor y = bias.numel() > 0 ? (a.matmul(b) + bias).relu() : a.matmul(b);
  const Tensor bound = bias.numel() > 0 ? a.abs().matmul(b.abs()) + bias.abs() : a.abs().matmul(b.abs());
  const ref::RefTensor want = test::reference(y), scale = test::reference(bound);
  Kernels seen;
  const std::vector<float> got = Tensor(y).realize().to_vector<float>();
  CHECK(seen.all().size() == kernels);  // the panel copies, then the product with its epilogue
  const UOpPtr product = seen.all_optimized().at(the_product(seen.all_optimized()));
  CHECK(ranges_of_kind(product, AxisKind::Unroll).size() == 2);  // a register tile
  check_within_sum_bound(got, want, scale, k);
}

// Kernels of a packed matmul (b in 4 panels or more) whose tile rows of a are `row_bytes`
// apart (4 KiB: k = 1024 floats): three (a in row panels too) where more of them fall in
// one set of L1 than the ways the b panel's kc x W slice leaves (at 4 KiB all 6 rows in one
// set of 64, against 12 - 8 ways with AVX-512 and 12 - 4 with AVX2 on a 48 KiB 12-way L1;
// on a 32 KiB 8-way L1 the slice takes every way with AVX-512), else two.
size_t a_row_panel_kernels(int64_t row_bytes = 4096) {
  const Flags& f = *flags();
  const Target t = current_target();
  const int64_t sets = t.l1d_sets(), line = t.line_bytes;
  const int64_t free = t.l1d_ways - matmul_panel_depth(f) * matmul_panel_bytes(f) / (sets * line);
  std::vector<int64_t> in_set(static_cast<size_t>(sets), 0);
  for (int64_t r = 0; r < matmul_panel_rows(f); ++r)
    if (++in_set[static_cast<size_t>(row_bytes * r / line % sets)] > free) return 3;
  return 2;
}

// The largest stride, in elements, at which any kernel seen reads memory along one of its ranges.
int64_t widest_read_stride(const Kernels& seen) {
  int64_t widest = 0;
  for (const auto& [name, kernel] : seen.all_unoptimized()) {
    const std::vector<UOpPtr> nodes = toposort(kernel);
    for (const auto& load : nodes)
      if (load->op == Op::LOAD)
        for (const auto& range : nodes)
          if (range->op == Op::RANGE)
            widest = std::max(widest, address_stride(load->src[0], range).value_or(0));
  }
  return widest;
}

TEST_CASE("an intermediate of rows a whole L1 set stride long is padded a line a row, values unchanged") {
  // A softmax's output [2, 48, 1024] read down its columns by a product (attention's dV =
  // P^T dO): rows of 4 KiB start in one set of L1 on a 64-set L1 of 64-byte lines, so
  // row_padding lays them 1040 floats apart (schedule/row_padding.hpp).
  FreshCaches fresh;
  const Tensor x = Tensor::randn({2, 48, 1024}).realize(), g = Tensor::randn({2, 48, 8}).realize();
  const Tensor p = x.softmax(-1);
  const Tensor y = p.transpose(1, 2).matmul(g), bound = p.abs().transpose(1, 2).matmul(g.abs());
  const ref::RefTensor want = test::reference(y), scale = test::reference(bound);
  Kernels seen;
  const std::vector<float> got = Tensor(y).realize().to_vector<float>();
  check_within_sum_bound(got, want, scale, 48);
  const Target t = current_target();
  const bool padded = 1024 * 4 % (t.l1d_sets() * t.line_bytes) == 0;
  CHECK(widest_read_stride(seen) == 48 * (padded ? 1024 + t.line_bytes / 4 : 1024));
}

TEST_CASE("packed matmuls (b in panels, the tile in blocks of rows and of k) agree with the reference") {
  const Tensor none = Tensor::zeros({0});
  SUBCASE("rows that leave a tail, k in blocks of 200") {
    check_matmul(Tensor::randn({100, 600}).realize(), Tensor::randn({600, 64}).realize(), none, 600,
                 panel_kernels(64));
  }
  SUBCASE("batched") {
    check_matmul(Tensor::randn({2, 50, 300}).realize(), Tensor::randn({2, 300, 32}).realize(), none, 300,
                 panel_kernels(32));
  }
  // Columns that do not fill the panels: the last one padded with zeros, the stores guarded.
  SUBCASE("columns padded, batched: 2 x 40 x 261 @ 2 x 261 x 35") {
    check_matmul(Tensor::randn({2, 40, 261}).realize(), Tensor::randn({2, 261, 35}).realize(), none, 261);
  }
  SUBCASE("columns padded (50 of 64), with bias and relu read where j < n") {
    check_matmul(Tensor::randn({37, 200}).realize(), Tensor::randn({200, 50}).realize(),
                 Tensor::randn({50}).realize(), 200);
  }
  SUBCASE("a transposed (the weight gradient's x^T dy), k of 513 in blocks of 171") {
    check_matmul(Tensor::randn({513, 40}).realize().transpose(), Tensor::randn({513, 48}).realize(), none,
                 513, panel_kernels(48));
  }
  SUBCASE("linear + bias + relu: the epilogue at the last block of k") {
    // 64 columns, not the MLP's 512: the reference runs every product of both
    // matmuls (y and its bound), and under the sanitizers that was minutes.
    check_matmul(Tensor::randn({64, 784}).realize(), Tensor::randn({784, 64}).realize(),
                 Tensor::randn({64}).realize(), 784, panel_kernels(64));
  }
  // k = 1024: a's rows 4 KiB apart, so a goes in row panels of 6 too where they crowd
  // one set of L1 and b makes at least 4 panels (schedule/panel_packing.cpp): 128
  // columns are 8 panels of 16 with AVX2 and 4 of 32 with AVX-512. Whether they crowd
  // depends on the Target (a_row_panel_kernels), so these hold on any.
  const size_t kernels = a_row_panel_kernels();
  SUBCASE("a in row panels: 37 rows, the last panel's one real row repeated") {
    check_matmul(Tensor::randn({37, 1024}).realize(), Tensor::randn({1024, 128}).realize(), none, 1024,
                 kernels);
  }
  SUBCASE("a in row panels, batched") {
    check_matmul(Tensor::randn({2, 40, 1024}).realize(), Tensor::randn({2, 1024, 128}).realize(), none, 1024,
                 kernels);
  }
  SUBCASE("a in row panels, with bias and relu, columns padded (134 of 144 or 160)") {
    check_matmul(Tensor::randn({42, 1024}).realize(), Tensor::randn({1024, 134}).realize(),
                 Tensor::randn({134}).realize(), 1024, kernels);
  }
  // n = 1024: b's rows 4 KiB apart, so its panel copy reads prefetch_streams lines of a row
  // a step, several panels unrolled (codegen/heuristic.cpp, page_stride_unroll).
  SUBCASE("b's rows a page apart: its copy several panels a step") {
    check_matmul(Tensor::randn({32, 16}).realize(), Tensor::randn({16, 1024}).realize(), none, 16,
                 a_row_panel_kernels(16 * 4));
  }
}

TEST_CASE("padded products of 50 and 49 columns (both padded to 64) are kernels of their own") {
  // Same shapes of loops once padded: only n (the stores' guard, the rows' stride) tells
  // them apart, so the kernel cache must key on it. Each column's sum runs in the same
  // order in both, so the 49 columns they share are bitwise equal.
  const Tensor a = Tensor::randn({40, 260}).realize(), b50 = Tensor::randn({260, 50}).realize();
  const Tensor b49 = b50.shrink({{0, 260}, {0, 49}}).realize();
  const std::vector<float> y50 = a.matmul(b50).realize().to_vector<float>();
  const std::vector<float> y49 = a.matmul(b49).realize().to_vector<float>();
  REQUIRE(y50.size() == 40 * 50);
  REQUIRE(y49.size() == 40 * 49);
  const std::vector<float> av = a.to_vector<float>(), bv = b50.to_vector<float>();
  for (size_t i = 0; i < 40; ++i) {
    INFO("row " << i);
    CHECK(std::memcmp(&y49[i * 49], &y50[i * 50], 49 * sizeof(float)) == 0);
    double last = 0, scale = 0;  // column 49, which only the 50-column product has
    for (size_t k = 0; k < 260; ++k) {
      last += double(av[i * 260 + k]) * bv[k * 50 + 49];
      scale += std::abs(double(av[i * 260 + k]) * bv[k * 50 + 49]);
    }
    CHECK(std::abs(y50[i * 50 + 49] - last) <= 261 * std::ldexp(1.0, -24) * scale);
  }
}

// The outputs a kernel's loops compute, padding included: the product of its END's ranges.
int64_t outputs_computed(const UOpPtr& kernel) {
  int64_t n = 1;
  for (const auto& r : toposort(kernel))
    if (r->op == Op::END)
      for (size_t i = 1; i < r->src.size(); ++i) n *= end_of(r->src[i]);
  return n;
}

TEST_CASE(
    "the matmul sweep's 504 and 516 are scheduled as their neighbours: b in panels, the 6-row tile summing "
    "k whole, an even count of row blocks, at most 10% padding") {
  // bench/compare once timed 504 and 516 at 1.5 times their neighbours' time per FLOP, under
  // load, and no run after did (docs/performance.md, the sweep): the schedule is the same.
  for (const int64_t n : {503, 504, 505, 515, 516, 517}) {
    INFO("n = " << n);
    FreshCaches fresh;
    const Tensor a = Tensor::randn({n, n}).realize(), b = Tensor::randn({n, n}).realize();
    Kernels seen;
    a.matmul(b).realize();
    const auto kernels = seen.all_optimized();
    // b's copy into panels, a's too where its rows (about 2 KiB apart) crowd L1, the product
    CHECK(kernels.size() == a_row_panel_kernels(4 * n));
    const UOpPtr product = kernels.at(the_product(kernels));
    std::vector<int64_t> tile;
    for (const auto& r : ranges_of_kind(product, AxisKind::Unroll)) tile.push_back(end_of(r));
    std::sort(tile.begin(), tile.end());
    CHECK(tile == std::vector<int64_t>{2, 6});  // 6 rows x 2 vectors
    const auto upcast = ranges_of_kind(product, AxisKind::Upcast);
    REQUIRE(upcast.size() == 1);
    CHECK(end_of(upcast[0]) == native_f32_lanes());
    const auto reduce = ranges_of_kind(product, AxisKind::Reduce);
    REQUIRE(reduce.size() == 1);
    CHECK(end_of(reduce[0]) == n);  // columns padded to whole panels: k in one block
    const auto parallel = ranges_of_kind(product, AxisKind::Parallel);
    REQUIRE(parallel.size() == 1);
    CHECK(end_of(parallel[0]) % 2 == 0);  // blocks of rows, as many for each of two threads
    CHECK(outputs_computed(product) >= n * n);
    CHECK(outputs_computed(product) * 10 <= n * n * 11);
  }
}

TEST_CASE(
    "attention's softmax is computed once, by a copy of its own, and both products get register tiles") {
  // 128 queries and keys of 64 (k and v 32 KiB a head): q k^T reads k transposed (k packed
  // into panels of its rows), and softmax(.) v's a, exp(s - max) / sum per element, is
  // realized row-major before the product.
  FreshCaches fresh;
  const Tensor q = Tensor::randn({1, 2, 128, 64}).realize(), k = Tensor::randn({1, 2, 128, 64}).realize();
  const Tensor v = Tensor::randn({1, 2, 128, 64}).realize();
  const Tensor causal = Tensor::arange(128).unsqueeze(0) <= Tensor::arange(128).unsqueeze(1);
  const Tensor y = nn::scaled_dot_product_attention(q, k, v, causal);
  const ref::RefTensor want = test::reference(y);
  Kernels seen;
  const std::vector<float> got = Tensor(y).realize().to_vector<float>();
  int tiled = 0;
  for (const auto& [name, kernel] : seen.all_optimized()) {
    if (!matmul_axes(seen.all_unoptimized().at(name))) continue;  // a product of two reads summed
    const auto nodes = toposort(kernel);
    INFO(name);
    CHECK(ranges_of_kind(kernel, AxisKind::Unroll).size() == 2);  // rows x vectors: a register tile
    CHECK(std::none_of(nodes.begin(), nodes.end(),
                       [](const UOpPtr& u) { return u->op == Op::EXP || u->op == Op::EXP2; }));
    ++tiled;
  }
  CHECK(tiled == 2);  // q k^T and softmax(.) v
  REQUIRE(static_cast<int64_t>(got.size()) == want.size());
  for (int64_t e = 0; e < want.size(); ++e) {
    INFO("element " << e);
    CHECK(std::abs(got[static_cast<size_t>(e)] - want.at(e)) <= 1e-4 * (1 + std::abs(want.at(e))));
  }
}

TEST_CASE(
    "a packed matmul is bitwise equal for LOOM_THREADS 1 and 2, and LOOM_NOOPT keeps one plain kernel") {
  Tensor a = Tensor::randn({515, 700}).realize(), b = Tensor::randn({700, 512}).realize();
  const std::vector<float> one = same_bits_on_1_and_2_threads([&] { return a.matmul(b); });
  {  // a in row panels too (k = 1024)
    Tensor x = Tensor::randn({515, 1024}).realize(), w = Tensor::randn({1024, 64}).realize();
    same_bits_on_1_and_2_threads([&] { return x.matmul(w); });
  }
  {  // rows a multiple of the row panels' height: the panels are the tiles the threads share
    Tensor x = Tensor::randn({516, 1024}).realize(), w = Tensor::randn({1024, 64}).realize();
    const std::vector<float> x1 = same_bits_on_1_and_2_threads([&] { return x.matmul(w); });
    Context plain{{"NOOPT", 1}};
    const std::vector<float> want = x.matmul(w).realize().to_vector<float>();
    REQUIRE(want.size() == x1.size());
    for (size_t e = 0; e < want.size(); e += 7)
      CHECK(std::abs(x1[e] - want[e]) <= 1e-3f * (1 + std::abs(want[e])));
  }
  FreshCaches fresh;
  Context plain{{"NOOPT", 1}};
  Kernels seen;
  const std::vector<float> got = a.matmul(b).realize().to_vector<float>();
  const UOpPtr loops = seen.only_optimized();  // no tile to feed: no panels
  CHECK(ranges_of_kind(loops, AxisKind::Unroll).empty());
  CHECK(ranges_of_kind(loops, AxisKind::Upcast).empty());
  REQUIRE(got.size() == one.size());
  for (size_t e = 0; e < got.size(); e += 997)
    CHECK(std::abs(got[e] - one[e]) <= 1e-3f * (1 + std::abs(one[e])));
}

namespace {
// The gradients of a two-layer linear + bias + relu network with respect to its four
// parameters, realized together (as an optimiser's step does), their values in turn.
std::vector<float> linear_relu_gradients(const std::vector<Tensor>& p, const Tensor& x,
                                         const Tensor& weights) {
  const Tensor h = (x.matmul(p[0].transpose()) + p[1]).relu();
  const Tensor loss = ((h.matmul(p[2].transpose()) + p[3]).relu() * weights).sum();
  std::vector<Tensor> g = gradient(loss, p);
  loom::realize(g);
  std::vector<float> out;
  for (const Tensor& t : g) {
    const std::vector<float> v = t.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}
}  // namespace

TEST_CASE(
    "a linear + bias + relu backward on tail shapes: tiled products with the relu masks inside, bitwise "
    "equal for LOOM_THREADS 1 and 2, and LOOM_NOOPT's loop nests agree") {
  // Sizes that fill no tile: 67 rows (6-row tiles), 45 and 70 columns (16-column tiles).
  manual_seed(5);
  auto draw = [](Shape shape) { return Tensor::randn(std::move(shape)).realize(); };
  const std::vector<Tensor> p = {draw({70, 45}), draw({70}), draw({13, 70}), draw({13})};
  const Tensor x = draw({67, 45}), weights = draw({67, 13});
  FreshCaches fresh;
  Kernels seen;
  std::vector<float> one, two;
  {
    Context single{{"THREADS", 1}};
    one = linear_relu_gradients(p, x, weights);
  }
  // 5 sums (and any copies into panels): the two layers forward (the second's epilogue also
  // writing its relu-masked dY), dY w2 (the first layer's mask in its epilogue), and dW2 and
  // dW1, each storing its bias gradient too, the column sum of the dY it reads
  // (schedule/multi_output.hpp). A relu or its mask is only ever inside one of them, never a
  // pass of its own.
  int sums = 0, backward_products = 0;
  for (const auto& [name, kernel] : seen.all_optimized()) {
    const auto nodes = toposort(kernel);
    INFO(name);
    const bool masks = std::any_of(nodes.begin(), nodes.end(), [](const UOpPtr& n) {
      return n->op == Op::CMPLT && n->src[0]->is_const() && n->src[0]->const_value() == 0;
    });
    const bool sum =
        std::any_of(nodes.begin(), nodes.end(), [](const UOpPtr& n) { return n->op == Op::REDUCE; });
    CHECK((!masks || sum));
    sums += sum;
    // The backward's products sum over the batch (dW1, dW2) or the 13 outputs (dY w2); the
    // forward's over 45 and 70. Each backward product is a register tile (rows x vectors),
    // its tails padded or masked (its END, the first: a bias gradient beside it has its own).
    const auto axes = matmul_axes(seen.all_unoptimized().at(name));
    if (!axes || (end_of(axes->reduce) != 67 && end_of(axes->reduce) != 13)) continue;
    CHECK(ranges_of_kind(kernel->src[0], AxisKind::Unroll).size() == 2);
    ++backward_products;
  }
  CHECK(sums == 5);
  CHECK(backward_products == 3);
  {
    Context both{{"THREADS", 2}};
    two = linear_relu_gradients(p, x, weights);
  }
  REQUIRE(one.size() == two.size());
  CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
  Context plain{{"NOOPT", 1}};
  const std::vector<float> want = linear_relu_gradients(p, x, weights);
  REQUIRE(want.size() == one.size());
  double largest = 0;
  for (float v : want) largest = std::max(largest, std::abs(static_cast<double>(v)));
  CHECK(largest > 0);
  // Float32 sums of at most 70 products, in the tiles' order against the loops': within
  // 1e-5 of the largest gradient.
  for (size_t e = 0; e < want.size(); ++e) {
    INFO("element " << e);
    CHECK(std::abs(one[e] - want[e]) <= 1e-5 * largest);
  }
}

TEST_CASE("log2 and log on Float32: polynomial code in full-width vectors, no libm call") {
  for (const auto& [name, f] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&)>>{
           {"log2", [](const Tensor& t) { return t.log2(); }},
           {"log", [](const Tensor& t) { return t.log(); }}}) {
    CAPTURE(name);
    FreshCaches fresh;
    const Tensor x = Tensor::full({256, 256}, 3.0).realize();
    Kernels seen;
    const Tensor y = f(x).realize();
    const std::string ir = emit_llvm_ir(seen.only(), seen.all().begin()->first);
    INFO(ir);
    CHECK(count_of(ir, "call " + vector_type(native_f32_lanes()) + " @llvm.fmuladd") ==
          count_of(ir, "call "));
    CHECK(count_of(ir, "@llvm.log") == 0);
    CHECK(count_of(ir, "fdiv " + vector_type(native_f32_lanes())) == 1);  // s = f / (2 + f)
    const double want = name == "log2" ? std::log2(3.0) : std::log(3.0);
    CHECK(std::abs(y.to_vector<float>()[4321] - want) <= 2.5e-7 * want);
  }
}

// Float32 SIN and COS from UOps (ir/float_math.hpp): a Payne-Hanek reduction and polynomials
// in Float64 lanes as many as the native Float32 vector's, so no libm call per lane.
TEST_CASE("sin and cos on Float32: no libm call, vector code (Float64 inside, for the accuracy)") {
  for (const auto& [name, f] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&)>>{
           {"sin", [](const Tensor& t) { return t.sin(); }},
           {"cos", [](const Tensor& t) { return t.cos(); }}}) {
    CAPTURE(name);
    FreshCaches fresh;
    const Tensor x = Tensor::full({256, 256}, 1e10).realize();
    Kernels seen;
    const Tensor y = f(x).realize();
    const std::string ir = emit_llvm_ir(seen.only(), seen.all().begin()->first);
    INFO(ir);
    for (const char* absent : {"@llvm.sin", "@llvm.cos", "@sin", "@cos"}) CHECK(count_of(ir, absent) == 0);
    const int lanes = native_f32_lanes();
    const std::string doubles = "<" + std::to_string(lanes) + " x double>";
    // The calls left are intrinsics that are one instruction or a few on these vectors (the
    // float-to-integer casts are compares, selects and a plain fptosi: codegen/numeric_lowering.cpp).
    CHECK(count_of(ir, "call ") == count_of(ir, "call " + doubles + " @llvm.trunc") +
                                       count_of(ir, "call " + doubles + " @llvm.fmuladd"));
    CHECK(count_of(ir, "call " + doubles + " @llvm.fmuladd") >= 12);  // the polynomials
    CHECK(count_of(ir, "load " + vector_type(lanes)) == 1);
    CHECK(count_of(ir, "store " + vector_type(lanes)) >= 1);
    // 1e10 as a float is 10000000000 exactly; sin and cos of it, rounded to float.
    const double want = name == "sin" ? -0.48750602508751069 : 0.87311962267685600;
    CHECK(std::abs(y.to_vector<float>()[4321] - want) <= 0x1p-25);
  }
}

TEST_CASE("pow on Float32: no libm call, vector code (Float64 inside, for the accuracy)") {
  FreshCaches fresh;
  const Tensor x = Tensor::full({256, 256}, 1.5).realize(), e = Tensor::full({256, 256}, 2.25).realize();
  Kernels seen;
  const Tensor y = x.pow(e).realize();
  const std::string ir = emit_llvm_ir(seen.only(), seen.all().begin()->first);
  INFO(ir);
  CHECK(count_of(ir, "@llvm.pow") == 0);
  CHECK(count_of(ir, "@pow") == 0);
  const int lanes = native_f32_lanes();
  CHECK(count_of(ir, "call ") ==
        count_of(ir, "call " + vector_type(lanes) + " @llvm.trunc") +
            count_of(ir, "call <" + std::to_string(lanes) + " x double> @llvm.fmuladd"));
  CHECK(count_of(ir, "store " + vector_type(lanes)) >= 1);
  CHECK(std::abs(y.to_vector<float>()[999] - std::pow(1.5, 2.25)) <= 1.2e-7 * std::pow(1.5, 2.25));
}

namespace {
// The weight and bias gradients of a linear + bias + relu layer (nn::Linear's weight
// [out, in]): dW = dY^T x and db = dY.sum(0), dY the relu-masked `weights`.
std::vector<Tensor> linear_gradients(const Tensor& x, const Tensor& w, const Tensor& b,
                                     const Tensor& weights) {
  const Tensor loss = ((x.matmul(w.transpose()) + b).relu() * weights).sum();
  return gradient(loss, {w, b});
}

// max |t| over the elements of a realized tensor.
double largest(const Tensor& t) {
  double m = 0;
  for (float v : t.to_vector<float>()) m = std::max(m, std::abs(static_cast<double>(v)));
  return m;
}

// dW and db of an [m, in] batch for `out` outputs: db is stored by dW's kernel (two
// STOREs, the column sum's REDUCE beside the product's), one kernel fewer than with
// LOOM_DISABLE=multi_output, within the float sum bound of the reference, bitwise equal on
// 1 and 2 threads, and as LOOM_NOOPT's plain loops give.
void check_fused_bias_gradient(int64_t m, int64_t in, int64_t out, bool db_in_vectors) {
  auto draw = [](Shape shape) { return Tensor::randn(std::move(shape)).realize(); };
  const Tensor x = draw({m, in}), w = draw({out, in}), b = draw({out}), weights = draw({m, out});
  size_t apart = 0;
  {
    Context off{{"DISABLE", "multi_output"}};
    apart = schedule_of(linear_gradients(x, w, b, weights)).size();
  }
  const auto planned = schedule_of(linear_gradients(x, w, b, weights));
  CHECK(planned.size() == apart - 1);
  CHECK(std::count_if(planned.begin(), planned.end(), [](const auto& k) { return k.outputs == 2; }) == 1);
  FreshCaches fresh;
  Kernels seen;
  auto both = [&](int threads) {  // dW's elements, then db's
    Context ctx{{"THREADS", threads}};
    std::vector<Tensor> g = linear_gradients(x, w, b, weights);
    loom::realize(g);
    std::vector<float> v = g[0].to_vector<float>(), v1 = g[1].to_vector<float>();
    v.insert(v.end(), v1.begin(), v1.end());
    return v;
  };
  const std::vector<float> got = both(1), two = both(2);
  REQUIRE(got.size() == two.size());
  CHECK(std::memcmp(got.data(), two.data(), got.size() * sizeof(float)) == 0);
  int fused = 0;
  for (const auto& [name, kernel] : seen.all_optimized()) {
    if (kernel->src.size() != 2) continue;
    INFO(name);
    ++fused;
    const auto nodes = toposort(kernel);
    CHECK(std::count_if(nodes.begin(), nodes.end(), [](const UOpPtr& u) { return u->op == Op::STORE; }) == 2);
    std::vector<UOpPtr> reduces;
    std::copy_if(nodes.begin(), nodes.end(), std::back_inserter(reduces),
                 [](const UOpPtr& u) { return u->op == Op::REDUCE; });
    CHECK(std::count_if(reduces.begin(), reduces.end(),
                        [](const UOpPtr& r) { return r->src[0]->op == Op::MUL; }) >= 1);
    CHECK(std::any_of(reduces.begin(), reduces.end(),
                      [&](const UOpPtr& r) { return reaches(kernel->src[1], r); }));
    CHECK(ranges_of_kind(kernel->src[0], AxisKind::Unroll).size() == 2);  // the product's register tile
    // Its first loop, the threads' share, is db's too; beside a tile in blocks of rows db sums
    // a block's rows in vectors as wide as the tile's (several accumulators, not one chain).
    CHECK(kernel->src[1]->src.at(1) == kernel->src[0]->src.at(1));
    const auto side_lanes = ranges_of_kind(kernel->src[1], AxisKind::Upcast);
    const auto tile_lanes = ranges_of_kind(kernel->src[0], AxisKind::Upcast);
    REQUIRE(tile_lanes.size() == 1);
    if (db_in_vectors) CHECK((side_lanes.size() == 1 && end_of(side_lanes[0]) == end_of(tile_lanes[0])));
  }
  CHECK(fused == 1);
  // Each term of a sum is at most max|dY| max|x| (dW) or max|dY| (db) in magnitude; m of them.
  const double u = std::ldexp(1.0, -24), dy = largest(weights), x_max = largest(x);
  const ref::RefTensor dw = test::reference(linear_gradients(x, w, b, weights)[0]);
  const ref::RefTensor db = test::reference(linear_gradients(x, w, b, weights)[1]);
  REQUIRE(static_cast<int64_t>(got.size()) == dw.size() + db.size());
  for (int64_t e = 0; e < dw.size(); ++e) {
    INFO("dW element " << e);
    CHECK(std::abs(got[static_cast<size_t>(e)] - dw.at(e)) <= (m + 1) * u * m * dy * x_max);
  }
  for (int64_t e = 0; e < db.size(); ++e) {
    INFO("db element " << e);
    CHECK(std::abs(got[static_cast<size_t>(dw.size() + e)] - db.at(e)) <= (m + 1) * u * m * dy);
  }
  Context plain{{"NOOPT", 1}};
  const std::vector<float> loops = both(2);
  REQUIRE(loops.size() == got.size());
  for (size_t e = 0; e < got.size(); ++e) {
    INFO("element " << e);
    CHECK(std::abs(got[e] - loops[e]) <= 2 * (m + 1) * u * m * dy * std::max(1.0, x_max));
  }
}
}  // namespace

TEST_CASE("the bias gradient is stored by the weight gradient's kernel: one pass over dY") {
  // x packed into panels, its 130 columns padded to whole ones; 70 rows of dW, no whole
  // number of 6-row tiles.
  SUBCASE("packed, columns and rows with tails") { check_fused_bias_gradient(64, 130, 70, true); }
  SUBCASE("k of 600 in blocks of 200") { check_fused_bias_gradient(600, 130, 40, true); }
  SUBCASE("a small batch: the plain tile, db in its rows") { check_fused_bias_gradient(5, 45, 70, false); }
}

TEST_CASE("products read through a pad (a cat, a slice's gradient) are kernels of their own") {
  // Fused into the cat, each product's loop would run at every column of the cat, the
  // other product's masked columns too (docs/pipeline.md §2). Small integers: every
  // sum is exact, so the values equal the reference's.
  const auto ints = [](int64_t rows, int64_t cols, int salt) {
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>((i * 7 + salt) % 9) - 4);
    return Tensor::from_vector(v, {rows, cols}).realize();
  };
  const Tensor a = ints(8, 24, 1), b = ints(24, 16, 2), c = ints(8, 24, 3), d = ints(24, 16, 4);
  const Tensor y = cat({a.matmul(b), c.matmul(d)}, 1);
  const auto kernels = schedule_of({y});
  std::string listing;
  for (const auto& k : kernels) listing += k.name + " ";
  CAPTURE(listing);
  CHECK(kernels.size() == 3);
  for (const auto& k : kernels)
    if (k.name.starts_with("r_")) CHECK(k.buffers.at(0).numel == 8 * 16);
  test::check_ref(y);
}

TEST_CASE("a concatenation's piece read transposed is addressed without divisions, in lanes (valid_index)") {
  // cat([a, b, v^T], 1)^T, as the gradient of q, k and v's concatenation: v's piece, stored
  // [2, 32 features, 32 steps], is read at c + 32 t - 64 split into its block, feature and
  // step, which only fold where the guard c >= 64 holds. Folded, range_split cuts t into
  // blocks and steps and no address divides; unfolded, the kernel ran without lanes.
  const auto ramp = [](std::vector<int64_t> shape, int salt) {
    int64_t n = 1;
    for (const int64_t s : shape) n *= s;
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>(static_cast<int>((i * 5 + salt) % 11) - 5);
    return Tensor::from_vector(v, Shape(shape.begin(), shape.end())).realize();
  };
  const Tensor a = ramp({64, 32}, 1), b = ramp({64, 32}, 2), v = ramp({2, 32, 32}, 3);
  for (const char* target : {"native", "x86-64-v3"}) {
    CAPTURE(target);
    const Context ctx{{"TARGET", target}};
    const Tensor y = cat({a, b, v.permute({0, 2, 1}).reshape({64, 32})}, 1).transpose(0, 1).contiguous();
    Kernels seen;
    detail::schedule_cache().clear();
    test::check_ref(y);
    const auto kernels = seen.all_unoptimized();
    REQUIRE(kernels.size() == 1);
    CHECK(divmod_count(kernels.begin()->second) == 0);
    CHECK(ranges_of_kind(seen.only_optimized(), AxisKind::Upcast).size() == 1);
  }
}

TEST_CASE("a piece of a concatenation whose edge falls between vectors is read under one guard a vector") {
  // cat([q.permute(0, 2, 1, 3).reshape(2, 8, 64), zeros], 2): the piece's guard 16h + d < 64
  // over lanes d < 16 is h < 4 (ir/compare_fold.cpp), one bool for the vector: a branch around
  // a plain load, not a masked load whose lanes are all off past the piece, where its address,
  // simplified under the guard (valid_index), points past q's buffer.
  std::vector<float> values(2 * 4 * 8 * 16);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 13) - 6;
  const Tensor q = Tensor::from_vector(values, {2, 4, 8, 16}).realize();
  for (const char* target : {"native", "x86-64-v3"}) {  // 16 lanes a vector, and 8
    CAPTURE(target);
    const Context ctx{{"TARGET", target}};
    const Tensor y = cat({q.permute({0, 2, 1, 3}).reshape({2, 8, 64}), Tensor::zeros({2, 8, 128})}, 2);
    Kernels seen;
    detail::schedule_cache().clear();
    test::check_ref(y);
    int64_t guarded = 0;
    for (const auto& [name, k] : seen.all())
      for (const auto& u : toposort(k))
        if (u->op == Op::INDEX && u->src.size() > 2 && u->dtype.lanes > 1) {
          ++guarded;
          CHECK(u->src[2]->dtype.lanes == 1);
        }
    CHECK(guarded > 0);
  }
}

// Causal attention's products sum only over the keys a tile of rows sees (schedule/
// masked_reads.hpp, codegen/reduce_bounds.cpp): P @ V and, in the backward, dV, dQ and dK
// run loops whose extent follows the tile's rows, not T; forward and gradients still match
// the reference interpreter.
TEST_CASE("causal attention's products skip the keys above the diagonal, values unchanged") {
  FreshCaches fresh;
  const int64_t t = 96;
  Tensor q = Tensor::randn({1, 2, t, 16}).realize(), k = Tensor::randn({1, 2, t, 16}).realize(),
         v = Tensor::randn({1, 2, t, 16}).realize();
  q.requires_grad_(), k.requires_grad_(), v.requires_grad_();
  const Tensor y = nn::scaled_dot_product_attention(q, k, v, {}, std::nullopt, true);
  const std::vector<Tensor> grads = gradient((y * y).sum(), {q, k, v});
  std::vector<Tensor> all{y};
  all.insert(all.end(), grads.begin(), grads.end());
  std::vector<ref::RefTensor> want;
  for (const Tensor& x : all) want.push_back(test::reference(x));
  Kernels seen;
  realize(all);
  for (size_t i = 0; i < all.size(); ++i) {
    INFO("result " << i);
    const std::vector<float> got = all[i].to_vector<float>();
    REQUIRE(static_cast<int64_t>(got.size()) == want[i].size());
    for (int64_t e = 0; e < want[i].size(); ++e)
      CHECK(got[static_cast<size_t>(e)] == doctest::Approx(want[i].at(e)).epsilon(1e-4).scale(1));
  }
  int bounded = 0;  // reduce loops whose extent is an expression of the outer loops
  for (const auto& [name, kernel] : seen.all())
    for (const UOpPtr& r : ranges_of_kind(kernel, AxisKind::Reduce)) bounded += !r->src.at(0)->is_const();
  CHECK(bounded >= 4);  // P @ V, dV, dQ, dK (and the scores' and row maxima's)
}

// A product tiled in blocks of rows (b in panels) runs its batch across threads when the
// blocks divide it (codegen/recipes.cpp, block_tiles): the members' work is equal where
// the blocks' need not be. Causal attention's scores skip the tiles above the diagonal,
// so their first block of rows has a third of the second's work.
TEST_CASE("a batched product in blocks of rows runs its batch across threads: causal scores, a plain bmm") {
  // 64 row tiles of a's 16 columns, small beside any L2: row_block makes the Target's
  // min_blocks (its cores) blocks of them, so twice as many heads are a batch the blocks
  // divide on any host.
  const int64_t t = 384, heads = 2 * current_target().min_blocks();
  // Realizes y against the reference interpreter; the threads' loop of each kernel with a
  // tile of 6 rows.
  const auto tiled_parallel = [](const Tensor& y) {
    FreshCaches fresh;
    const ref::RefTensor want = test::reference(y);
    Kernels seen;
    const std::vector<float> got = Tensor(y).realize().to_vector<float>();
    REQUIRE(static_cast<int64_t>(got.size()) == want.size());
    for (int64_t e = 0; e < want.size(); ++e)
      CHECK(got[static_cast<size_t>(e)] == doctest::Approx(want.at(e)).epsilon(1e-4).scale(1));
    std::vector<int64_t> out;
    for (const auto& [name, kernel] : seen.all_optimized()) {
      const auto unroll = ranges_of_kind(kernel, AxisKind::Unroll);
      if (std::none_of(unroll.begin(), unroll.end(), [](const UOpPtr& r) { return end_of(r) == 6; }))
        continue;
      for (const UOpPtr& r : ranges_of_kind(kernel, AxisKind::Parallel)) out.push_back(end_of(r));
    }
    REQUIRE(!out.empty());
    return out;
  };
  SUBCASE("causal attention") {
    const Tensor q = Tensor::randn({1, heads, t, 16}).realize(),
                 k = Tensor::randn({1, heads, t, 16}).realize(),
                 v = Tensor::randn({1, heads, t, 16}).realize();
    // q k^T's threads take heads, not its blocks of rows
    for (const int64_t n : tiled_parallel(nn::scaled_dot_product_attention(q, k, v, {}, std::nullopt, true)))
      CHECK(n == heads);
  }
  SUBCASE("a plain batched product") {
    const Tensor a = Tensor::randn({heads, t, 16}).realize(), b = Tensor::randn({heads, 16, t}).realize();
    for (const int64_t n : tiled_parallel(a.matmul(b))) CHECK(n == heads);
  }
}
