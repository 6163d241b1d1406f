#include <loom/dtype.hpp>
#include <loom/error.hpp>

#include <array>
#include <charconv>

namespace loom {

namespace {
constexpr std::array<std::string_view, 8> kShort = {"bool", "u8", "i32", "i64", "f32", "f64", "bf16", "f16"};
constexpr std::array<std::string_view, 8> kLong = {"Bool",    "UInt8",   "Int32",    "Int64",
                                                   "Float32", "Float64", "BFloat16", "Float16"};
}  // namespace

std::string_view scalar_name(Scalar s) { return kLong.at(static_cast<size_t>(s)); }

std::string to_string(DType dt) {
  std::string out(kShort.at(static_cast<size_t>(dt.scalar)));
  if (dt.lanes != 1) out += "x" + std::to_string(dt.lanes);
  if (dt.ptr) out += "*";
  return out;
}

DType parse_dtype(std::string_view text) {
  DType dt;
  std::string_view rest = text;
  if (!rest.empty() && rest.back() == '*') {
    dt.ptr = true;
    rest.remove_suffix(1);
  }
  size_t x = rest.find('x');
  std::string_view base = rest.substr(0, x);
  bool found = false;
  for (size_t i = 0; i < kShort.size(); ++i)
    if (kShort[i] == base) {
      dt.scalar = static_cast<Scalar>(i);
      found = true;
    }
  if (!found) throw Error("parse_dtype: unknown dtype '" + std::string(text) + "'");
  if (x != std::string_view::npos) {
    int lanes = 0;
    auto lanes_text = rest.substr(x + 1);
    auto [p, ec] = std::from_chars(lanes_text.data(), lanes_text.data() + lanes_text.size(), lanes);
    if (ec != std::errc() || p != lanes_text.data() + lanes_text.size() || lanes < 1 ||
        lanes > DType::kMaxLanes)
      throw Error("parse_dtype: bad lane count in '" + std::string(text) + "'");
    dt.lanes = static_cast<uint16_t>(lanes);
  }
  return dt;
}

}  // namespace loom
