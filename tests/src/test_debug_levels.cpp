// Each LOOM_DEBUG level, captured from loom's logger under a loom::Context, and
// LOOM_DUMP_DIR's files. Every case builds a kernel no other test compiles (its
// own constants), so compile-time output is not skipped by the kernel cache.
#include "check.hpp"

#include "support/log_capture.hpp"

#include <loom/context.hpp>

#include <filesystem>
#include <fstream>
#include <set>

using namespace loom;
using test::iota;
using test::LogCapture;
using test::make;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// (a * c + 1).sum(1) on a 64 x 32 input: one reduce kernel, named r_64_32.
std::string realize_at(int level, double c) {
  Tensor a = make(DType::Float32, iota(64 * 32), {64, 32});
  LogCapture capture;
  {
    Context ctx{{"DEBUG", level}};
    Tensor y = (a * c + 1).sum(1);
    y.realize();
  }
  return capture.text();
}

}  // namespace

TEST_CASE("LOOM_DEBUG=0 logs nothing; 1 a line per realize, and its schedule's cost when it schedules") {
  CHECK(realize_at(0, 1.25) == "");
  const std::string one = realize_at(1, 1.5);
  CHECK(has(one, "realize: 1 kernel in"));
  CHECK_FALSE(has(one, "r_64_32"));
  // The schedule's cost against its graph with every op realized (src/plan.hpp). One
  // kernel: a MUL, an ADD and a fold per element (3 x 2048), 2048 + 64 floats moved,
  // one launch (1024). Realized: the MUL and the ADD each move 2 x 2048 floats, the sum
  // 2048 + 64, and the target (the sum's [64, 1] viewed as [64]) is a copy of 64 more;
  // four launches: 6144 + 10432 + 4096 = 20672.
  CHECK(has(one,
            "schedule: 1 kernel, cost 9280 (6144 of it arithmetic) against 2.067e+04 (6144) with every op "
            "realized: recompute ratio 0.449"));
}

TEST_CASE("LOOM_DEBUG=2 adds each kernel's time, GFLOP/s and GB/s") {
  const std::string two = realize_at(2, 1.75);
  CHECK(has(two, "realize: 1 kernel in"));
  CHECK(has(two, "r_64_32 compiled in"));
  CHECK(has(two, "GFLOP/s"));
  CHECK(has(two, "GB/s"));
  CHECK(has(two, "(2 buffers)"));
  CHECK_FALSE(has(two, "at stage kernel"));
}

TEST_CASE("LOOM_DEBUG=2 names the level: an elementwise kernel compiles light, a reduction O2") {
  // Both too large for the small-kernel rule (512 runs of the body, vectorised).
  Tensor a = make(DType::Float32, iota(512 * 128), {512, 128});
  LogCapture capture;
  Tensor y, s;
  {
    Context ctx{{"DEBUG", 2}};
    s = (a * 0.25).sum(1);
    s.realize();
    y = a * 2.75 + 1;
    y.realize();
  }
  INFO(capture.text());
  CHECK(has(capture.text(), "r_512_128 compiled in"));
  CHECK(has(capture.text(), "(O2)"));
  CHECK(has(capture.text(), "E_65536 compiled in"));
  CHECK(has(capture.text(), "(light)"));
  const auto sums = s.to_vector<float>();
  REQUIRE(sums.size() == 512);
  CHECK(sums[1] == 0.25f * (128 * 128 + 127 * 128 / 2));  // 0.25 * (128 + ... + 255), exact in float
  const auto values = y.to_vector<float>();
  REQUIRE(values.size() == 512 * 128);
  for (size_t i = 0; i < values.size(); ++i) CHECK(values[i] == static_cast<float>(i) * 2.75f + 1);
}

TEST_CASE(
    "LOOM_DEBUG=2: a small elementwise kernel compiles bulk (O0 code generation), a small reduction light") {
  // 40 rows of 96: 40 x 6 vectors of 16 lanes (or 12 of 8), at most 480 runs of the body.
  Tensor a = make(DType::Float32, iota(40 * 96), {40, 96});
  LogCapture capture;
  Tensor y;
  {
    Context ctx{{"DEBUG", 2}};
    y = a * 0.5 - 3;
    y.realize();
  }
  INFO(capture.text());
  CHECK(has(capture.text(), "E_3840 compiled in"));
  CHECK(has(capture.text(), "(bulk)"));
  CHECK_FALSE(has(capture.text(), "(light)"));
  LogCapture second;
  Tensor s;
  {
    Context ctx{{"DEBUG", 2}};
    s = (a + 0.125).sum(1);
    s.realize();
  }
  INFO(second.text());
  CHECK(has(second.text(), "r_40_96 compiled in"));
  CHECK(has(second.text(), "(light)"));
  CHECK_FALSE(has(second.text(), "(bulk)"));
  const auto values = y.to_vector<float>();
  REQUIRE(values.size() == 40 * 96);
  for (size_t i = 0; i < values.size(); ++i) CHECK(values[i] == static_cast<float>(i) * 0.5f - 3);
  const auto sums = s.to_vector<float>();
  REQUIRE(sums.size() == 40);
  // 96 r + j + 1/8 summed over j: every partial sum has at most 22 significant bits, so exact.
  for (int r = 0; r < 40; ++r) CHECK(sums[r] == static_cast<float>(96 * 96 * r + 95 * 96 / 2 + 12));
}

