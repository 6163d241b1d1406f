// Checkpoints: loom's files follow the safetensors layout byte for byte, files
// written by hand to the published format load, and every kind of damage is a
// loom::Error naming the file and the problem.
#include "check.hpp"
#include "support/error_message.hpp"

#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

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

namespace {

// 16-bit values as the published format stores them: little-endian, low byte first.
std::string le16(const std::vector<uint16_t>& bits) {
  std::string out;
  for (uint16_t b : bits) {
    out.push_back(static_cast<char>(b & 0xff));
    out.push_back(static_cast<char>(b >> 8));
  }
  return out;
}

std::vector<uint16_t> bits_of(const Tensor& t) {
  std::vector<uint16_t> out;
  if (t.dtype() == DType::BFloat16)
    for (bfloat16 x : t.to_vector<bfloat16>()) out.push_back(x.bits);
  else
    for (float16 x : t.to_vector<float16>()) out.push_back(x.bits);
  return out;
}

}  // namespace

TEST_CASE("hand-written BF16 and F16 tensors load with the values their bits encode") {
  const auto p = temp_file("half.safetensors");
  // BF16 is float32's top half: 0x3f80 = 1, 0xc040 = -3, 0x3e20 = 0.15625, 0x0001 = 2^-133
  // (the smallest subnormal), 0x7f7f = (2 - 2^-7) 2^127, 0xff80 = -inf, 0x7fc0 = NaN, 0x8000 = -0.
  const std::vector<uint16_t> bf = {0x3f80, 0xc040, 0x3e20, 0x0001, 0x7f7f, 0xff80, 0x7fc0, 0x8000};
  // F16, bias 15, 10 mantissa bits: 0x3c00 = 1, 0xc500 = -5, 0x3555 = 1365/4096, 0x0001 = 2^-24,
  // 0x03ff = 1023 2^-24 (largest subnormal), 0x7bff = 65504, 0x7c00 = inf, 0x7e00 = NaN, 0x8000 = -0.
  const std::vector<uint16_t> hf = {0x3c00, 0xc500, 0x3555, 0x0001, 0x03ff, 0x7bff, 0x7c00, 0x7e00, 0x8000};
  write_all(p, safetensors_bytes(R"({"b":{"dtype":"BF16","shape":[2,4],"data_offsets":[0,16]},)"
                                 R"("h":{"dtype":"F16","shape":[9],"data_offsets":[16,34]}})",
                                 le16(bf) + le16(hf)));
  auto t = load(p);
  const Tensor &b = t.at("b"), &h = t.at("h");
  CHECK(b.dtype() == DType::BFloat16);
  CHECK(b.shape() == Shape{2, 4});
  CHECK(h.dtype() == DType::Float16);
  CHECK(h.shape() == Shape{9});
  CHECK(bits_of(b) == bf);
  CHECK(bits_of(h) == hf);
  const std::vector<double> vb = values(b), vh = values(h);
  CHECK(vb[0] == 1.0);
  CHECK(vb[1] == -3.0);
  CHECK(vb[2] == 0.15625);
  CHECK(vb[3] == std::ldexp(1.0, -133));
  CHECK(vb[4] == std::ldexp(2.0 - std::ldexp(1.0, -7), 127));
  CHECK(vb[5] == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(vb[6]));
  CHECK((vb[7] == 0.0 && std::signbit(vb[7])));
  CHECK(vh[0] == 1.0);
  CHECK(vh[1] == -5.0);
  CHECK(vh[2] == 1365.0 / 4096);
  CHECK(vh[3] == std::ldexp(1.0, -24));
  CHECK(vh[4] == 1023 * std::ldexp(1.0, -24));
  CHECK(vh[5] == 65504.0);
  CHECK(vh[6] == std::numeric_limits<double>::infinity());
  CHECK(std::isnan(vh[7]));
  CHECK((vh[8] == 0.0 && std::signbit(vh[8])));
  // And they compute: widened to Float32 exactly, then rounded back once.
  check_values((h.slice(0, 0, 3) * 2).cast(DType::Float32), {2, -10, 1365.0 / 2048});
  std::filesystem::remove(p);
}

