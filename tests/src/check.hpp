#pragma once
// Shared checks for the Tensor tests: a tensor's compiled result against the
// reference interpreter (run on the same lazy graph, before it is realized)
// and against hand-computed values, with proof that kernels ran.
#include "src/engine.hpp"
#include "support/reference_interpreter.hpp"

#include <loom/loom.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

namespace loom::test {

inline ref::RefTensor reference(const Tensor& t) {
  return ref::evaluate(t.node()->uop, [](const UOpPtr& b) -> const void* { return detail::buffer_data(b); });
}

// Values of a realized tensor of any dtype, as doubles.
inline std::vector<double> values(const Tensor& t) {
  switch (t.dtype().scalar) {
    case Scalar::Float32: {
      auto v = t.to_vector<float>();
      return {v.begin(), v.end()};
    }
    case Scalar::Float64: return t.to_vector<double>();
    case Scalar::BFloat16: {
      std::vector<double> out;
      for (bfloat16 x : t.to_vector<bfloat16>()) out.push_back(static_cast<double>(x));
      return out;
    }
    case Scalar::Float16: {
      std::vector<double> out;
      for (float16 x : t.to_vector<float16>()) out.push_back(static_cast<double>(x));
      return out;
    }
    case Scalar::Int32: {
      auto v = t.to_vector<int32_t>();
      return {v.begin(), v.end()};
    }
    case Scalar::Int64: {
      auto v = t.to_vector<int64_t>();
      return {v.begin(), v.end()};
    }
    case Scalar::UInt8: {
      auto v = t.to_vector<uint8_t>();
      return {v.begin(), v.end()};
    }
    case Scalar::Bool: {
      auto v = t.to_vector<bool>();
      return {v.begin(), v.end()};
    }
  }
  return {};
}

// The base address of a realized tensor's buffer: the same address before and
// after an assign means the write happened in place.
inline const void* buffer_address(const Tensor& t) {
  const UOpPtr& v = t.node()->uop;
  return detail::buffer_data(v->op == Op::RESHAPE ? v->src[0] : v);
}

// A tensor of `dt` holding `v` (converted like a C++ static_cast).
inline Tensor make(DType dt, const std::vector<double>& v, Shape shape) {
  auto conv = [&]<class T>(T) {
    std::vector<T> out;
    for (double x : v) out.push_back(static_cast<T>(x));
    return Tensor::from_vector<T>(out, shape);
  };
  switch (dt.scalar) {
    case Scalar::Float32: return conv(float{});
    case Scalar::Float64: return conv(double{});
    case Scalar::BFloat16: return conv(bfloat16{});
    case Scalar::Float16: return conv(float16{});
    case Scalar::Int32: return conv(int32_t{});
    case Scalar::Int64: return conv(int64_t{});
    case Scalar::UInt8: return conv(uint8_t{});
    case Scalar::Bool: return conv(bool{});
  }
  return {};
}

// 0, 1, 2, ... n-1 scaled and shifted, as a tensor of `dt` (values chosen by the caller to fit).
inline std::vector<double> iota(int64_t n, double scale = 1, double shift = 0) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>(i) * scale + shift);
  return v;
}

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> d{DType::Bool,  DType::UInt8,   DType::Int32,
                                    DType::Int64, DType::Float32, DType::Float64};
  return d;
}
inline const std::vector<DType>& number_dtypes() {
  static const std::vector<DType> d{DType::UInt8, DType::Int32, DType::Int64, DType::Float32, DType::Float64};
  return d;
}

// Equal, or (floats) within `ulps` units in the last place of the expected value; NaN matches NaN.
inline bool close(double got, double want, DType dt, double ulps) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  if (!dt.is_float()) return got == want;
  const double eps = dt.scalar == Scalar::Float32    ? 0x1p-23
                     : dt.scalar == Scalar::BFloat16 ? 0x1p-7
                     : dt.scalar == Scalar::Float16  ? 0x1p-10
                                                     : 0x1p-52;
  return std::abs(got - want) <= ulps * eps * std::max(std::abs(want), 1e-30) || got == want;
}

// Realizes `t`, checks a kernel ran, compares with the reference interpreter
// and returns the values.
inline std::vector<double> check_ref(const Tensor& t, double ulps = 0) {
  ref::RefTensor want = reference(t);
  const auto before = counters().kernels_executed;
  Tensor r = t;
  r.realize();
  CHECK_MESSAGE(counters().kernels_executed > before, "no kernel ran: the result came from a side path");
  CHECK(r.shape() == want.shape);
  CHECK(r.dtype() == want.dtype);
  std::vector<double> got = values(r);
  REQUIRE(static_cast<int64_t>(got.size()) == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (!close(got[i], want.at(static_cast<int64_t>(i)), r.dtype(), ulps)) {
      FAIL_CHECK("element " << i << ": got " << got[i] << ", reference " << want.at(static_cast<int64_t>(i)));
      break;
    }
  return got;
}

// check_ref, then the hand-computed values.
inline void check_values(const Tensor& t, const std::vector<double>& expected, double ulps = 0) {
  std::vector<double> got = check_ref(t, ulps);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(close(got[i], expected[i], t.dtype(), std::max(ulps, 1.0)),
                  "element " << i << ": got " << got[i] << ", expected " << expected[i]);
}

}  // namespace loom::test
