// A strided convolution by phase (src/nn_conv_phase.hpp): conv2d's forward, dx and dw, and a
// strided conv_transpose2d's forward and gradients, against the definition written as plain
// loops in double (every input element times every tap it meets, no phase split), over strides
// 2 and 3, asymmetric strides, dilation, groups, padding 0 to 3, sizes whose last rows no
// window reaches, kernels shorter than the stride, and conv1d; and a few against Float64
// finite differences.
#include "src/gradcheck.hpp"

#include <loom/loom.hpp>
#include <loom/nn.hpp>

#include <doctest/doctest.h>

#include <random>
#include <vector>

namespace loom {
namespace {

namespace F = nn::functional;

struct Case {
  int64_t n, cin, h, w, cout, kh, kw;
  F::Size2d stride, padding, dilation;
  int64_t groups;
};

std::vector<double> random_values(int64_t count, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(static_cast<size_t>(count));
  for (double& e : v) e = u(rng);
  return v;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(what);
    CAPTURE(i);
    CHECK(std::abs(got[i] - want[i]) <= 1e-10 * std::max(1.0, std::abs(want[i])));
  }
}

// The conv's every (output, tap, input) triple by the definition: output o of the conv2d reads
// padded row o*s + k*d, i.e. x row o*s + k*d - p when it lies in x. `visit(xi, wi, yi)` gets
// the flat indices of x [N, C_in, H, W], w [C_out, C_in / g, kh, kw] and y [N, C_out, oh, ow].
template <class Visit>
void for_each_product(const Case& c, int64_t oh, int64_t ow, Visit visit) {
  const int64_t cg = c.cin / c.groups, og = c.cout / c.groups;
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t co = 0; co < c.cout; ++co)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j)
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ki = 0; ki < c.kh; ++ki)
              for (int64_t kj = 0; kj < c.kw; ++kj) {
                const int64_t r = i * c.stride.h + ki * c.dilation.h - c.padding.h,
                              q = j * c.stride.w + kj * c.dilation.w - c.padding.w;
                if (r < 0 || r >= c.h || q < 0 || q >= c.w) continue;
                const int64_t cx = co / og * cg + ci;
                visit(((n * c.cin + cx) * c.h + r) * c.w + q, ((co * cg + ci) * c.kh + ki) * c.kw + kj,
                      ((n * c.cout + co) * oh + i) * ow + j);
              }
}

int64_t out_size(int64_t size, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (size + 2 * p - d * (k - 1) - 1) / s + 1;
}

const std::vector<Case> kCases = {
    // n, cin, h, w, cout, kh, kw, stride, padding, dilation, groups
    {1, 2, 7, 7, 3, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1},
    {2, 2, 8, 9, 2, 3, 3, {3, 3}, {0, 0}, {1, 1}, 1},    // rows 6, 7 (and 6 to 8) past the last window
    {1, 2, 9, 8, 4, 3, 2, {2, 3}, {2, 1}, {1, 1}, 1},    // asymmetric stride
    {1, 2, 9, 9, 2, 3, 3, {2, 2}, {2, 2}, {2, 2}, 1},    // dilation 2: odd phases have no tap
    {1, 1, 10, 11, 2, 2, 3, {3, 2}, {1, 3}, {2, 3}, 1},  // dilation prime to the stride
    {2, 4, 7, 6, 6, 3, 3, {2, 2}, {1, 0}, {1, 1}, 2},    // groups 2
    {1, 3, 12, 13, 4, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1},  // the ResNet stem's kernel
    {2, 3, 7, 6, 4, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1},    // kernel 1, stride 2
    {1, 2, 8, 7, 3, 2, 2, {3, 3}, {1, 1}, {1, 1}, 1},    // kernel shorter than the stride
    {1, 1, 5, 6, 2, 1, 2, {2, 3}, {2, 3}, {1, 1}, 1},    // padding past the kernel
    {1, 2, 1, 9, 2, 1, 3, {1, 2}, {0, 1}, {1, 1}, 2},    // conv1d's shape: stride along w only
    {1, 2, 6, 5, 2, 4, 4, {2, 2}, {3, 3}, {1, 1}, 1},    // even kernel, padding 3
    {0, 2, 7, 7, 3, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1},    // an empty batch
    // A width the column stride divides, undilated columns, a kernel at least the stride wide:
    // the forward and dw split only the columns by phase (conv2d_by_columns).
    {2, 3, 12, 14, 4, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1},  // the stem's: 7 x 8 taps, one zero a row
    {1, 2, 9, 12, 3, 3, 4, {2, 3}, {1, 2}, {2, 1}, 1},   // rows dilated 2, column stride 3
    {1, 1, 5, 6, 2, 1, 2, {2, 2}, {2, 3}, {1, 1}, 1},    // padding past the kernel: 2 of 4 column taps zero
    {1, 4, 6, 8, 4, 2, 2, {1, 2}, {0, 0}, {1, 1}, 2},    // rows unstrided, groups 2, no padding
    {1, 2, 8, 9, 2, 3, 3, {3, 3}, {0, 1}, {1, 1}, 1},    // stride 3 both ways, rows 6, 7 unread
    {0, 2, 8, 8, 3, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1},    // an empty batch by columns
};

