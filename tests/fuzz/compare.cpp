#include "fuzz/compare.hpp"

#include "src/engine.hpp"
#include "support/reference_tensor.hpp"

#include <loom/tensor.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

namespace loom::fuzz {

// Halves: a few of their ulps (an approximate float32 result may round to the neighbour).
double relative_tolerance(DType dt) {
  switch (dt.scalar) {
    case Scalar::BFloat16: return 0x1p-5;
    case Scalar::Float16: return 0x1p-8;
    case Scalar::Float32: return 0x1p-12;
    default: return 0x1p-36;
  }
}

double magnitude(const ref::RefTensor& t) {
  double m = 0;
  for (double v : t.f)
    if (std::isfinite(v)) m = std::max(m, std::abs(v));
  return m;
}

ref::RefTensor realized(const Tensor& t) {
  const UOpPtr& v = t.node()->uop;
  const UOpPtr& buffer = v->op == Op::RESHAPE ? v->src[0] : v;
  return ref::RefTensor::from_bytes(t.dtype(), t.shape(), detail::buffer_data(buffer));
}

namespace {
bool float_agrees(double got, double want, bool approximate, double tolerance, bool product_overflowed) {
  if (approximate && product_overflowed && (std::isnan(want) || std::isnan(got)))
    return std::isnan(want) ? !std::isfinite(got) : !std::isfinite(want);
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  if (!approximate) return got == want;
  return std::abs(got - want) <= tolerance;
}
}  // namespace

std::string compare_values(const ref::RefTensor& got, const ref::RefTensor& want, const Tolerance& allowed) {
  if (got.shape != want.shape || !(got.dtype == want.dtype))
    return fmt::format("shape {} {} but the reference gives {} {}", got.shape, to_string(got.dtype),
                       want.shape, to_string(want.dtype));
  const int64_t n = want.size();
  if (!want.dtype.is_float()) {
    for (int64_t k = 0; k < n; ++k)
      if (got.i[static_cast<size_t>(k)] != want.i[static_cast<size_t>(k)])
        return fmt::format("element {} of {}: got {}, the reference gives {}", k, n,
                           got.i[static_cast<size_t>(k)], want.i[static_cast<size_t>(k)]);
    return "";
  }
  const bool approximate = allowed.approximate;
  const double rtol = std::max(relative_tolerance(want.dtype), relative_tolerance(allowed.precision));
  for (int64_t k = 0; k < n; ++k) {
    const double g = got.f[static_cast<size_t>(k)], w = want.f[static_cast<size_t>(k)];
    const double tolerance = rtol * (std::abs(w) + allowed.scale);
    if (!float_agrees(g, w, approximate, tolerance, allowed.product_overflowed))
      return fmt::format("element {} of {}: got {}, the reference gives {} ({} class{})", k, n, g, w,
                         approximate ? "approximate" : "exact",
                         approximate ? fmt::format(", tolerance {:.3g}", tolerance) : "");
  }
  return "";
}

}  // namespace loom::fuzz
