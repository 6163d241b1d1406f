// loom::nn::functional against PyTorch's values and Float64 gradients (tests/data/nn_table.json,
// made once by tests/data/make_nn_table.py), finite differences, ties, the schedule of a conv (no
// im2col buffer), and the errors.
#include "gradcheck.hpp"
#include "torch_table.hpp"

#include <loom/debug.hpp>

using namespace loom;
namespace F = loom::nn::functional;
using test::json;

namespace {
F::Size2d size2(const json& v) {
  const auto p = v.get<std::vector<int64_t>>();
  return p.empty() ? F::Size2d{} : F::Size2d{p[0], p[1]};
}
Tensor bias_of(const json& a, const std::vector<Tensor>& in) {
  return a["bias"].get<bool>() ? in[2] : Tensor{};
}
}  // namespace

TEST_CASE("pad matches PyTorch: constant (negative cuts), reflect and replicate") {
  CHECK(test::check_torch_table("pad", [](const json& a, const std::vector<Tensor>& in) {
          return std::vector<Tensor>{F::pad(in[0], a["pad"].get<std::vector<int64_t>>(),
                                            a["mode"].get<std::string>(), a["value"].get<double>())};
        }) == 9);
}

TEST_CASE(
    "conv2d and conv1d match PyTorch over stride, padding, dilation, groups, odd sizes and empty batches") {
  CHECK(test::check_torch_table("conv2d", [](const json& a, const std::vector<Tensor>& in) {
          return std::vector<Tensor>{F::conv2d(in[0], in[1], bias_of(a, in), size2(a["stride"]),
                                               size2(a["padding"]), size2(a["dilation"]),
                                               a["groups"].get<int64_t>())};
        }) == 13);
  CHECK(test::check_torch_table("conv1d", [](const json& a, const std::vector<Tensor>& in) {
          return std::vector<Tensor>{F::conv1d(in[0], in[1], in[2], a["stride"], a["padding"], a["dilation"],
                                               a["groups"].get<int64_t>())};
        }) == 4);
}

TEST_CASE("conv_transpose2d matches PyTorch, output_padding and groups included") {
  CHECK(test::check_torch_table("conv_transpose2d", [](const json& a, const std::vector<Tensor>& in) {
          return std::vector<Tensor>{F::conv_transpose2d(in[0], in[1], in[2], size2(a["stride"]),
                                                         size2(a["padding"]), size2(a["output_padding"]),
                                                         a["groups"].get<int64_t>(), size2(a["dilation"]))};
        }) == 6);
}

TEST_CASE("max_pool2d matches PyTorch, its gradient going to each window's first maximum at ties") {
  CHECK(test::check_torch_table("max_pool2d", [](const json& a, const std::vector<Tensor>& in) {
          return std::vector<Tensor>{
              F::max_pool2d(in[0], size2(a["kernel"]), size2(a["stride"]), size2(a["padding"]))};
        }) == 10);
  // By hand: a 2x2 window of four equal values sends its whole gradient to the top-left one.
  Tensor x = Tensor::from_vector<double>({7, 7, 7, 7}, {1, 1, 2, 2});
  x.requires_grad_();
  CHECK(gradient(F::max_pool2d(x, 2).sum(), {x})[0].to_vector<double>() == std::vector<double>{1, 0, 0, 0});
}

TEST_CASE("avg_pool2d and adaptive_avg_pool2d match PyTorch") {
  CHECK(test::check_torch_table("avg_pool2d", [](const json& a, const std::vector<Tensor>& in) {
          return std::vector<Tensor>{F::avg_pool2d(in[0], size2(a["kernel"]), size2(a["stride"]),
                                                   size2(a["padding"]), false,
                                                   a["count_include_pad"].get<bool>())};
        }) == 12);
  CHECK(test::check_torch_table("adaptive_avg_pool2d", [](const json& a, const std::vector<Tensor>& in) {
          return std::vector<Tensor>{F::adaptive_avg_pool2d(in[0], size2(a["output_size"]))};
        }) == 5);
}

TEST_CASE("batch_norm matches PyTorch's output and running statistics, in training and evaluation") {
  CHECK(test::check_torch_table("batch_norm", [](const json& a, const std::vector<Tensor>& in) {
          Tensor mean = in[1].detach().clone(), var = in[2].detach().clone();
          const bool affine = a["affine"].get<bool>();
          const Tensor y =
              F::batch_norm(in[0], mean, var, affine ? in[3] : Tensor{}, affine ? in[4] : Tensor{},
                            a["training"].get<bool>(), a["momentum"], a["eps"]);
          return std::vector<Tensor>{y, mean, var};
        }) == 5);
}

