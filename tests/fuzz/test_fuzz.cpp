// The differential fuzzer in CI: a fixed seed's programs agree with the
// reference interpreter and their gradients with finite differences, a planted
// wrong rewrite is caught and pinned to its pass within the same budget (and a
// planted wrong gradient rule too), and every shrunk failure ever found replays clean.
#include "fuzz/compare.hpp"
#include "fuzz/fuzz.hpp"
#include "fuzz/gradient_check.hpp"
#include "fuzz/kernel_checker.hpp"
#include "fuzz/op_class.hpp"
#include "ir/planted_fault.hpp"
#include "src/tensor_node.hpp"
#include "support/kernel_builders.hpp"
#include "support/memory_use.hpp"
#include "support/reference_tensor.hpp"

#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace loom;

namespace {
constexpr uint64_t kCiSeed = 20240601;
// 500 programs in CI (docs/fuzzing.md); the sanitizer pass runs 200, each program being
// several times slower under ASan and UBSan.
const int64_t kCiPrograms = test::address_sanitizer() ? 200 : 500;

// The heavy planted-fault cases check the fuzzer's power, which the plain build's run
// checks; the sanitizer pass looks for memory faults, which a planted fault does not
// add, and each was a minute of its longest test (docs/performance.md, "CI's time").
bool power_checked_in_plain_build() { return test::address_sanitizer(); }

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct PlantFault {
  explicit PlantFault(PlantedFault f) { set_planted_fault(f); }
  ~PlantFault() { set_planted_fault(PlantedFault::None); }
};

// The CI budget's programs run with `fault` planted until the first fails: that
// failure and its shrunk program.
fuzz::RunResult caught_with(PlantedFault fault, fuzz::RunOptions options = {}) {
  options.stop_at_first = true;
  fuzz::RunResult r;
  {
    PlantFault planted(fault);
    r = fuzz::run(kCiSeed, kCiPrograms, options);
  }
  REQUIRE(r.failures.size() == 1);
  MESSAGE("caught after " << r.programs << " programs: " << r.failures[0].second.message.substr(0, 300));
  MESSAGE("shrunk:\n" << r.shrunk[0]);
  return r;
}
}  // namespace

TEST_CASE("fuzzed programs with products big enough for panel packing agree with the reference interpreter") {
  // Products of 32+ rows and 32+ KiB of b take panel packing (columns padded to whole
  // panels where they do not fill them); the kernel checker is off here because
  // interpreting such a kernel after every pass takes seconds (loom-fuzz
  // --packed-matmuls runs it).
  fuzz::RunOptions options;
  options.generate.packed_matmul_elements = 16384;
  options.check.kernel_checker = false;
  const fuzz::RunResult r = fuzz::run(kCiSeed, 60, options);
  for (size_t i = 0; i < r.failures.size(); ++i)
    FAIL_CHECK("program " << r.failures[i].first << ": " << r.failures[i].second.kind << ": "
                          << r.failures[i].second.message);
  int64_t packed = 0;  // Float32 and Float64 products, and BFloat16 ones
  for (const char* name : {"packed_matmul", "packed_matmul_bf16"})
    if (const auto it = r.coverage.api_ops.find(name); it != r.coverage.api_ops.end()) packed += it->second;
  CHECK(packed >= 2);
}

