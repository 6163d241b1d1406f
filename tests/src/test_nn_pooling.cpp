// MaxPool2d and AvgPool2d: each equals nn::functional's pooling with its arguments.
#include "check.hpp"
#include "support/error_message.hpp"

#include <loom/nn.hpp>

using namespace loom;
using test::check_message;
using test::error_of;
using test::values;
namespace F = nn::functional;

TEST_CASE("MaxPool2d and AvgPool2d are max_pool2d and avg_pool2d with PyTorch's argument order") {
  manual_seed(8);
  const Tensor x = Tensor::randn({2, 3, 7, 6});
  // kernel, stride, padding, dilation
  const nn::MaxPool2d mp({3, 2}, {2, 1}, 1, {1, 2});
  CHECK(values(mp(x)) == values(F::max_pool2d(x, {3, 2}, {2, 1}, 1, {1, 2})));
  // Stride unset is the kernel.
  CHECK(nn::MaxPool2d(2)(x).shape() == Shape{2, 3, 3, 3});
  CHECK(values(nn::MaxPool2d(2)(x)) == values(F::max_pool2d(x, 2, 2)));
  // kernel, stride, padding, ceil_mode, count_include_pad
  const nn::AvgPool2d ap(3, 2, 1, false, /*count_include_pad=*/false);
  CHECK(values(ap(x)) == values(F::avg_pool2d(x, 3, 2, 1, false, false)));
  CHECK(values(nn::AvgPool2d(2)(x)) == values(F::avg_pool2d(x, 2)));
  // Hand-derived: a 2x2 window of 0..15 in a 4x4.
  const Tensor r =
      Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {1, 4, 4});
  CHECK(values(nn::MaxPool2d(2)(r)) == std::vector<double>{5, 7, 13, 15});
  CHECK(values(nn::AvgPool2d(2)(r)) == std::vector<double>{2.5, 4.5, 10.5, 12.5});
  // No parameters or buffers.
  CHECK(mp.state_dict().empty());
  CHECK(ap.state_dict().empty());
  check_message(error_of([] { nn::MaxPool2d(2, {}, 0, 1, /*return_indices=*/true); }),
                {"MaxPool2d", "return_indices"});
  check_message(error_of([] {
                  nn::AvgPool2d(2)(Tensor::zeros({1, 4, 4}, DType::Int32));
                }),
                {"AvgPool2d", "Int32"});
}