TEST_CASE("interpolate matches PyTorch: nearest and bilinear, by scale factor and by size") {
  CHECK(test::check_torch_table("interpolate", [](const json& a, const std::vector<Tensor>& in) {
          const double scale = a["scale_factor"];
          return std::vector<Tensor>{F::interpolate(in[0], size2(a["size"]),
                                                    scale > 0 ? std::optional<double>(scale) : std::nullopt,
                                                    a["mode"].get<std::string>())};
        }) == 6);
}

TEST_CASE(
    "dropout keeps each element with probability 1 - p, scaled by 1 / (1 - p), and is x outside training") {
  manual_seed(7);
  const Tensor x = Tensor::ones({100000});
  const std::vector<float> y = F::dropout(x, 0.25, true).to_vector<float>();
  int64_t kept = 0;
  for (float v : y) {
    CHECK((v == 0.0f || std::abs(v - 1 / 0.75f) < 1e-6f));
    kept += v != 0;
  }
  // 75,000 expected; the binomial's standard deviation is 137, so 5 sigma is 685.
  CHECK(std::abs(kept - 75000) < 685);
  CHECK(F::dropout(x, 0.25, false).node() == x.node());
  CHECK(F::dropout(x, 0.0, true).node() == x.node());
  // The same seed, the same mask.
  manual_seed(7);
  CHECK(F::dropout(x, 0.25, true).to_vector<float>() == y);
}

TEST_CASE("the functional ops' gradients match Float64 finite differences") {
  using test::Input;
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        return F::conv2d(t[0], t[1], t[2], {2, 1}, {1, 2}, {1, 2}, 2);
      },
      {Input{{2, 4, 5, 6}}, Input{{2, 2, 3, 2}}, Input{{2}}});
  test::gradcheck([](const std::vector<Tensor>& t) { return F::conv_transpose2d(t[0], t[1], {}, 2, 1, 1); },
                  {Input{{1, 2, 3, 3}}, Input{{2, 3, 3, 3}}});
  test::gradcheck([](const std::vector<Tensor>& t) { return F::conv1d(t[0], t[1], {}, 2, 1, 1, 1); },
                  {Input{{2, 2, 7}}, Input{{3, 2, 3}}});
  // The convolutions' own gradients (src/custom_gradient.hpp): dx as a transposed conv needs an
  // output_padding when the last rows fall past the last window (odd sizes with stride 2), and
  // cuts its padding when padding > dilation * (k - 1); a transposed conv's dx as a conv2d is cut
  // to x's size when output_padding >= stride (with dilation > stride).
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        return F::conv2d(t[0], t[1], t[2], {2, 2}, {2, 1}, {2, 3}, 2);
      },
      {Input{{2, 4, 8, 9}}, Input{{6, 2, 3, 2}}, Input{{6}}});
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        return F::conv2d(t[0], t[1], {}, {3, 2}, {2, 3});
      },
      {Input{{1, 2, 7, 5}}, Input{{3, 2, 2, 3}}});
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        return F::conv_transpose2d(t[0], t[1], t[2], {2, 3}, {1, 0}, {1, 2}, 2, {2, 1});
      },
      {Input{{2, 4, 3, 5}}, Input{{4, 3, 3, 2}}, Input{{6}}});
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        return F::conv_transpose2d(t[0], t[1], {}, 1, 1, {2, 0}, 1, {3, 1});
      },
      {Input{{1, 2, 4, 3}}, Input{{2, 2, 2, 2}}});
  test::gradcheck([](const std::vector<Tensor>& t) { return F::conv1d(t[0], t[1], t[2], 2, 3, 2, 3); },
                  {Input{{2, 3, 9}}, Input{{6, 1, 3}}, Input{{6}}});
  // Second order: the gradients of a conv's gradients (a gradient penalty's), through the
  // backward's own declared gradients.
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        const Tensor y = F::conv2d(t[0], t[1], {}, 2, 1, 1, 2);
        return gradient((y * t[2]).sum(), {t[0]})[0];
      },
      {Input{{1, 4, 5, 5}}, Input{{4, 2, 3, 3}}, Input{{1, 4, 3, 3}}});
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        const Tensor y = F::conv2d(t[0], t[1], {}, 2, 1, 1, 2);
        return gradient((y * t[2]).sum(), {t[1]})[0];
      },
      {Input{{1, 4, 5, 5}}, Input{{4, 2, 3, 3}}, Input{{1, 4, 3, 3}}});
  // Random values have no ties, so max_pool's kink is never crossed by the finite difference.
  test::gradcheck1([](const Tensor& x) { return F::max_pool2d(x, 3, 2, 1); }, Input{{1, 2, 5, 5}});
  test::gradcheck1([](const Tensor& x) { return F::avg_pool2d(x, 3, 2, 1, false, false); },
                   Input{{1, 2, 5, 5}});
  test::gradcheck1([](const Tensor& x) { return F::adaptive_avg_pool2d(x, {2, 3}); }, Input{{1, 1, 5, 7}});
  test::gradcheck1([](const Tensor& x) { return F::interpolate(x, {}, 2.0, "bilinear"); },
                   Input{{1, 1, 3, 2}});
  test::gradcheck1([](const Tensor& x) { return F::pad(x, {2, 1, 1, 2}, "reflect"); }, Input{{1, 3, 4}});
  test::gradcheck(
      [](const std::vector<Tensor>& t) { return F::batch_norm(t[0], Tensor{}, Tensor{}, t[1], t[2], true); },
      {Input{{3, 2, 2, 2}}, Input{{2}}, Input{{2}}});
}

