// safetensors: u64 header length N (little-endian), N bytes of JSON, then the data.
// Each header entry is {"dtype", "shape", "data_offsets": [begin, end)} with
// offsets relative to the start of the data; the entries tile the data exactly.
#include "src/engine.hpp"
#include "src/tensor_ops.hpp"

#include <loom/checkpoint.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <type_traits>

namespace loom {

using namespace detail;

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

using nlohmann::json;

constexpr uint64_t max_header_bytes = 100'000'000;  // as the reference implementation

struct DTypeName {
  DType dtype;
  const char* name;
};
// loom's dtypes as safetensors names them: BF16 and F16 are little-endian 2-byte values.
constexpr DTypeName dtype_names[] = {
    {DType::Bool, "BOOL"},   {DType::UInt8, "U8"},    {DType::Int32, "I32"},     {DType::Int64, "I64"},
    {DType::Float32, "F32"}, {DType::Float64, "F64"}, {DType::BFloat16, "BF16"}, {DType::Float16, "F16"}};

// safetensors integer dtypes loom lacks, each read into the smallest loom dtype that
// holds every value exactly (U64 into Int64: a value of 2^63 or more is an error).
struct Widened {
  const char* name;
  int bytes;
  bool is_signed;
  DType dtype;
};
constexpr Widened widened_names[] = {{"I8", 1, true, DType::Int32},
                                     {"I16", 2, true, DType::Int32},
                                     {"U16", 2, false, DType::Int32},
                                     {"U32", 4, false, DType::Int64},
                                     {"U64", 8, false, DType::Int64}};

const char* safetensors_name(DType dt) {
  for (const auto& d : dtype_names)
    if (d.dtype == dt) return d.name;
  throw Error(fmt::format("save: dtype {} has no safetensors name", scalar_name(dt.scalar)));
}

std::string where(const std::filesystem::path& path) { return path.string(); }

// A buffer view's base address (the tensor is realized).
const void* data_of(const Tensor& t) {
  const UOpPtr& v = t.node()->uop;
  return detail::buffer_data(v->op == Op::RESHAPE ? v->src[0] : v);
}

void write_file(const std::filesystem::path& path, const std::string& header, const NamedTensors& tensors) {
  const std::filesystem::path partial = path.string() + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    if (!out)
      throw Error(fmt::format("save: cannot open {} for writing: {}", where(partial), std::strerror(errno)));
    const uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), sizeof n);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const auto& [name, t] : tensors)
      out.write(static_cast<const char*>(data_of(t)), t.numel() * t.dtype().itemsize());
    if (!out.flush()) throw Error(fmt::format("save: writing {} failed", where(partial)));
  }
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  if (ec)
    throw Error(fmt::format("save: cannot move {} to {}: {}", where(partial), where(path), ec.message()));
}

}  // namespace

void save(const std::filesystem::path& path, const NamedTensors& tensors) {
  std::set<std::string> names;
  std::vector<Tensor> all;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__")
      throw Error(fmt::format("save {}: '{}' is not a valid tensor name", where(path), name));
    if (!names.insert(name).second)
      throw Error(fmt::format("save {}: the name '{}' appears twice", where(path), name));
    if (!t.defined()) throw Error(fmt::format("save {}: tensor '{}' is undefined", where(path), name));
    all.push_back(t);
  }
  loom::realize(all);
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.dtype().itemsize();
    header[name] = {{"dtype", safetensors_name(t.dtype())},
                    {"shape", concrete(t.shape(), "save")},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned, as PyTorch's writer does
  write_file(path, text, tensors);
}

void save(const std::filesystem::path& path, const std::map<std::string, Tensor>& tensors) {
  save(path, NamedTensors(tensors.begin(), tensors.end()));
}

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("load: cannot open {}: {}", where(path), std::strerror(errno)));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct TensorEntry {
  std::string name;
  DType dtype;             // loom's dtype of the loaded tensor
  const Widened* widened;  // the file's dtype when loom converts it, else null
  Shape shape;
  uint64_t begin, end;
};

// One header entry, checked: a known dtype, a shape of non-negative sizes, and
// a byte range as long as the shape says.
TensorEntry parse_entry(const std::string& name, const json& e, const std::string& file) {
  auto bad = [&](const std::string& what) {
    return Error(fmt::format("load {}: tensor '{}': {}", file, name, what));
  };
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    throw bad("expected an object with dtype, shape and data_offsets");
  const json &dt = e["dtype"], &shape = e["shape"], &off = e["data_offsets"];
  if (!dt.is_string()) throw bad("dtype is not a string");
  const std::string dt_name = dt.get<std::string>();
  const auto* known = std::find_if(std::begin(dtype_names), std::end(dtype_names),
                                   [&](const DTypeName& d) { return dt_name == d.name; });
  const auto* widened = std::find_if(std::begin(widened_names), std::end(widened_names),
                                     [&](const Widened& d) { return dt_name == d.name; });
  if (known == std::end(dtype_names) && widened == std::end(widened_names))
    throw bad(
        fmt::format("dtype {} is not one loom reads (BOOL, U8, I8, I16, U16, I32, U32, I64, U64, BF16, "
                    "F16, F32, F64)",
                    dt_name));
  const bool is_widened = known == std::end(dtype_names);
  const uint64_t itemsize = is_widened ? widened->bytes : known->dtype.itemsize();
  TensorEntry out{name, is_widened ? widened->dtype : known->dtype, is_widened ? widened : nullptr, {}, 0, 0};
  if (!shape.is_array()) throw bad("shape is not an array");
  uint64_t elements = 1;
  for (const auto& d : shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 48))
      throw bad(fmt::format("shape {} has a size that is not a non-negative integer", shape.dump()));
    out.shape.push_back(d.get<int64_t>());
    elements *= d.get<uint64_t>();
    if (elements > (uint64_t{1} << 48)) throw bad(fmt::format("shape {} is too large", shape.dump()));
  }
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    throw bad("data_offsets is not a pair of non-negative integers");
  out.begin = off[0].get<uint64_t>();
  out.end = off[1].get<uint64_t>();
  if (out.end < out.begin || out.end - out.begin != elements * itemsize)
    throw bad(fmt::format("data_offsets [{}, {}) hold {} bytes, but shape {} of {} needs {}", out.begin,
                          out.end, out.end - out.begin, shape.dump(), dt_name, elements * itemsize));
  return out;
}