TEST_CASE("LOOM_DEBUG=3 adds the kernel as scheduled, the Opts applied and its loops; 4 the LLVM IR") {
  const std::string three = realize_at(3, 2.25);
  CHECK(has(three, "kernel r_64_32 at stage kernel:"));
  CHECK(has(three, "REDUCE f32"));
  // Each row's 32 values in lanes, the rows across threads (ir/opt.hpp's text form).
  CHECK(has(three, "kernel r_64_32 at stage opts:\n[upcast(1, "));
  CHECK(has(three, "parallel(0)]"));
  CHECK(has(three, "kernel r_64_32 at stage linear:"));
  CHECK(has(three, "LOOP r0 parallel"));
  CHECK_FALSE(has(three, "define void"));
  const std::string four = realize_at(4, 2.5);
  CHECK(has(four, "GFLOP/s"));
  CHECK(has(four, "kernel r_64_32 at stage llvm:"));
  CHECK(has(four, "define void @r_64_32("));
  CHECK_FALSE(has(four, "changed the graph"));
}

TEST_CASE("LOOM_DEBUG=5 adds the graph before and after every stage that changed it") {
  const std::string five = realize_at(5, 2.75);
  CHECK(has(five, "define void @r_64_32("));
  CHECK(has(five, "stage rangeify changed the graph\nbefore:\n"));
  CHECK(has(five, "REDUCE_AXIS f32"));  // the tensor graph, before rangeify
  CHECK(has(five, "BUFFERIZE"));        // rangeify's output
  CHECK(has(five, "stage optimizer, kernel r_64_32 changed the graph"));
  CHECK(has(five, "[axis 0 parallel]"));  // the optimiser's choice, after
  CHECK_FALSE(has(five, "at stage asm"));
}

TEST_CASE("LOOM_DEBUG=6 adds the x86 assembly of each kernel") {
  const std::string six = realize_at(6, 3.25);
  CHECK(has(six, "changed the graph"));
  REQUIRE(has(six, "kernel r_64_32 at stage asm:"));
  const std::string assembly = six.substr(six.find("at stage asm:"));
  CHECK(has(assembly, "r_64_32:"));  // the function's label
  CHECK(has(assembly, "\tret"));
  CHECK((has(assembly, "vadd") || has(assembly, "addss") || has(assembly, "addps")));
}

TEST_CASE("a cached kernel is not compiled again, so levels 3 to 6 print nothing new for it") {
  realize_at(0, 3.75);
  const std::string again = realize_at(6, 3.75);
  CHECK(has(again, "r_64_32 "));  // the run line of level 2
  CHECK_FALSE(has(again, "at stage llvm"));
}

TEST_CASE("LOOM_DUMP_DIR writes every kernel at every stage, named after the kernel and the stage") {
  const auto dir = std::filesystem::temp_directory_path() / ("loom_dump_test_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  Tensor a = make(DType::Float32, iota(64 * 32), {64, 32});
  {
    Context ctx{{"DUMP_DIR", dir.string()}};
    Tensor y = (a * 4.25 + 1).sum(1);
    y.realize();
  }
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.insert(entry.path().filename());
  for (const std::string want : {"graph.00.tensor.uop",
                                 "graph.01.split_reduceop.uop",
                                 "graph.02.rangeify.uop",
                                 "graph.03.buffer_stages.uop",
                                 "r_64_32.00.simplify.uop",
                                 "r_64_32.01.scatter_reduce.uop",
                                 "r_64_32.02.load_collapse.uop",
                                 "r_64_32.03.guard_narrowing.uop",
                                 "r_64_32.04.valid_index.uop",
                                 "r_64_32.05.range_split.uop",
                                 "r_64_32.06.range_simplify.uop",
                                 "r_64_32.07.range_merge.uop",
                                 "r_64_32.08.kernel.uop",
                                 "r_64_32.09.half_widening.uop",
                                 "r_64_32.10.optimizer.uop",
                                 "r_64_32.11.gated_select.uop",
                                 "r_64_32.12.reduce_bounds.uop",
                                 "r_64_32.13.transcendental.uop",
                                 "r_64_32.14.expander.uop",
                                 "r_64_32.15.lower_reduce.uop",
                                 "r_64_32.16.split_vectors.uop",
                                 "r_64_32.17.numeric_lowering.uop",
                                 "r_64_32.18.opts.txt",
                                 "r_64_32.19.linear.txt",
                                 "r_64_32.20.llvm.ll",
                                 "r_64_32.21.asm.s"})
    CHECK_MESSAGE(files.count(want), want);
  std::ifstream llvm(dir / "r_64_32.20.llvm.ll");
  const std::string text((std::istreambuf_iterator<char>(llvm)), std::istreambuf_iterator<char>());
  CHECK(has(text, "define void @r_64_32("));
  std::ifstream opts(dir / "r_64_32.18.opts.txt");
  const std::string list((std::istreambuf_iterator<char>(opts)), std::istreambuf_iterator<char>());
  CHECK(list.starts_with("[upcast(1, "));
  CHECK(has(list, "parallel(0)]"));
  std::filesystem::remove_all(dir);
}