TEST_CASE(
    "the CI budget of fuzzed programs from a fixed seed agree with the reference interpreter, pass by pass") {
  fuzz::RunOptions options;
  const fuzz::RunResult r = fuzz::run(kCiSeed, kCiPrograms, options);
  MESSAGE(r.coverage.report());
  for (size_t i = 0; i < r.failures.size(); ++i)
    FAIL_CHECK("program " << r.failures[i].first << ": " << r.failures[i].second.kind << ": "
                          << r.failures[i].second.message << "\nshrunk:\n"
                          << r.shrunk[i]);
  CHECK(r.programs == kCiPrograms);
  CHECK(r.invalid * 50 <= r.programs);  // the generator builds what the reference accepts
  // What the budget covers: every dtype, every rank 0..5, the op families, both
  // kernel-level passes, and kernels actually compared by the kernel checker.
  for (const char* dt : {"bool", "u8", "i32", "i64", "f32", "f64"})
    CHECK_MESSAGE(r.coverage.dtypes.count(dt), dt);
  for (const char* rank : {"0", "1", "2", "3", "4", "5"}) CHECK_MESSAGE(r.coverage.ranks.count(rank), rank);
  for (const char* op :
       {"reshape", "permute", "expand", "pad", "shrink", "flip", "slice", "cat", "sum", "max", "matmul",
        "gather", "where", "cast", "assign", "multi_output", "contiguous", "softmax"})
    CHECK_MESSAGE(r.coverage.api_ops.count(op), op);
  // The nn ops come from one rarer generator step: the full budget (500) meets each of
  // them; the sanitizer build's 200 programs met no conv2d, so it checks them only there.
  if (kCiPrograms >= 500)
    for (const char* op : {"gelu", "cumsum", "topk", "conv2d", "max_pool2d", "batch_norm", "batch_norm_eval",
                           "interpolate_nearest", "interpolate_bilinear"})
      CHECK_MESSAGE(r.coverage.api_ops.count(op), op);
  for (const char* stage : {"simplify", "optimizer"}) CHECK_MESSAGE(r.coverage.stages.count(stage), stage);
  CHECK(r.coverage.kernel_checks.count("checked"));
  CHECK(r.coverage.bounds_checked > 0);
  // A quarter of the programs each for the host, AVX2 (x86-64-v3), SSE4.2 (x86-64-v2) and
  // the tiny test machine (x86-64-v3-tiny: its kernels run as many tasks).
  for (const char* target : {"native", "x86-64-v3", "x86-64-v2", "x86-64-v3-tiny"})
    CHECK_MESSAGE((r.coverage.targets.count(target) && r.coverage.targets.at(target) * 5 >= kCiPrograms),
                  target);
  // Every 4th program is a gradient program; nearly all have a finite loss and are probed.
  CHECK(r.coverage.gradients >= kCiPrograms / 5);
  auto probes = r.coverage.gradient_checks;
  CHECK(probes["agreed"] >= 5 * r.coverage.gradients);
  CHECK(probes["unstable"] * 50 <= probes["agreed"]);
}

TEST_CASE(
    "with any one rewrite stage switched off, fuzzed programs still agree with the reference interpreter") {
  // A stage only makes programs faster: with it off (LOOM_DISABLE through a
  // loom::Context) every program still gives the reference's values within
  // docs/fuzzing.md's tolerances, and the kernel checker still checks each pass.
  const int64_t kPrograms = kCiPrograms / 8;
  uint64_t seed = kCiSeed + 100000;
  for (const char* stage :
       {"split_reduceop", "reduce_collapse", "reduce_unparented", "dead_axis", "buffer_removal",
        "scatter_reduce", "load_collapse", "range_split", "range_flatten", "range_merge"}) {
    Context off{{"DISABLE", std::string(stage)}};
    const fuzz::RunResult r = fuzz::run(seed += kPrograms, kPrograms, {});
    CHECK_MESSAGE(r.programs == kPrograms, stage);
    for (size_t i = 0; i < r.failures.size(); ++i)
      FAIL_CHECK(std::string(stage) << " off, program " << r.failures[i].first << ": "
                                    << r.failures[i].second.kind << ": " << r.failures[i].second.message
                                    << "\nshrunk:\n"
                                    << r.shrunk[i]);
  }
}

TEST_CASE("a planted wrong rewrite is caught within the CI budget, pinned to its pass, and shrunk") {
  const fuzz::RunResult r = caught_with(PlantedFault::FlipConstantSub);
  CHECK(r.failures[0].second.kind == "kernel simplify");
  const std::string& shrunk = r.shrunk[0];
  {
    PlantFault fault(PlantedFault::FlipConstantSub);
    const auto again = fuzz::check_graph(shrunk, {});
    REQUIRE(again.failure);
    CHECK(again.failure->kind == "kernel simplify");
    // Without the kernel checker the end result is still caught against the reference.
    const auto end_to_end = fuzz::check_graph(shrunk, {.kernel_checker = false});
    REQUIRE(end_to_end.failure);
    CHECK(end_to_end.failure->kind == "mismatch");
  }
  // Minimal: a handful of nodes, and it passes once the fault is gone.
  CHECK(std::count(shrunk.begin(), shrunk.end(), '%') < 40);
  CHECK_FALSE(fuzz::check_graph(shrunk, {}).failure);
}

