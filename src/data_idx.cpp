// IDX files (http://yann.lecun.com/exdb/mnist/, "FILE FORMATS"): two zero
// bytes, a type code, the number of dimensions, each size as a big-endian
// 32-bit integer, then the data, big-endian. zlib's gzread reads gzip and
// plain files alike.
#include "src/engine.hpp"
#include "src/tensor_ops.hpp"

#include <loom/data.hpp>

#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

namespace loom::data {

using namespace detail;

namespace {

struct ElementType {
  unsigned char code;
  int bytes;
  DType dtype;
  const char* name;
};
constexpr ElementType element_types[] = {
    {0x08, 1, DType::UInt8, "unsigned byte"}, {0x09, 1, DType::Int32, "signed byte"},
    {0x0B, 2, DType::Int32, "short"},         {0x0C, 4, DType::Int32, "int"},
    {0x0D, 4, DType::Float32, "float"},       {0x0E, 8, DType::Float64, "double"}};

// The whole (decompressed) file.
std::string read_all(const std::filesystem::path& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw Error(fmt::format("read_idx {}: cannot open the file", path.string()));
  std::string out;
  char chunk[1 << 16];
  int n;
  while ((n = gzread(f, chunk, sizeof chunk)) > 0) out.append(chunk, static_cast<size_t>(n));
  int err = Z_OK;
  const std::string msg = n < 0 ? gzerror(f, &err) : "";
  gzclose(f);
  if (n < 0) throw Error(fmt::format("read_idx {}: reading failed: {}", path.string(), msg));
  return out;
}

uint32_t big_endian_u32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Element i of big-endian data of `bytes` bytes each, widened into dst.
template <class Src, class Dst>
void widen(const unsigned char* src, Dst* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    std::array<unsigned char, sizeof(Src)> b;
    std::memcpy(b.data(), src + i * static_cast<int64_t>(sizeof(Src)), sizeof(Src));
    if constexpr (std::endian::native == std::endian::little) std::reverse(b.begin(), b.end());
    Src v;
    std::memcpy(&v, b.data(), sizeof(Src));
    dst[i] = static_cast<Dst>(v);
  }
}

}  // namespace

Tensor read_idx(const std::filesystem::path& path) {
  const std::string file = path.string();
  const std::string bytes = read_all(path);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 4 || p[0] != 0 || p[1] != 0)
    throw Error(
        fmt::format("read_idx {}: not an IDX file (expected two zero bytes, a type code and a rank)", file));
  const auto* type = std::find_if(std::begin(element_types), std::end(element_types),
                                  [&](const ElementType& t) { return t.code == p[2]; });
  if (type == std::end(element_types))
    throw Error(
        fmt::format("read_idx {}: unknown type code 0x{:02X} (expected 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E)",
                    file, p[2]));
  const size_t rank = p[3];
  const size_t header = 4 + 4 * rank;
  if (bytes.size() < header)
    throw Error(fmt::format("read_idx {}: {} bytes cannot hold the header of a rank-{} file", file,
                            bytes.size(), rank));
  Shape shape;
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) {
    shape.push_back(big_endian_u32(p + 4 + 4 * i));
    n *= shape.back();
  }
  const auto want = static_cast<uint64_t>(n) * static_cast<uint64_t>(type->bytes);
  if (bytes.size() - header != want)
    throw Error(fmt::format("read_idx {}: shape {} of {} needs {} data bytes, the file holds {}", file,
                            str(shape), type->name, want, bytes.size() - header));
  const UOpPtr buf = allocate_buffer(type->dtype, n, false);
  void* dst = buffer_data(buf);
  const unsigned char* src = p + header;
  switch (type->code) {
    case 0x08: std::memcpy(dst, src, static_cast<size_t>(n)); break;
    case 0x09: widen<int8_t>(src, static_cast<int32_t*>(dst), n); break;
    case 0x0B: widen<int16_t>(src, static_cast<int32_t*>(dst), n); break;
    case 0x0C: widen<int32_t>(src, static_cast<int32_t*>(dst), n); break;
    case 0x0D: widen<float>(src, static_cast<float*>(dst), n); break;
    case 0x0E: widen<double>(src, static_cast<double*>(dst), n); break;
  }
  return make_tensor(reshape_uop(buf, shape));
}

}  // namespace loom::data
