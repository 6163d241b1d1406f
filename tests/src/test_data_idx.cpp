// read_idx: files the test writes (plain and gzip, every element type), bad
// files named in errors, and the real Fashion-MNIST headers when installed.
#include "check.hpp"
#include "support/error_message.hpp"

#include <loom/data.hpp>
#include <loom/format.hpp>

#include <zlib.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

using namespace loom;
using test::check_message;
using test::error_of;
using test::values;

namespace {

std::filesystem::path temp(const std::string& name) {
  return std::filesystem::temp_directory_path() / fmt::format("loom_test_{}_{}", ::getpid(), name);
}

// An IDX file's bytes: header, then `data` already big-endian.
std::string idx(unsigned char type, const std::vector<uint32_t>& shape, const std::string& data) {
  std::string out{'\0', '\0', static_cast<char>(type), static_cast<char>(shape.size())};
  for (uint32_t d : shape)
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>((d >> s) & 0xff));
  return out + data;
}

void write_plain(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}
void write_gzip(const std::filesystem::path& p, const std::string& bytes) {
  gzFile f = gzopen(p.c_str(), "wb");
  REQUIRE(f);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  gzclose(f);
}

template <class T>
std::string big_endian(const std::vector<T>& v) {
  std::string out;
  for (T x : v) {
    char b[sizeof(T)];
    std::memcpy(b, &x, sizeof(T));
    for (size_t i = sizeof(T); i-- > 0;) out.push_back(b[i]);
  }
  return out;
}

}  // namespace

TEST_CASE("read_idx reads plain and gzip files of every element type into the header's shape") {
  const auto path = temp("a.idx");
  for (bool gz : {false, true}) {
    CAPTURE(gz);
    const auto write = [&](const std::string& bytes) {
      gz ? write_gzip(path, bytes) : write_plain(path, bytes);
    };
    write(idx(0x08, {2, 3}, std::string{1, 2, 3, 4, 5, static_cast<char>(255)}));
    Tensor t = data::read_idx(path);
    CHECK(t.dtype() == DType::UInt8);
    CHECK(t.shape() == Shape{2, 3});
    CHECK(values(t) == std::vector<double>{1, 2, 3, 4, 5, 255});
    write(idx(0x09, {3}, std::string{static_cast<char>(-3), 0, 127}));
    t = data::read_idx(path);
    CHECK(t.dtype() == DType::Int32);
    CHECK(values(t) == std::vector<double>{-3, 0, 127});
    write(idx(0x0B, {2}, big_endian<int16_t>({-300, 1000})));
    CHECK(values(data::read_idx(path)) == std::vector<double>{-300, 1000});
    write(idx(0x0C, {1, 2}, big_endian<int32_t>({-70000, 123456789})));
    CHECK(values(data::read_idx(path)) == std::vector<double>{-70000, 123456789});
    write(idx(0x0D, {2}, big_endian<float>({1.5f, -0.25f})));
    t = data::read_idx(path);
    CHECK(t.dtype() == DType::Float32);
    CHECK(values(t) == std::vector<double>{1.5, -0.25});
    write(idx(0x0E, {1}, big_endian<double>({0.1})));
    CHECK(data::read_idx(path).to_vector<double>() == std::vector<double>{0.1});
    write(idx(0x08, {0, 28}, ""));
    CHECK(data::read_idx(path).shape() == Shape{0, 28});
  }
  std::filesystem::remove(path);
}

TEST_CASE("read_idx names the file and what is wrong") {
  const auto path = temp("bad.idx");
  check_message(error_of([&] { data::read_idx(temp("missing.idx")); }),
                {"read_idx", "missing.idx", "cannot open"});
  write_plain(path, std::string{1, 0, 8, 1});
  check_message(error_of([&] { data::read_idx(path); }), {"read_idx", "bad.idx", "not an IDX file"});
  write_plain(path, idx(0x0A, {1}, "x"));
  check_message(error_of([&] { data::read_idx(path); }), {"read_idx", "0x0A"});
  write_plain(path, idx(0x08, {2, 2}, "abc"));
  check_message(error_of([&] { data::read_idx(path); }), {"read_idx", "[2, 2]", "4 data bytes", "holds 3"});
  write_plain(path, std::string{0, 0, 8, 3, 0, 0});
  check_message(error_of([&] { data::read_idx(path); }), {"read_idx", "header", "rank-3"});
  std::filesystem::remove(path);
}

TEST_CASE("read_idx reads Fashion-MNIST's headers (dataset-fashion-mnist, skipped when absent)") {
  const std::filesystem::path dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir / "t10k-labels-idx1-ubyte.gz")) return;
  const Tensor labels = data::read_idx(dir / "t10k-labels-idx1-ubyte.gz");
  CHECK(labels.dtype() == DType::UInt8);
  CHECK(labels.shape() == Shape{10000});
  const auto v = values(labels);
  CHECK(*std::max_element(v.begin(), v.end()) == 9);
  const Tensor images = data::read_idx(dir / "t10k-images-idx3-ubyte.gz");
  CHECK(images.shape() == Shape{10000, 28, 28});
  CHECK(images.dtype() == DType::UInt8);
  CHECK(data::read_idx(dir / "train-labels-idx1-ubyte.gz").shape() == Shape{60000});
}