TEST_CASE("a planted wrong gradient rule is caught within the CI budget against finite differences") {
  if (power_checked_in_plain_build()) return;
  const fuzz::RunResult r = caught_with(PlantedFault::DoubledSqrtGradient);
  const auto& [seed, failure] = r.failures[0];
  CHECK(failure.kind == "gradient");
  CHECK(failure.message.find("the gradient graph itself is wrong") != std::string::npos);
  const std::string& shrunk = r.shrunk[0];
  CHECK(fuzz::is_gradient_program(shrunk));
  CHECK(std::count(shrunk.begin(), shrunk.end(), '%') < 20);
  {
    PlantFault fault(PlantedFault::DoubledSqrtGradient);
    const auto again = fuzz::check_graph(shrunk, {});
    REQUIRE(again.failure);
    CHECK(again.failure->kind == "gradient");
  }
  CHECK_FALSE(fuzz::check_graph(shrunk, {}).failure);
}

TEST_CASE(
    "a planted buffer_removal that inlines every buffer is caught by the recompute bound within the CI "
    "budget") {
  if (power_checked_in_plain_build()) return;
  // Programs with products big enough to pack (docs/fuzzing.md): where a reduce read at
  // many indices is inlined, it runs once per read, and at the fuzzer's small sizes
  // that is rarely more than the kernels and buffers inlining saves.
  fuzz::RunOptions options;
  options.generate.packed_matmul_elements = 16384;
  options.check.kernel_checker = false;  // the schedule's cost is what differs, not its values
  const fuzz::RunResult r = caught_with(PlantedFault::InlineEveryBuffer, options);
  CHECK(r.failures[0].second.kind == "recompute");
  const std::string& shrunk = r.shrunk[0];
  CHECK(std::count(shrunk.begin(), shrunk.end(), '\n') < 40);
  {
    PlantFault fault(PlantedFault::InlineEveryBuffer);
    const auto again = fuzz::check_graph(shrunk, {.kernel_checker = false});
    REQUIRE(again.failure);
    CHECK(again.failure->kind == "recompute");
  }
  CHECK_FALSE(fuzz::check_graph(shrunk, {.kernel_checker = false}).failure);
}

TEST_CASE("with LOOM_CHECK_BOUNDS, a planted load one past the end is caught as an error naming the buffer") {
  fuzz::RunOptions options;
  options.stop_at_first = true;
  options.bounds_share = 1;
  fuzz::RunResult r;
  {
    PlantFault fault(PlantedFault::LoadPastEnd);
    r = fuzz::run(kCiSeed, kCiPrograms, options);
  }
  REQUIRE(r.failures.size() == 1);
  const auto& failure = r.failures[0].second;
  MESSAGE("caught after " << r.programs << " programs: " << failure.message);
  CHECK(failure.kind == "error");
  CHECK(failure.message.find("out of bounds; LOOM_CHECK_BOUNDS stopped it") != std::string::npos);
  CHECK(r.programs <= 5);  // every program reads a buffer
}