TEST_CASE("loom writes BF16 and F16 tensors in the published layout, and reads them back bit for bit") {
  const auto p = temp_file("half_layout.safetensors");
  const std::vector<uint16_t> bf = {0x3f80, 0xc040, 0x0001, 0x7fc0, 0x8000};
  const std::vector<uint16_t> hf = {0x3555, 0x0001, 0x7c00, 0xfc00};
  std::vector<bfloat16> bv;
  std::vector<float16> hv;
  for (uint16_t b : bf) bv.push_back(bfloat16::from_bits(b));
  for (uint16_t b : hf) hv.push_back(float16::from_bits(b));
  save(p, NamedTensors{{"b", Tensor::from_vector<bfloat16>(bv, {5})},
                       {"h", Tensor::from_vector<float16>(hv, {2, 2})}});
  const std::string bytes = read_all(p);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  CHECK(header["b"]["dtype"] == "BF16");
  CHECK(header["b"]["shape"] == nlohmann::json::array({5}));
  CHECK(header["b"]["data_offsets"] == nlohmann::json::array({0, 10}));
  CHECK(header["h"]["dtype"] == "F16");
  CHECK(header["h"]["shape"] == nlohmann::json::array({2, 2}));
  CHECK(header["h"]["data_offsets"] == nlohmann::json::array({10, 18}));
  CHECK(bytes.size() == 8 + n + 18);
  CHECK(bytes.substr(8 + n) == le16(bf) + le16(hf));
  auto back = load(p);
  CHECK(bits_of(back.at("b")) == bf);
  CHECK(bits_of(back.at("h")) == hf);
  std::filesystem::remove(p);
}

TEST_CASE("I8, I16 and U16 load as Int32, U32 and U64 as Int64, every value exact") {
  const auto p = temp_file("ints.safetensors");
  const std::string data = raw(std::vector<int8_t>{-128, 127, -1, 0}) +
                           raw(std::vector<int16_t>{-32768, 32767}) + raw(std::vector<uint16_t>{65535, 1}) +
                           raw(std::vector<uint32_t>{4294967295u, 7}) +
                           raw(std::vector<uint64_t>{9223372036854775807ull, 3});
  write_all(p, safetensors_bytes(R"({"a":{"dtype":"I8","shape":[2,2],"data_offsets":[0,4]},)"
                                 R"("b":{"dtype":"I16","shape":[2],"data_offsets":[4,8]},)"
                                 R"("c":{"dtype":"U16","shape":[2],"data_offsets":[8,12]},)"
                                 R"("d":{"dtype":"U32","shape":[2],"data_offsets":[12,20]},)"
                                 R"("e":{"dtype":"U64","shape":[2],"data_offsets":[20,36]}})",
                                 data));
  auto t = load(p);
  CHECK(t.at("a").dtype() == DType::Int32);
  CHECK(t.at("a").shape() == Shape{2, 2});
  CHECK(t.at("a").to_vector<int32_t>() == std::vector<int32_t>{-128, 127, -1, 0});
  CHECK(t.at("b").dtype() == DType::Int32);
  CHECK(t.at("b").to_vector<int32_t>() == std::vector<int32_t>{-32768, 32767});
  CHECK(t.at("c").dtype() == DType::Int32);
  CHECK(t.at("c").to_vector<int32_t>() == std::vector<int32_t>{65535, 1});
  CHECK(t.at("d").dtype() == DType::Int64);
  CHECK(t.at("d").to_vector<int64_t>() == std::vector<int64_t>{4294967295, 7});
  CHECK(t.at("e").dtype() == DType::Int64);
  CHECK(t.at("e").to_vector<int64_t>() == std::vector<int64_t>{9223372036854775807, 3});
  std::filesystem::remove(p);
  // A U64 past Int64's range cannot be exact: the error names the dtype, tensor and value.
  test::check_message(
      load_error(safetensors_bytes(R"({"big":{"dtype":"U64","shape":[2],"data_offsets":[0,16]}})",
                                   raw(std::vector<uint64_t>{1, 9223372036854775808ull}))),
      {"'big'", "U64", "element 1", "9223372036854775808", "Int64"});
  // The byte count follows the file's dtype, not loom's.
  test::check_message(
      load_error(safetensors_bytes(R"({"x":{"dtype":"I16","shape":[3],"data_offsets":[0,4]}})", "abcd")),
      {"'x'", "[3]", "I16", "needs 6"});
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
      load_error(safetensors_bytes(R"({"x":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", data)),
      {"'x'", "F8_E4M3", "not one loom reads"});
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
