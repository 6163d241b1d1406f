// Checkpoints: loom's files follow the safetensors layout byte for byte, files
// written by hand to the published format load, and every kind of damage is a
// loom::Error naming the file and the problem.
#include "check.hpp"
#include "support/error_message.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

using namespace loom;
using test::check_values;
using test::make;
using test::values;

namespace {

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / fmt::format("loom_test_{}_{}", ::getpid(), name);
}

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_all(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file by the published recipe: u64 LE header length, header, data.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}
template <class T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::string load_error(const std::string& bytes) {
  const auto p = temp_file("bad.safetensors");
  write_all(p, bytes);
  std::string message = test::error_of([&] { load(p); });
  std::filesystem::remove(p);
  return message;
}

}  // namespace

TEST_CASE("save then load gives back every dtype, shape and value, 0-d and empty tensors included") {
  const auto p = temp_file("roundtrip.safetensors");
  NamedTensors in{
      {"w", make(DType::Float32, {1.5, -2.25, 3, 1e-30, -0.0, 7}, {2, 3})},
      {"d", make(DType::Float64, {0.1, 1e300}, {2})},
      {"i", make(DType::Int32, {-7, 2147483647}, {2, 1})},
      {"l", make(DType::Int64, {-9007199254740993.0}, {1})},
      {"u", make(DType::UInt8, {0, 255, 128}, {3})},
      {"b", make(DType::Bool, {1, 0, 1, 1}, {2, 2})},
      {"scalar", Tensor::scalar(4.5)},
      {"empty", Tensor::zeros({0, 3})},
      {"lazy", make(DType::Float32, {1, 2}, {2}) * 3},  // realized by save
  };
  save(p, in);
  auto out = load(p);
  REQUIRE(out.size() == in.size());
  for (const auto& [name, t] : in) {
    INFO(name);
    REQUIRE(out.count(name));
    const Tensor& back = out.at(name);
    CHECK(back.shape() == t.shape());
    CHECK(back.dtype() == t.dtype());
    CHECK(values(back) == values(t));
  }
  std::filesystem::remove(p);
}

TEST_CASE("the file is the published layout: u64 length, an 8-aligned JSON header, tensors back to back") {
  const auto p = temp_file("layout.safetensors");
  save(p, NamedTensors{{"a", make(DType::Float32, {1, 2, 3}, {3})}, {"b", make(DType::Int64, {5}, {1, 1})}});
  const std::string bytes = read_all(p);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  CHECK(n % 8 == 0);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  CHECK(header["a"]["dtype"] == "F32");
  CHECK(header["a"]["shape"] == nlohmann::json::array({3}));
  CHECK(header["a"]["data_offsets"] == nlohmann::json::array({0, 12}));
  CHECK(header["b"]["dtype"] == "I64");
  CHECK(header["b"]["shape"] == nlohmann::json::array({1, 1}));
  CHECK(header["b"]["data_offsets"] == nlohmann::json::array({12, 20}));
  CHECK(bytes.size() == 8 + n + 20);
  CHECK(bytes.substr(8 + n, 12) == raw(std::vector<float>{1, 2, 3}));
  CHECK(bytes.substr(8 + n + 12) == raw(std::vector<int64_t>{5}));
  std::filesystem::remove(p);
}

TEST_CASE("a file written by hand to the published format loads, metadata and odd key order included") {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"y":{"dtype":"I32","shape":[2],"data_offsets":[16,24]},)"
      R"("x":{"shape":[2,2],"data_offsets":[0,16],"dtype":"F32"}}   )";  // trailing spaces pad the header
  const auto p = temp_file("hand.safetensors");
  write_all(
      p, safetensors_bytes(header, raw(std::vector<float>{1, 2, 3, 4}) + raw(std::vector<int32_t>{-5, 6})));
  auto t = load(p);
  REQUIRE(t.size() == 2);
  CHECK(t.at("x").shape() == Shape{2, 2});
  check_values(t.at("x") * 1, {1, 2, 3, 4});
  check_values(t.at("y") + 0, {-5, 6});
  std::filesystem::remove(p);
}

TEST_CASE("a hand-written BOOL tensor reads any non-zero byte as true") {
  const auto p = temp_file("bool.safetensors");
  write_all(p, safetensors_bytes(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})",
                                 std::string("\x00\x02\x01", 3)));
  CHECK(values(load(p).at("m")) == std::vector<double>{0, 1, 1});
  std::filesystem::remove(p);
}

TEST_CASE("truncated or malformed files are a loom::Error naming the problem") {
  const std::string x = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data = raw(std::vector<float>{1, 2});
  const std::string good = safetensors_bytes(x, data);
  test::check_message(load_error(""), {"too short"});
  test::check_message(load_error(good.substr(0, 5)), {"too short"});
  test::check_message(load_error(good.substr(0, 20)), {"header length", "past the end"});
  test::check_message(load_error(good.substr(0, good.size() - 1)), {"cover 8 bytes", "holds 7"});
  test::check_message(load_error(good + "junk"), {"cover 8 bytes", "holds 12"});
  test::check_message(load_error(safetensors_bytes("{\"x\": [1, 2", data)), {"not valid JSON"});
  test::check_message(load_error(safetensors_bytes("[1, 2]", data)), {"not a JSON object"});
  test::check_message(
      load_error(safetensors_bytes(R"({"x":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})", data)),
      {"'x'", "F16"});
  test::check_message(
      load_error(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data)),
      {"'x'", "[3]", "12"});
  test::check_message(
      load_error(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data)),
      {"'x'", "non-negative"});
  test::check_message(load_error(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[2]}})", data)),
                      {"'x'", "data_offsets"});
  test::check_message(load_error(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                                   R"("y":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                                   data)),
                      {"starts at byte 0", "expected 4"});
  test::check_message(
      load_error(safetensors_bytes(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data)),
      {"'x'", "starts at byte 4"});
  test::check_message(test::error_of([] { load(temp_file("missing.safetensors")); }),
                      {"cannot open", "missing"});
}

TEST_CASE(
    "save refuses duplicate, empty and reserved names and undefined tensors, and leaves no file behind") {
  const auto p = temp_file("refused.safetensors");
  const Tensor t = Tensor::ones({2});
  test::check_message(test::error_of([&] { save(p, NamedTensors{{"a", t}, {"a", t}}); }), {"'a'", "twice"});
  test::check_message(test::error_of([&] { save(p, NamedTensors{{"", t}}); }), {"not a valid tensor name"});
  test::check_message(test::error_of([&] { save(p, NamedTensors{{"__metadata__", t}}); }), {"__metadata__"});
  test::check_message(test::error_of([&] { save(p, NamedTensors{{"u", Tensor()}}); }), {"'u'", "undefined"});
  test::check_message(test::error_of([&] {
                        save("/nonexistent-dir/x.safetensors", NamedTensors{{"a", t}});
                      }),
                      {"cannot open", "/nonexistent-dir"});
  CHECK(!std::filesystem::exists(p));
}
