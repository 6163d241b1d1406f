// cumsum: the running sum as a sum over sliding windows (src/window.hpp). The axis is padded
// with n - 1 zeros in front, and window j (of n elements) ends at element j, so its sum is
// x[0] + ... + x[j]; the windows are a view, so the scan is one reduce kernel reading x in
// place, and its gradient (the reverse running sum) comes from the movement ops' rules.
#include "src/tensor_ops.hpp"
#include "src/window.hpp"

namespace loom {

using namespace detail;

Tensor Tensor::cumsum(int dim) const {
  const UOpPtr& x = uop(*this, "cumsum");
  const Shape& in = *x->shape();
  const int a = norm_axis(dim, in.size(), "cumsum");
  const Tensor t = dtype().is_float() ? *this : cast(DType::Int64);  // PyTorch sums integers in Int64
  if (in.empty()) return t;
  const int64_t n = in[a];
  if (n <= 1 || count(in) == 0) return t;
  const Tensor last = t.transpose(a, -1);
  std::vector<std::pair<int64_t, int64_t>> pad(in.size(), {0, 0});
  pad.back().first = n - 1;
  return sliding_windows(last.pad(pad), {n}, {1}, {1}).sum(-1).transpose(a, -1);
}

}  // namespace loom
