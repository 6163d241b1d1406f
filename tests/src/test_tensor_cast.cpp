// cast between all dtype pairs, including NaN, infinities and out-of-range
// floats: against the reference interpreter for every pair, and by hand for the
// rules of docs/semantics.md (truncate toward zero and saturate, NaN to 0,
// narrowing integers wrap, anything to Bool is != 0).
#include "check.hpp"

#include <limits>

using namespace loom;
using test::check_ref;
using test::check_values;
using test::make;

namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// Values that fit every source dtype's range, plus the edge cases of floats.
std::vector<double> sources(DType dt) {
  if (dt.is_bool()) return {0, 1, 1, 0};
  if (dt == DType::UInt8) return {0, 1, 127, 128, 255};
  if (dt == DType::Int32) return {0, -1, 255, 256, -129, 2147483647, -2147483648.0};
  if (dt == DType::Int64) return {0, -1, 300, 4294967297.0, -4294967297.0, 9007199254740993.0};
  return {0, -0.0, 1.5, -1.5, 2.9, -2.9, 255.5, 256, -1, 3e9, -3e9, 1e20, -1e20, kInf, -kInf, kNaN};
}
}  // namespace

TEST_CASE("cast: every pair of dtypes agrees with the reference interpreter") {
  for (DType from : test::all_dtypes())
    for (DType to : test::all_dtypes()) {
      CAPTURE(to_string(from));
      CAPTURE(to_string(to));
      std::vector<double> v = sources(from);
      Tensor x = make(from, v, {static_cast<int64_t>(v.size())});
      Tensor y = (x + make(from, std::vector<double>(v.size(), 0), {static_cast<int64_t>(v.size())}))
                     .cast(to);  // computed in a kernel, not a bare upload
      if (from.is_bool()) y = x.logical_or(x).cast(to);
      check_ref(y);
      CHECK(y.dtype() == to);
    }
}

TEST_CASE("cast by hand: float to integer truncates toward zero, saturates, and NaN gives 0") {
  Tensor f = make(DType::Float32, {2.9, -2.9, 3e9, -3e9, kInf, -kInf, kNaN}, {7});
  check_values((f * 1).cast(DType::Int32), {2, -2, 2147483647, -2147483648.0, 2147483647, -2147483648.0, 0});
  check_values((f * 1).cast(DType::UInt8), {2, 0, 255, 0, 255, 0, 0});
  check_values((f * 1).cast(DType::Bool), {1, 1, 1, 1, 1, 1, 1});
  Tensor d = make(DType::Float64, {1e20, -1e20, -0.5, 0.5}, {4});
  check_values((d * 1).cast(DType::Int64), {9223372036854775807.0, -9223372036854775808.0, 0, 0});
}

TEST_CASE("cast by hand: narrowing integers wrap, widening sign-extends, to Bool is != 0") {
  Tensor i = make(DType::Int32, {256, 257, -1, -256, 0}, {5});
  check_values((i * 1).cast(DType::UInt8), {0, 1, 255, 0, 0});
  check_values((i * 1).cast(DType::Bool), {1, 1, 1, 1, 0});
  check_values((i * 1).cast(DType::Int64), {256, 257, -1, -256, 0});
  Tensor l = make(DType::Int64, {4294967297.0, -1, 2147483648.0}, {3});
  check_values((l * 1).cast(DType::Int32), {1, -1, -2147483648.0});
  Tensor u = make(DType::UInt8, {255, 128}, {2});
  check_values((u * 1).cast(DType::Int32), {255, 128});
  check_values((u * 1).cast(DType::Float32), {255, 128});
  Tensor f = make(DType::Float64, {0.1, 1e40}, {2});
  check_values((f * 1).cast(DType::Float32), {static_cast<float>(0.1), kInf});
}