TEST_CASE(
    "conv2d forward is one kernel reading x and w in place: no buffer of im2col's shape; pools read x in "
    "place") {
  Tensor x = Tensor::rand({2, 8, 16, 16}), w = Tensor::rand({16, 8, 3, 3});
  realize({x, w});
  for (const auto& [stride, padding, dilation] :
       std::vector<std::tuple<F::Size2d, F::Size2d, F::Size2d>>{{1, 1, 1}, {2, 1, 1}, {1, 2, 2}}) {
    const Tensor y = F::conv2d(x, w, {}, stride, padding, dilation);
    const auto kernels = schedule_of({y});
    std::string listing;
    for (const auto& k : kernels) {
      listing += k.name + ":";
      for (const auto& b : k.buffers) listing += " " + std::to_string(b.numel);
      listing += "; ";
    }
    CAPTURE(listing);
    if (stride.h > 1) {
      // By columns (src/nn_conv_phase.hpp, the width 16 even): x's column phases [2, 8*2, 16, 8],
      // a copy, then padded [2, 8*2, 18, 9], exactly x padded (2*8*18*18, where im2col's is
      // 2*8*8*8*9), the column kernel [16, 8*2, 3, 2], and their correlation at row stride 2
      // reading both in place.
      REQUIRE(kernels.size() == 4);
      for (const auto& k : kernels)
        for (const auto& b : k.buffers) CHECK(b.numel <= 2 * 8 * 18 * 18);
      const auto reduce = std::find_if(kernels.begin(), kernels.end(),
                                       [](const auto& k) { return k.name.starts_with("r_"); });
      REQUIRE(reduce != kernels.end());
      CHECK(reduce->buffers.size() == 3);
      CHECK(reduce->buffers[0].numel == y.numel());
      continue;
    }
    REQUIRE(kernels.size() == 1);
    // Output, x and w, each at its own size: nothing of N*C*oh*ow*kh*kw elements.
    const auto& b = kernels[0].buffers;
    REQUIRE(b.size() == 3);
    CHECK(b[0].numel == y.numel());
    CHECK(((b[1].numel == x.numel() && b[2].numel == w.numel()) ||
           (b[2].numel == x.numel() && b[1].numel == w.numel())));
  }
  {
    // An odd width goes by phase on both axes: x's phase images [2, 8*4, 9, 9], exactly x padded
    // (2*8*17*17 cut or grown to 18 x 18 = 5184), the phase kernel [16, 8*4, 2, 2], and their
    // stride-1 correlation.
    Tensor odd = Tensor::rand({2, 8, 15, 15});
    realize({odd});
    const auto kernels = schedule_of({F::conv2d(odd, w, {}, 2, 1)});
    REQUIRE(kernels.size() == 3);
    for (const auto& k : kernels)
      for (const auto& b : k.buffers) CHECK(b.numel <= 2 * 8 * 18 * 18);
  }
  const auto pool = schedule_of({F::max_pool2d(x, 2)});
  std::string listing;
  for (const auto& k : pool) {
    listing += k.name + ":";
    for (const auto& b : k.buffers) listing += " " + std::to_string(b.numel);
    listing += "; ";
  }
  CAPTURE(listing);
  // The windows' max, then the first element equal to it: two passes over x, read in place.
  CHECK(pool.size() == 2);
  for (const auto& k : pool)
    for (const auto& b : k.buffers) CHECK(b.numel <= x.numel());
}

