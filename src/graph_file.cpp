// Graph files (include/loom/graph_file.hpp, docs/graph-files.md): the IR text
// form of a tensor graph with the file's own buffer numbers, then one `@data`
// line per buffer.
#include <loom/graph_file.hpp>
#include <loom/half.hpp>

#include "ir/pattern.hpp"
#include "ir/text.hpp"
#include "src/engine.hpp"
#include "src/tensor_node.hpp"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace loom {

namespace {

constexpr std::string_view kHeader = "# loom graph 1";
constexpr std::string_view kDataTag = "@data";

const std::vector<int64_t>& buffer_arg(const UOpPtr& b) { return b->get<std::vector<int64_t>>(); }
int64_t buffer_bytes(const UOpPtr& b) { return buffer_arg(b).at(1) * b->dtype.itemsize(); }

std::string hex_of(const void* data, int64_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(static_cast<size_t>(2 * n), '0');
  const auto* p = static_cast<const unsigned char*>(data);
  for (int64_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}

// splitmix64: a fixed, documented generator, so a file fills the same on every machine.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void fill_random(const UOpPtr& buffer, uint64_t seed) {
  void* dst = detail::buffer_data(buffer);
  uint64_t state = seed;
  const int64_t n = buffer_arg(buffer).at(1);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = next_random(state);
    const double unit = static_cast<double>(r >> 11) * 0x1.0p-53;  // [0, 1)
    const int64_t small = static_cast<int64_t>(r % 16);
    switch (buffer->dtype.scalar) {
      case Scalar::Float32: static_cast<float*>(dst)[i] = static_cast<float>(2 * unit - 1); break;
      case Scalar::Float64: static_cast<double*>(dst)[i] = 2 * unit - 1; break;
      case Scalar::BFloat16:
        static_cast<bfloat16*>(dst)[i] = bfloat16(static_cast<float>(2 * unit - 1));
        break;
      case Scalar::Float16: static_cast<float16*>(dst)[i] = float16(static_cast<float>(2 * unit - 1)); break;
      case Scalar::Int32: static_cast<int32_t*>(dst)[i] = static_cast<int32_t>(small - 8); break;
      case Scalar::Int64: static_cast<int64_t*>(dst)[i] = small - 8; break;
      case Scalar::UInt8: static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(small); break;
      case Scalar::Bool: static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(r & 1); break;
    }
  }
}

int hex_digit(char c, size_t line) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  throw Error(fmt::format("load_graph: line {}: expected a hex digit in @data, got '{}'", line, c));
}

struct DataLine {
  size_t line = 0;
  std::string kind;  // "hex" or "random"
  std::string payload;
};

// `@data <buffer> hex <digits>` or `@data <buffer> random <seed>`.
std::pair<int64_t, DataLine> parse_data_line(const std::string& text, size_t line) {
  std::istringstream in(text);
  std::string tag;
  int64_t buffer = -1;
  DataLine d{line, {}, {}};
  in >> tag >> buffer >> d.kind;
  const bool header_ok = !in.fail();
  in >> d.payload;  // empty for an empty buffer's hex
  if (!header_ok || buffer < 0 || (d.kind != "hex" && d.kind != "random") ||
      (d.kind == "random" && d.payload.empty()))
    throw Error(
        fmt::format("load_graph: line {}: expected '@data <buffer> hex <digits>' or '@data <buffer> random "
                    "<seed>', got '{}'",
                    line, text.substr(0, 80)));
  return {buffer, std::move(d)};
}

