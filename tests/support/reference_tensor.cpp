#include "support/reference_tensor.hpp"

#include "support/half_reference.hpp"

#include <loom/error.hpp>

#include <fmt/format.h>

#include <cstring>

namespace loom::ref {

namespace {
// Copies n elements of type T from raw memory into `out`, converting each with `convert`.
template <class T, class Out, class Convert>
void read_elements(const void* bytes, int64_t n, std::vector<Out>& out, Convert convert) {
  out.resize(n);
  for (int64_t k = 0; k < n; ++k) {
    T v;
    std::memcpy(&v, static_cast<const uint8_t*>(bytes) + k * sizeof(T), sizeof(T));
    out[k] = convert(v);
  }
}

template <class T, class In>
void write_elements(const std::vector<In>& in, std::vector<uint8_t>& out) {
  out.resize(in.size() * sizeof(T));
  for (size_t k = 0; k < in.size(); ++k) {
    const T v = static_cast<T>(in[k]);
    std::memcpy(out.data() + k * sizeof(T), &v, sizeof(T));
  }
}
}  // namespace

int64_t numel(const RefShape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

RefShape row_major_strides(const RefShape& shape) {
  RefShape strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

void next_index(std::vector<int64_t>& idx, const RefShape& shape) {
  for (size_t d = idx.size(); d-- > 0;) {
    if (++idx[d] < shape[d]) return;
    idx[d] = 0;
  }
}

RefTensor RefTensor::zeros(DType dtype, RefShape shape) {
  RefTensor t{std::move(shape), dtype, {}, {}};
  if (dtype.is_float())
    t.f.assign(numel(t.shape), 0.0);
  else
    t.i.assign(numel(t.shape), 0);
  return t;
}

RefTensor RefTensor::from_bytes(DType dtype, RefShape shape, const void* bytes) {
  RefTensor t{std::move(shape), dtype, {}, {}};
  const int64_t n = numel(t.shape);
  if (n > 0 && bytes == nullptr)
    throw Error(fmt::format("RefTensor::from_bytes: no data for {} elements of {}", n, to_string(dtype)));
  switch (dtype.scalar) {
    case Scalar::Bool:
      read_elements<uint8_t>(bytes, n, t.i, [](uint8_t v) { return int64_t{v != 0}; });
      break;
    case Scalar::UInt8: read_elements<uint8_t>(bytes, n, t.i, [](uint8_t v) { return int64_t{v}; }); break;
    case Scalar::Int32: read_elements<int32_t>(bytes, n, t.i, [](int32_t v) { return int64_t{v}; }); break;
    case Scalar::Int64: read_elements<int64_t>(bytes, n, t.i, [](int64_t v) { return v; }); break;
    case Scalar::Float32: read_elements<float>(bytes, n, t.f, [](float v) { return double{v}; }); break;
    case Scalar::Float64: read_elements<double>(bytes, n, t.f, [](double v) { return v; }); break;
    case Scalar::BFloat16:
    case Scalar::Float16:
      read_elements<uint16_t>(bytes, n, t.f, [dtype](uint16_t v) {
        return double{half_ref::ieee_widen(v, half_ref::format_of(dtype))};
      });
      break;
  }
  return t;
}

int64_t RefTensor::size() const { return numel(shape); }

double RefTensor::at(int64_t k) const { return dtype.is_float() ? f.at(k) : static_cast<double>(i.at(k)); }

std::vector<double> RefTensor::as_doubles() const {
  if (dtype.is_float()) return f;
  return std::vector<double>(i.begin(), i.end());
}

std::vector<int64_t> RefTensor::as_int64s() const {
  if (dtype.is_float())
    throw Error(fmt::format("RefTensor::as_int64s: the tensor is {}; expected a Bool or integer dtype",
                            to_string(dtype)));
  return i;
}

std::vector<uint8_t> RefTensor::to_bytes() const {
  std::vector<uint8_t> out;
  switch (dtype.scalar) {
    case Scalar::Bool:
    case Scalar::UInt8: write_elements<uint8_t>(i, out); break;
    case Scalar::Int32: write_elements<int32_t>(i, out); break;
    case Scalar::Int64: write_elements<int64_t>(i, out); break;
    case Scalar::Float32: write_elements<float>(f, out); break;
    case Scalar::Float64: write_elements<double>(f, out); break;
    case Scalar::BFloat16:
    case Scalar::Float16: {
      std::vector<double> bits;
      for (double v : f) bits.push_back(half_ref::half_bits(dtype, v));
      write_elements<uint16_t>(bits, out);
      break;
    }
  }
  return out;
}

}  // namespace loom::ref