TEST_CASE("a strided conv2d's output, dx and dw match the definition's loops") {
  std::mt19937_64 rng(26);
  for (const Case& c : kCases) {
    CAPTURE(c.h);
    CAPTURE(c.w);
    CAPTURE(c.kh);
    CAPTURE(c.stride.h);
    CAPTURE(c.stride.w);
    CAPTURE(c.padding.h);
    CAPTURE(c.dilation.h);
    CAPTURE(c.groups);
    const int64_t oh = out_size(c.h, c.kh, c.stride.h, c.padding.h, c.dilation.h),
                  ow = out_size(c.w, c.kw, c.stride.w, c.padding.w, c.dilation.w);
    const std::vector<double> xv = random_values(c.n * c.cin * c.h * c.w, rng),
                              wv = random_values(c.cout * (c.cin / c.groups) * c.kh * c.kw, rng),
                              rv = random_values(c.n * c.cout * oh * ow, rng);
    std::vector<double> y(rv.size()), dx(xv.size()), dw(wv.size());
    for_each_product(c, oh, ow, [&](int64_t xi, int64_t wi, int64_t yi) {
      y[yi] += xv[xi] * wv[wi];
      dx[xi] += rv[yi] * wv[wi];
      dw[wi] += rv[yi] * xv[xi];
    });
    Tensor x = Tensor::from_vector<double>(xv, {c.n, c.cin, c.h, c.w}),
           w = Tensor::from_vector<double>(wv, {c.cout, c.cin / c.groups, c.kh, c.kw});
    x.requires_grad_();
    w.requires_grad_();
    const Tensor out = F::conv2d(x, w, {}, c.stride, c.padding, c.dilation, c.groups);
    REQUIRE(out.shape() == Shape{c.n, c.cout, oh, ow});
    const Tensor r = Tensor::from_vector<double>(rv, out.shape());
    const std::vector<Tensor> g = gradient((out * r).sum(), {x, w});
    check_close(out.to_vector<double>(), y, "y");
    check_close(g[0].to_vector<double>(), dx, "dx");
    check_close(g[1].to_vector<double>(), dw, "dw");
  }
}

TEST_CASE("conv1d with a stride goes through conv2d's phases: dx and dw match the definition") {
  // conv1d(x [1, 2, 11], w [4, 2, 3], stride 3, padding 2): the conv2d case of height 1.
  const Case c{1, 2, 1, 11, 4, 1, 3, {1, 3}, {0, 2}, {1, 1}, 1};
  std::mt19937_64 rng(3);
  const int64_t ow = out_size(c.w, c.kw, 3, 2, 1);
  const std::vector<double> xv = random_values(2 * 11, rng), wv = random_values(4 * 2 * 3, rng),
                            rv = random_values(4 * ow, rng);
  std::vector<double> dx(xv.size()), dw(wv.size());
  for_each_product(c, 1, ow, [&](int64_t xi, int64_t wi, int64_t yi) {
    dx[xi] += rv[yi] * wv[wi];
    dw[wi] += rv[yi] * xv[xi];
  });
  Tensor x = Tensor::from_vector<double>(xv, {1, 2, 11}), w = Tensor::from_vector<double>(wv, {4, 2, 3});
  x.requires_grad_();
  w.requires_grad_();
  const Tensor out = F::conv1d(x, w, {}, 3, 2);
  REQUIRE(out.shape() == Shape{1, 4, ow});
  const std::vector<Tensor> g = gradient((out * Tensor::from_vector<double>(rv, out.shape())).sum(), {x, w});
  check_close(g[0].to_vector<double>(), dx, "dx");
  check_close(g[1].to_vector<double>(), dw, "dw");
}