TEST_CASE("a gradient program: d/dx of sum(x * w) is w, checked against finite differences") {
  // loss = sum(x * w) + sum(x^2): d/dx = w + 2x, d/dw = x. 13 elements: twelve
  // coordinates and one random direction are probed.
  std::vector<double> x(13), w(13);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25 * static_cast<double>(i) - 1, w[i] = 3 - 0.5 * i;
  const Tensor tx = Tensor::from_vector(x, {13}), tw = Tensor::from_vector(w, {13});
  std::string text = graph_to_text({(tx * tw).sum() + tx.square().sum()});
  CHECK_FALSE(fuzz::is_gradient_program(text));
  text = std::string(fuzz::kGradientMarker) + "\n" + text;
  REQUIRE(fuzz::is_gradient_program(text));
  fuzz::Coverage coverage;
  const auto outcome = fuzz::check_graph(text, {}, &coverage);
  CHECK(outcome.valid);
  CHECK_FALSE(outcome.failure);
  CHECK(coverage.gradients == 1);
  CHECK(coverage.gradient_checks["agreed"] == 13);
  // Not a scalar loss: the program is refused, not checked.
  const std::string not_scalar = std::string(fuzz::kGradientMarker) + "\n" + graph_to_text({tx * 2});
  CHECK_FALSE(fuzz::check_graph(not_scalar, {}).valid);
  {
    PlantFault fault(PlantedFault::DoubledSqrtGradient);
    const std::string sqrt_loss =
        std::string(fuzz::kGradientMarker) + "\n" + graph_to_text({(tx.abs() + 1).sqrt().sum()});
    const auto wrong = fuzz::check_graph(sqrt_loss, {});
    REQUIRE(wrong.failure);
    CHECK(wrong.failure->kind == "gradient");
  }
}

TEST_CASE("the kernel checker compares a kernel before and after a pass on the same random buffers") {
  // out[i] = in[i] - 1.5 against the flipped in[i] + 1.5.
  const UOpPtr out = UOp::make(Op::DEFINE_GLOBAL, DType::Float32.ptr_to(), {}, int64_t{0});
  const UOpPtr in = UOp::make(Op::DEFINE_GLOBAL, DType::Float32.ptr_to(), {}, int64_t{1});
  const UOpPtr r = make_range(7, 0);
  auto kernel = [&](Op op) {
    const UOpPtr x = UOp::make(Op::LOAD, DType::Float32, {UOp::make(Op::INDEX, in->dtype, {in, r})});
    const UOpPtr v = alu(op, {x, const_float(DType::Float32, 1.5)});
    const UOpPtr st = UOp::make(Op::STORE, DType::Float32, {UOp::make(Op::INDEX, out->dtype, {out, r}), v});
    return UOp::make(Op::SINK, DType::Bool, {UOp::make(Op::END, DType::Float32, {st, r})});
  };
  CHECK(fuzz::compare_kernels(kernel(Op::SUB), kernel(Op::SUB), 1) == "");
  CHECK(fuzz::compare_kernels(kernel(Op::SUB), kernel(Op::ADD), 1).find("buffer slot 0: element") == 0);
}

TEST_CASE("the kernel checker measures a reordered sum's error against its operands, not its result") {
  // Σ of (1, 2^-53, -1) is 0 in order (1 + 2^-53 rounds to 1) and 2^-53 as
  // (1 + -1) + 2^-53: both are the sum within an ulp of its operands (fuzz seed
  // 6081957: an expander's lane tree against the loop's order, cancelling to ~1e-15).
  const UOpPtr out = kb::index(kb::global(0, DType::Float64), kb::i64(0));
  const UOpPtr r = make_range(3, 1, AxisKind::Reduce);
  const auto f64 = [](double v) { return const_float(DType::Float64, v); };
  const auto term =
      alu(Op::WHERE, {alu(Op::CMPLT, {r, kb::i64(1)}), f64(1.0),
                      alu(Op::WHERE, {alu(Op::CMPLT, {r, kb::i64(2)}), f64(0x1p-53), f64(-1.0)})});
  const UOpPtr in_order = kb::sink({kb::store(out, kb::reduce(Op::ADD, term, {r}))});
  const auto add = [](const UOpPtr& a, const UOpPtr& b) {
    return UOp::make(Op::ADD, DType::Float64, {a, b});
  };
  const UOpPtr as_tree = kb::sink({kb::store(out, add(add(f64(1.0), f64(-1.0)), f64(0x1p-53)))});
  CHECK(fuzz::compare_kernels(in_order, as_tree, 1) == "");
  // A wrong sum is still caught: 1 is not within 2^-36 of 0.
  const UOpPtr wrong = kb::sink({kb::store(out, add(f64(1.0), f64(0x1p-53)))});
  CHECK(fuzz::compare_kernels(in_order, wrong, 1).find("buffer slot 0: element 0") == 0);
}

