// Graph files: a saved graph loads as a new, equal computation on fresh
// buffers holding the saved data; the file names buffers by its own numbers.
#include "check.hpp"
#include "support/error_message.hpp"

#include <loom/graph_file.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace loom;
using test::error_of;
using test::iota;
using test::make;
using test::values;

namespace {
const UOpPtr& buffer_of(const Tensor& t) {
  const UOpPtr& v = t.node()->uop;
  return v->op == Op::RESHAPE ? v->src[0] : v;
}
}  // namespace

TEST_CASE("a saved graph loads and computes what the original computes, with two outputs sharing a buffer") {
  Tensor a = make(DType::Float32, iota(6, 0.5, -1), {2, 3});
  Tensor b = make(DType::Int32, iota(3, 1, 4), {3});
  Tensor y = (a * b.cast(DType::Float32)).sum(1), z = a.exp().flip(0);
  const std::string text = graph_to_text({y, z});
  // Loading and saving again gives the same file: the graph reads buffers of its own, with the same data.
  CHECK(graph_to_text(graph_from_text(text)) == text);
  std::vector<Tensor> loaded = graph_from_text(text);
  REQUIRE(loaded.size() == 2);
  CHECK(loaded[0].shape() == Shape{2});
  CHECK(loaded[1].shape() == Shape{2, 3});
  CHECK(values(loaded[0]) == values(y));
  CHECK(values(loaded[1]) == values(z));
}

TEST_CASE("buffers are named 0, 1, ... by the file, never by their live ids") {
  Tensor a = make(DType::Float64, iota(4), {4}), b = make(DType::Float64, iota(4, 2), {4});
  const int64_t live_id = buffer_of(b)->get<std::vector<int64_t>>().at(0);
  REQUIRE(live_id > 1);
  const std::string text = graph_to_text({a + b});
  CHECK(text.find("BUFFER f64 [(0 4)]") != std::string::npos);
  CHECK(text.find("BUFFER f64 [(1 4)]") != std::string::npos);
  CHECK(text.find(fmt::format("[({} 4)]", live_id)) == std::string::npos);
  // The data of buffer 1 (b = 0, 2, 4, 6 as little-endian doubles).
  CHECK(text.find("@data 1 hex 0000000000000000000000000000004000000000000010400000000000001840") !=
        std::string::npos);
}

TEST_CASE("a buffer past the size limit is saved as its shape and dtype and filled from its seed on load") {
  Tensor big = make(DType::Float32, iota(1000, 1e-3), {10, 100});
  const std::string text = graph_to_text({big.sum(1)}, SaveGraphOptions{.max_data_bytes = 1024, .seed = 7});
  CHECK(text.find("@data 0 random 7") != std::string::npos);
  CHECK(text.find("hex") == std::string::npos);
  std::vector<double> first = values(graph_from_text(text)[0]), second = values(graph_from_text(text)[0]);
  CHECK(first == second);  // seeded: the same values on every load
  std::vector<double> input =
      values(graph_from_text(text.substr(0, text.find("@data")) + "@data 0 random 7\n")[0]);
  CHECK(input == first);
  Tensor loaded_input = graph_from_text(graph_to_text({big}, SaveGraphOptions{.max_data_bytes = 1024}))[0];
  for (double v : values(loaded_input)) {
    CHECK(v >= -1.0);
    CHECK(v < 1.0);
  }
}

TEST_CASE("realized and lazy outputs, assign and integer data survive a file round trip") {
  Tensor x = make(DType::Int64, iota(5, 3, -7), {5});
  Tensor acc = make(DType::Int64, iota(5), {5});
  acc.assign(acc + x * 2);
  Tensor r = (x % 4).realize();
  std::vector<Tensor> loaded = graph_from_text(graph_to_text({acc, r}));
  realize(loaded);
  CHECK(values(loaded[0]) == values(acc));
  CHECK(values(loaded[1]) == values(r));
}

TEST_CASE("save_graph writes a file load_graph reads") {
  const auto path = std::filesystem::temp_directory_path() / "loom_test_graph_file.loom";
  Tensor a = make(DType::Bool, {1, 0, 1}, {3});
  save_graph({a.logical_not()}, path.string());
  CHECK(values(load_graph(path.string())[0]) == std::vector<double>{0, 1, 0});
  std::filesystem::remove(path);
  CHECK(error_of([&] { load_graph(path.string()); }).find("load_graph: cannot read") == 0);
}

TEST_CASE("malformed graph files are errors naming the line") {
  const std::string graph = "%0 = BUFFER f32 [(0 2)]\n%1 = NEG f32 %0\n";
  CHECK(error_of([&] { graph_from_text(graph + "@data 0 hex 00\n"); }) ==
        "load_graph: line 3: buffer 0 is 2 f32 elements (8 bytes) but @data holds 1 bytes");
  CHECK(error_of([&] { graph_from_text(graph + "@data 0 hex 000000000000000g\n"); }) ==
        "load_graph: line 3: expected a hex digit in @data, got 'g'");
  CHECK(error_of([&] {
          graph_from_text(graph + "@data zero hex 00\n");
        }).find("load_graph: line 3: expected '@data <buffer> hex <digits>'") == 0);
  CHECK(error_of([&] { graph_from_text("%0 = BUFFER f32 [(0 2)]\n%1 = NEG f32 %7\n"); }).find("line 2") !=
        std::string::npos);
  // A buffer without a data line is filled from its number as the seed.
  CHECK(values(graph_from_text(graph)[0]).size() == 2);
}