TEST_CASE("bad input to nn.functional is an error naming the op and the shapes") {
  const Tensor x = Tensor::zeros({1, 4, 5, 5});
  CHECK_THROWS_WITH_AS(F::conv2d(x, Tensor::zeros({2, 3, 3, 3})),
                       doctest::Contains("conv2d: input [1, 4, 5, 5] has 4 channels but weight [2, 3, 3, 3]"),
                       Error);
  CHECK_THROWS_WITH_AS(
      F::conv2d(x, Tensor::zeros({2, 4, 7, 7}), {}, 1, 0),
      doctest::Contains("conv2d: the kernel [2, 4, 7, 7] (dilated to 7) is larger than the padded input"),
      Error);
  CHECK_THROWS_WITH_AS(F::conv2d(x, Tensor::zeros({3, 4, 3, 3}), {}, 1, 0, 3),
                       doctest::Contains("larger than the padded input"), Error);
  CHECK_THROWS_WITH_AS(
      F::conv2d(x, Tensor::zeros({3, 1, 3, 3}), {}, 1, 0, 1, 3),
      doctest::Contains("conv2d: groups = 3 does not divide the input's 4 channels (input [1, 4, 5, 5])"),
      Error);
  CHECK_THROWS_WITH_AS(F::conv2d(x, Tensor::zeros({3, 2, 3, 3}), {}, 1, 0, 1, 2),
                       doctest::Contains("groups = 2 does not divide the weight's 3 output channels"), Error);
  CHECK_THROWS_WITH_AS(F::conv2d(x, Tensor::zeros({2, 4, 3, 3}), Tensor::zeros({3})),
                       doctest::Contains("conv2d: bias [3] does not match"), Error);
  CHECK_THROWS_WITH_AS(F::conv2d(Tensor::zeros({4, 5, 5}), Tensor::zeros({2, 4, 3, 3})),
                       doctest::Contains("conv2d: expected a 4-D input"), Error);
  CHECK_THROWS_WITH_AS(F::conv2d(x, Tensor::zeros({2, 4, 3, 3}, DType::Float64)),
                       doctest::Contains("share one float dtype"), Error);
  CHECK_THROWS_WITH_AS(F::conv1d(Tensor::zeros({1, 2, 4}), Tensor::zeros({1, 3, 3})),
                       doctest::Contains("conv2d: input [1, 2, 1, 4] has 2 channels"), Error);
  CHECK_THROWS_WITH_AS(
      F::conv_transpose2d(x, Tensor::zeros({3, 2, 3, 3})),
      doctest::Contains("conv_transpose2d: input [1, 4, 5, 5] has 4 channels but weight [3, 2, 3, 3]"),
      Error);
  CHECK_THROWS_WITH_AS(F::conv_transpose2d(x, Tensor::zeros({4, 2, 3, 3}), {}, 2, 0, 2),
                       doctest::Contains("output_padding 2 on axis 2 must be smaller"), Error);
  CHECK_THROWS_WITH_AS(
      F::max_pool2d(x, 0),
      doctest::Contains("max_pool2d: the pooling window (0, 0) must be positive (input [1, 4, 5, 5])"),
      Error);
  CHECK_THROWS_WITH_AS(F::avg_pool2d(x, {2, 0}), doctest::Contains("avg_pool2d: the pooling window (2, 0)"),
                       Error);
  CHECK_THROWS_WITH_AS(
      F::max_pool2d(x, 6),
      doctest::Contains(
          "max_pool2d: the window (6, 6) with dilation (1, 1) is larger than the padded input 5x5"),
      Error);
  CHECK_THROWS_WITH_AS(F::max_pool2d(x, 2, {}, 0, 1, true), doctest::Contains("ceil_mode"), Error);
  CHECK_THROWS_WITH_AS(F::max_pool2d(x, 2, {}, 2),
                       doctest::Contains("padding (2, 2) must be between 0 and half"), Error);
  for (double p : {-0.1, 1.0, 1.5, std::nan("")})
    CHECK_THROWS_WITH_AS(F::dropout(x, p), doctest::Contains("dropout: probability p = "), Error);
  CHECK_THROWS_WITH_AS(
      F::batch_norm(x, Tensor::zeros({3}), Tensor::ones({3})),
      doctest::Contains("batch_norm: running_mean has shape [3] and dtype Float32; expected [4]"), Error);
  CHECK_THROWS_WITH_AS(F::batch_norm(Tensor::zeros({1, 4}), {}, {}, {}, {}, true),
                       doctest::Contains("more than 1 value per channel"), Error);
  CHECK_THROWS_WITH_AS(F::pad(x, {1, 1}, "reflect", 1),
                       doctest::Contains("pad: a fill value (1) is only for mode \"constant\""), Error);
  CHECK_THROWS_WITH_AS(F::pad(x, {5, 0}, "reflect"),
                       doctest::Contains("pad: reflect amounts (5, 0) must be smaller"), Error);
  CHECK_THROWS_WITH_AS(F::pad(x, {1, 1}, "circular"), doctest::Contains("pad: mode \"circular\""), Error);
  CHECK_THROWS_WITH_AS(F::interpolate(x, {}, std::nullopt),
                       doctest::Contains("exactly one of size and scale_factor"), Error);
  CHECK_THROWS_WITH_AS(F::interpolate(x, {}, 2.0, "bicubic"),
                       doctest::Contains("interpolate: mode \"bicubic\""), Error);
}