TEST_CASE("a strided conv_transpose2d (a conv2d's dx by phase) and its gradients match the definition") {
  // conv_transpose2d(x, w) is the adjoint of conv2d(., w) on an output of its size: each of x's
  // elements spreads the weight over the output, so the same triples read the other way round.
  struct TCase {
    Case c;  // the conv2d whose input gradient it is: c.h, c.w are the transposed conv's output
    int64_t xh, xw;
    F::Size2d output_padding;
  };
  const std::vector<TCase> cases = {
      {{1, 3, 0, 0, 2, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1}, 4, 5, {1, 0}},
      {{2, 4, 0, 0, 2, 3, 2, {3, 2}, {0, 1}, {1, 2}, 2}, 3, 4, {2, 1}},
      {{1, 2, 0, 0, 2, 1, 2, {3, 3}, {0, 0}, {1, 1}, 1}, 3, 3, {2, 0}},  // kernel shorter than the stride
      {{1, 2, 0, 0, 3, 4, 3, {2, 3}, {3, 2}, {2, 1}, 1}, 5, 4, {1, 1}},  // output_padding < dilation
      {{1, 2, 0, 0, 2, 2, 2, {2, 2}, {1, 0}, {3, 1}, 1}, 3, 3, {2, 1}},  // output_padding = stride < dilation
  };
  std::mt19937_64 rng(7);
  for (TCase t : cases) {
    Case& c = t.c;
    c.h = (t.xh - 1) * c.stride.h - 2 * c.padding.h + c.dilation.h * (c.kh - 1) + t.output_padding.h + 1;
    c.w = (t.xw - 1) * c.stride.w - 2 * c.padding.w + c.dilation.w * (c.kw - 1) + t.output_padding.w + 1;
    CAPTURE(c.h);
    CAPTURE(c.w);
    CAPTURE(c.stride.h);
    // The conv2d's output positions are the transposed conv's input: oh x ow of the windows over
    // the transposed output (output_padding rows past the last one are not windows' rows).
    const int64_t oh = t.xh, ow = t.xw;
    // More windows than x's rows when output_padding >= stride (a dilation above the stride):
    // the rows past x's spread nothing.
    REQUIRE(out_size(c.h, c.kh, c.stride.h, c.padding.h, c.dilation.h) >= oh);
    REQUIRE(out_size(c.w, c.kw, c.stride.w, c.padding.w, c.dilation.w) >= ow);
    // The transposed conv's input is [N, C_out of the conv2d, ...], its weight the conv2d's.
    const std::vector<double> xv = random_values(c.n * c.cout * oh * ow, rng),
                              wv = random_values(c.cout * (c.cin / c.groups) * c.kh * c.kw, rng),
                              rv = random_values(c.n * c.cin * c.h * c.w, rng);
    std::vector<double> y(rv.size()), dx(xv.size()), dw(wv.size());
    for_each_product(c, oh, ow, [&](int64_t yi, int64_t wi, int64_t xi) {
      y[yi] += xv[xi] * wv[wi];
      dx[xi] += rv[yi] * wv[wi];
      dw[wi] += rv[yi] * xv[xi];
    });
    Tensor x = Tensor::from_vector<double>(xv, {c.n, c.cout, oh, ow}),
           w = Tensor::from_vector<double>(wv, {c.cout, c.cin / c.groups, c.kh, c.kw});
    x.requires_grad_();
    w.requires_grad_();
    const Tensor out =
        F::conv_transpose2d(x, w, {}, c.stride, c.padding, t.output_padding, c.groups, c.dilation);
    REQUIRE(out.shape() == Shape{c.n, c.cin, c.h, c.w});
    const std::vector<Tensor> g =
        gradient((out * Tensor::from_vector<double>(rv, out.shape())).sum(), {x, w});
    check_close(out.to_vector<double>(), y, "y");
    check_close(g[0].to_vector<double>(), dx, "dx");
    check_close(g[1].to_vector<double>(), dw, "dw");
  }
}

TEST_CASE("a strided conv's phase gradients match Float64 finite differences, second order included") {
  using test::Input;
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        return F::conv2d(t[0], t[1], t[2], {3, 2}, {3, 1}, {1, 1}, 2);
      },
      {Input{{2, 4, 8, 7}}, Input{{4, 2, 4, 3}}, Input{{4}}});
  test::gradcheck([](const std::vector<Tensor>& t) { return F::conv2d(t[0], t[1], {}, 2, 0, 2); },
                  {Input{{1, 2, 7, 8}}, Input{{3, 2, 2, 3}}});
  test::gradcheck(
      [](const std::vector<Tensor>& t) {
        return F::conv_transpose2d(t[0], t[1], {}, {3, 2}, {1, 2}, {2, 1});
      },
      {Input{{1, 2, 3, 4}}, Input{{2, 3, 3, 4}}});
  // The gradient of dx and of dw (a gradient penalty's), through the phase functions' own
  // declared gradients (a strided conv_transpose2d's dx is the strided conv2d).
  for (int wrt : {0, 1})
    test::gradcheck(
        [wrt](const std::vector<Tensor>& t) {
          const Tensor y = F::conv2d(t[0], t[1], {}, {2, 3}, 2);
          return gradient((y * t[2]).sum(), {t[static_cast<size_t>(wrt)]})[0];
        },
        {Input{{1, 2, 7, 8}}, Input{{2, 2, 4, 3}}, Input{{1, 2, 4, 4}}});
}

}  // namespace
}  // namespace loom