TEST_CASE("every shrunk failure the fuzzer found replays clean (tests/fuzz/regressions)") {
  int64_t replayed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(LOOM_FUZZ_REGRESSIONS)) {
    if (entry.path().extension() != ".loom") continue;
    CAPTURE(entry.path().filename().string());
    // At the preset its rerun line names (`--target x86-64-v3-tiny`), else the flags in force.
    const std::string text = read(entry.path());
    const size_t named = text.find("--target ");
    const std::string target = named == std::string::npos
                                   ? ""
                                   : text.substr(named + 9, text.find_first_of(" \n", named + 9) - named - 9);
    CAPTURE(target);
    for (bool bounds : {false, true}) {
      const auto outcome = fuzz::check_graph(text, {.check_bounds = bounds, .target = target});
      CHECK_MESSAGE(outcome.valid, outcome.invalid_reason);
      CHECK_MESSAGE(!outcome.failure, (outcome.failure ? outcome.failure->message : ""));
    }
    ++replayed;
  }
  MESSAGE(replayed << " regressions replayed");
}

TEST_CASE("an approximate Float32 op upstream of a Float64 output gives it Float32's tolerance") {
  const Tensor x = Tensor::ones({3});
  const Tensor wide = x.exp().cast(DType::Float64);
  CHECK(fuzz::tolerance_dtype(wide.node()->uop) == DType::Float32);
  CHECK(fuzz::tolerance_dtype(x.cast(DType::Float64).node()->uop) == DType::Float32);
  CHECK(fuzz::tolerance_dtype(Tensor::ones({3}, DType::Float64).exp().node()->uop) == DType::Float64);
  // One Float32 ulp off at 1: beyond Float64's 2^-36, within Float32's 2^-12.
  auto one = ref::RefTensor::zeros(DType::Float64, {1});
  one.f[0] = 1.0;
  auto off = one;
  off.f[0] = 1.0 + 0x1p-23;
  CHECK(fuzz::compare_values(off, one, {true, DType::Float64, 0}) != "");
  CHECK(fuzz::compare_values(off, one, {true, DType::Float32, 0}) == "");
  CHECK(fuzz::compare_values(off, one, {false, DType::Float32, 0}) != "");  // exact class: to the bit
}

TEST_CASE("the shrinker's failure class keeps the verdict and drops numbers and shapes") {
  using fuzz::Failure;
  const auto cls = [](const char* kind, const char* message) {
    return fuzz::failure_class(Failure{kind, message});
  };
  CHECK(
      cls("mismatch", "output 0: element 3 of 12: got 1.5, the reference gives -2e-07 (approximate class)") ==
      cls("mismatch", "output 1: element 0 of 2: got 7, the reference gives 8 (exact class)"));
  CHECK(cls("mismatch", "output 0: shape [2, 3] Float32 but the reference gives [3] Float32") ==
        cls("mismatch", "output 0: shape [4] Float32 but the reference gives [1, 4] Float32"));
  CHECK(cls("mismatch", "output 0: shape [2] Float32 but the reference gives [3] Float32") !=
        cls("mismatch", "output 0: element 1 of 2: got 1, the reference gives 2 (exact class)"));
  CHECK(
      cls("gradient", "d(loss)/d(x0): ...: the gradient graph is right and its compiled code is not") !=
      cls("gradient", "d(loss)/d(x0): ...: the gradient graph itself is wrong (a rule of src/gradient.cpp)"));
  CHECK(cls("gradient",
            "d(loss)/d(x0): loom gives 1: the gradient graph is right and its compiled code is not") ==
        cls("gradient",
            "d(loss)/d(x2): loom gives 5: the gradient graph is right and its compiled code is not"));
}

TEST_CASE("the generator is deterministic: one seed, one program") {
  CHECK(fuzz::generate_program(7, {}) == fuzz::generate_program(7, {}));
  CHECK(fuzz::generate_program(7, {}) != fuzz::generate_program(8, {}));
}