TEST_CASE(
    "conv2d's backward is two kernels (dx, dw) reading their operands in place (by phase when strided): no "
    "im2col buffer") {
  // The second pair is large enough for panel_packing to consider the windows a matmul's b
  // (k x n = 288 x 40 floats, past two thirds of L1, 32 output channels as rows): their copy
  // would be im2col's shape, so it must not be made.
  for (const auto& [xs, ws, stride] :
       std::vector<std::tuple<Shape, Shape, int>>{{{2, 8, 16, 16}, {16, 8, 3, 3}, 1},
                                                  {{2, 8, 16, 16}, {16, 8, 3, 3}, 2},
                                                  {{1, 32, 12, 40}, {32, 32, 3, 3}, 1}}) {
    const int s = stride;
    Tensor x = Tensor::rand(xs), w = Tensor::rand(ws);
    realize({x, w});
    x.requires_grad_();
    w.requires_grad_();
    CAPTURE(s);
    CAPTURE(x.numel());
    const Tensor y = F::conv2d(x, w, {}, s, 1);
    // By columns (s = 2, src/nn_conv_phase.hpp), x's column phases padded are x padded by 1 and
    // split, [2, 8*2, 18, 9]: 5184 elements, the most any buffer holds (im2col's would be
    // 2*8*8*8*9).
    const int64_t most =
        s == 1 ? std::max(x.numel(), y.numel()) : int64_t{xs[0] * xs[1] * (xs[2] + 2) * (xs[3] + 2)};
    const auto forward = schedule_of({y});
    // By columns: x's column phases, padded, the column kernel, their correlation at row stride 2.
    CHECK(forward.size() == (s == 1 ? 1 : 4));
    for (const auto& k : forward)
      for (const auto& b : k.buffers) CHECK(b.numel <= most);
    const std::vector<Tensor> g = gradient((y * y).sum(), {x, w});
    const auto kernels = schedule_of({g[0], g[1]});
    std::string listing;
    for (const auto& k : kernels) {
      listing += k.name + ":";
      for (const auto& b : k.buffers) listing += " " + std::to_string(b.numel);
      listing += "; ";
    }
    CAPTURE(listing);
    // y (which the gradient of y*y reads), dx as a transposed correlation, dw as a correlation.
    // Strided, the forward's four; dy padded, the flipped phase kernel, dx's phases and the
    // copy interleaving them; dw by columns (reading the forward's padded column phases) and
    // its taps.
    CHECK(kernels.size() == (s == 1 ? 3 : 10));
    for (const auto& k : kernels)
      for (const auto& b : k.buffers) CHECK(b.numel <= most);
  }
}

TEST_CASE("a conv's declared gradient keeps no dropped step's tensors alive") {
  // The declaration outlives its graph until the table is pruned; it must not hold the step's
  // input and activations (a training loop's live buffers grew by a batch each step until then).
  Tensor w = Tensor::rand({4, 3, 3, 3});
  realize({w});
  w.requires_grad_();
  auto step = [&] {
    const Tensor x = Tensor::rand({2, 3, 8, 8});
    const Tensor y = F::conv2d(x, w, {}, 1, 1);
    Tensor g = gradient((y * y).sum(), {w})[0];
    realize({g});
  };
  step();
  const uint64_t before = counters().live_buffers;
  for (int i = 0; i < 100; ++i) step();
  CHECK(counters().live_buffers <= before + 2);
}