json parse_header(const std::string& bytes, const std::string& file) {
  if (bytes.size() < 8)
    throw Error(
        fmt::format("load {}: {} bytes is too short for a safetensors file (an 8-byte header length first)",
                    file, bytes.size()));
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  if (n > max_header_bytes || n > bytes.size() - 8)
    throw Error(fmt::format("load {}: the header length {} runs past the end of the file ({} bytes)", file, n,
                            bytes.size()));
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  } catch (const json::exception& e) {
    throw Error(fmt::format("load {}: the header is not valid JSON: {}", file, e.what()));
  }
  if (!header.is_object()) throw Error(fmt::format("load {}: the header is not a JSON object", file));
  return header;
}

// Copies a widened integer tensor's little-endian values into `dst` (Int32 or Int64),
// sign- or zero-extended, so each is exact.
void widen(const TensorEntry& e, const char* src, void* dst, const std::string& file) {
  const uint64_t n = (e.end - e.begin) / static_cast<uint64_t>(e.widened->bytes);
  auto copy = [&]<class From, class To>(From, To* out) {
    for (uint64_t i = 0; i < n; ++i) {
      From v;
      std::memcpy(&v, src + i * sizeof(From), sizeof(From));
      if constexpr (std::is_same_v<From, uint64_t>)
        if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          throw Error(
              fmt::format("load {}: tensor '{}': U64 element {} is {}, which Int64 (loom's widest "
                          "integer) cannot hold exactly",
                          file, e.name, i, v));
      out[i] = static_cast<To>(v);
    }
  };
  const std::string_view name = e.widened->name;
  if (name == "I8")
    copy(int8_t{}, static_cast<int32_t*>(dst));
  else if (name == "I16")
    copy(int16_t{}, static_cast<int32_t*>(dst));
  else if (name == "U16")
    copy(uint16_t{}, static_cast<int32_t*>(dst));
  else if (name == "U32")
    copy(uint32_t{}, static_cast<int64_t*>(dst));
  else
    copy(uint64_t{}, static_cast<int64_t*>(dst));
}

Tensor tensor_of(const TensorEntry& e, const char* data, const std::string& file) {
  UOpPtr buf = detail::allocate_buffer(e.dtype, count(e.shape), false);
  auto* dst = static_cast<unsigned char*>(detail::buffer_data(buf));
  if (e.widened) {
    widen(e, data + e.begin, dst, file);
    return detail::make_tensor(reshape_uop(buf, e.shape));
  }
  std::memcpy(dst, data + e.begin, e.end - e.begin);
  if (e.dtype == DType::Bool)  // loom's Bool is 0 or 1; safetensors only says "one byte"
    for (uint64_t i = 0; i < e.end - e.begin; ++i) dst[i] = dst[i] != 0;
  return detail::make_tensor(reshape_uop(buf, e.shape));
}

}  // namespace

std::map<std::string, Tensor> load(const std::filesystem::path& path) {
  const std::string file = where(path), bytes = read_file(path);
  const json header = parse_header(bytes, file);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  const uint64_t data_size = bytes.size() - 8 - n;
  std::vector<TensorEntry> entries;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") {
      if (!e.is_object()) throw Error(fmt::format("load {}: __metadata__ is not an object", file));
      continue;
    }
    entries.push_back(parse_entry(name, e, file));
  }
  // The ranges tile the data: sorted by start, each begins where the last ended.
  std::sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t at = 0;
  for (const auto& e : entries) {
    if (e.begin != at)
      throw Error(fmt::format(
          "load {}: tensor '{}' starts at byte {} of the data, expected {} (ranges must tile the data)", file,
          e.name, e.begin, at));
    at = e.end;
  }
  if (at != data_size)
    throw Error(
        fmt::format("load {}: the tensors cover {} bytes of data but the file holds {} (truncated or padded)",
                    file, at, data_size));
  std::map<std::string, Tensor> out;
  const char* data = bytes.data() + 8 + n;
  for (const auto& e : entries) out.emplace(e.name, tensor_of(e, data, file));
  return out;
}

}  // namespace loom