UOpPtr load_buffer(const UOpPtr& placeholder, const std::map<int64_t, DataLine>& data) {
  const int64_t number = buffer_arg(placeholder).at(0), size = buffer_arg(placeholder).at(1);
  UOpPtr buf = detail::allocate_buffer(placeholder->dtype, size);
  const auto it = data.find(number);
  if (it == data.end() || it->second.kind == "random") {
    // No data line: seeded by the buffer's number, so a hand-written file still runs.
    const uint64_t seed = it == data.end() ? static_cast<uint64_t>(number) : std::stoull(it->second.payload);
    fill_random(buf, seed);
    return buf;
  }
  const std::string& hex = it->second.payload;
  const int64_t bytes = buffer_bytes(placeholder);
  if (static_cast<int64_t>(hex.size()) != 2 * bytes)
    throw Error(
        fmt::format("load_graph: line {}: buffer {} is {} {} elements ({} bytes) but @data holds {} bytes",
                    it->second.line, number, size, to_string(placeholder->dtype), bytes, hex.size() / 2));
  auto* dst = static_cast<unsigned char*>(detail::buffer_data(buf));
  for (int64_t i = 0; i < bytes; ++i)
    dst[i] = static_cast<unsigned char>(hex_digit(hex[2 * i], it->second.line) * 16 +
                                        hex_digit(hex[2 * i + 1], it->second.line));
  return buf;
}

}  // namespace

std::string graph_to_text(const std::vector<Tensor>& outputs, const SaveGraphOptions& options) {
  std::vector<UOpPtr> roots;
  for (const auto& t : outputs) {
    if (!t.defined()) throw Error("save_graph: an output tensor is undefined");
    roots.push_back(t.node()->uop);
  }
  // Renumber buffers 0, 1, ... in graph order: the file names them, never the live ids.
  std::vector<std::pair<UOpPtr, UOpPtr>> renames;
  std::string data;
  for (const auto& n : toposort(roots)) {
    // A file is read back: its text holds numbers only (docs/symbolic.md).
    if (const Shape* sizes = std::get_if<Shape>(&n->arg); sizes && is_symbolic(*sizes))
      throw Error(
          fmt::format("save_graph: the graph has the symbolic sizes {} ({}); graph files hold "
                      "numbers only: build the graph with numbers to save it",
                      str(*sizes), op_name(n->op)));
    if (n->op != Op::BUFFER) continue;
    const auto number = static_cast<int64_t>(renames.size());
    renames.emplace_back(
        n, UOp::make(Op::BUFFER, n->dtype, {}, std::vector<int64_t>{number, buffer_arg(n).at(1)}));
    const int64_t bytes = buffer_bytes(n);
    if (n->storage() && bytes <= options.max_data_bytes)
      data += fmt::format("{} {} hex {}\n", kDataTag, number, hex_of(detail::buffer_data(n), bytes));
    else
      data +=
          fmt::format("{} {} random {}\n", kDataTag, number, options.seed + static_cast<uint64_t>(number));
  }
  const UOpPtr renamed = substitute(UOp::make(Op::SINK, DType::Bool, roots), renames);
  return fmt::format("{}\n# {} output{}, {} buffer{}; format: docs/graph-files.md\n{}{}", kHeader,
                     roots.size(), roots.size() == 1 ? "" : "s", renames.size(),
                     renames.size() == 1 ? "" : "s", to_text(renamed->src), data);
}

void save_graph(const std::vector<Tensor>& outputs, const std::string& path,
                const SaveGraphOptions& options) {
  const std::string text = graph_to_text(outputs, options);
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error(fmt::format("save_graph: cannot write '{}'", path));
}

std::vector<Tensor> graph_from_text(std::string_view text) {
  std::string graph;
  std::map<int64_t, DataLine> data;
  std::istringstream in{std::string(text)};
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (line.rfind(kDataTag, 0) == 0) {
      auto [buffer, d] = parse_data_line(line, number);
      data[buffer] = std::move(d);
      graph += '\n';  // keeps parse_text's line numbers those of the file
    } else {
      graph += line + '\n';
    }
  }
  std::vector<UOpPtr> roots = parse_text_roots(graph);
  std::vector<std::pair<UOpPtr, UOpPtr>> buffers;
  for (const auto& n : toposort(roots))
    if (n->op == Op::BUFFER) buffers.emplace_back(n, load_buffer(n, data));
  const UOpPtr loaded = substitute(UOp::make(Op::SINK, DType::Bool, roots), buffers);
  std::vector<Tensor> out;
  for (const auto& r : loaded->src) out.push_back(detail::make_tensor(r));
  return out;
}

std::vector<Tensor> load_graph(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("load_graph: cannot read '{}'", path));
  std::ostringstream text;
  text << in.rdbuf();
  return graph_from_text(text.str());
}

}  // namespace loom
