// Before (stride 2, 7x7, pad 3): the forward's windows read x[2i + t], two floats apart; dx is
//   the correlation of dy with a zero between its elements (3 of 4 products with zeros, each
//   address behind a divmod), or the window view's scatter.
// After (M = ceil(7 / 2) = 4 taps a phase, w_r[3] = 0 for r = 1):
//   y    = correlate([N, 3*4, 115, 115] phase images, [64, 12, 4, 4] kernel)       stride 1
//   dx_r = correlate(dy padded by 3, [3*4, 64, 4, 4] flipped kernel), interleaved  stride 1
//   dw   = weight_grad([N, 12, 115, 115] phase images, dy) as [64, 12, 4, 4] -> [64, 3, 7, 7]
// Since (columns only, W even): forward and dw read x's column phases [N, 3*2, 230, 115] at
// row stride 2 with the kernel [64, 6, 7, 4] (7 x 8 taps a channel against 8 x 8), dx as above.
#include "src/nn_conv_phase.hpp"

#include "src/nn_conv_correlate.hpp"
#include "src/tensor_ops.hpp"

namespace loom::nn::functional::detail_conv {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One spatial axis: kernel k, stride s, dilation d; K dilated positions, M taps a phase, and
// the Q = min(s, K) phases that hold a position (a 1x1 kernel of stride 2 reads one phase of 2).
struct Axis {
  int64_t k, s, d;
  int64_t taps() const { return d * (k - 1) + 1; }
  int64_t m() const { return ceil_div(taps(), s); }
  int64_t q() const { return std::min(s, taps()); }
};

// w [C_out, cg, kh, kw] -> [C_out, cg, Mh, Qh, Mw, Qw]: element [.., m, r, ..] is the tap at
// dilated position s*m + r, zero where none sits.
Tensor split_taps(const Tensor& w, const Axis& h, const Axis& v) {
  const int64_t co = w.shape()[0], cg = w.shape()[1];
  Tensor t = w;
  if (h.d > 1 || v.d > 1)  // [.., k] -> [.., k, d] with d - 1 zeros after each tap -> first K of k*d
    t = t.reshape({co, cg, h.k, 1, v.k, 1})
            .pad({{0, 0}, {0, 0}, {0, 0}, {0, h.d - 1}, {0, 0}, {0, v.d - 1}})
            .reshape({co, cg, h.k * h.d, v.k * v.d})
            .shrink({{0, co}, {0, cg}, {0, h.taps()}, {0, v.taps()}});
  return t.pad({{0, 0}, {0, 0}, {0, h.m() * h.s - h.taps()}, {0, v.m() * v.s - v.taps()}})
      .reshape({co, cg, h.m(), h.s, v.m(), v.s})
      .shrink({{0, co}, {0, cg}, {0, h.m()}, {0, h.q()}, {0, v.m()}, {0, v.q()}});
}

// x [N, C, H, W] padded, as phase images [N, C*Qh*Qw, oh + Mh - 1, ow + Mw - 1].
Tensor phase_images(const Tensor& x, Size2d kernel, Size2d stride, Size2d padding, Size2d dilation) {
  const Shape& xs = x.shape();
  const Dim n = xs[0];  // the batch may be symbolic
  const int64_t c = xs[1];
  const Axis h{kernel.h, stride.h, dilation.h}, v{kernel.w, stride.w, dilation.w};
  // Rows oh + M - 1 of each phase: s times as many rows of the padded x, cut or padded with
  // zeros past its end (rows only the zero taps reach).
  auto rows = [](const Axis& a, int64_t size, int64_t p) { return (size + 2 * p - a.taps()) / a.s + a.m(); };
  const int64_t rh = rows(h, xs[2], padding.h), rw = rows(v, xs[3], padding.w);
  const Tensor xp = x.pad({{0, 0},
                           {0, 0},
                           {padding.h, std::max<int64_t>(rh * h.s - xs[2] - padding.h, 0)},
                           {padding.w, std::max<int64_t>(rw * v.s - xs[3] - padding.w, 0)}})
                        .shrink({{0, n}, {0, c}, {0, rh * h.s}, {0, rw * v.s}});
  return xp.reshape({n, c, rh, h.s, rw, v.s})
      .shrink({{0, n}, {0, c}, {0, rh}, {0, h.q()}, {0, rw}, {0, v.q()}})
      .permute({0, 1, 3, 5, 2, 4})
      .contiguous()
      .reshape({n, c * h.q() * v.q(), rh, rw});
}

// w [C_out, cg, kh, kw] as the phase images' kernel [C_out, cg*Qh*Qw, Mh, Mw].
Tensor phase_kernel(const Tensor& w, Size2d stride, Size2d dilation) {
  const Shape& ws = w.shape();
  const Axis h{ws[2], stride.h, dilation.h}, v{ws[3], stride.w, dilation.w};
  return split_taps(w, h, v)
      .permute({0, 1, 3, 5, 2, 4})
      .reshape({ws[0], ws[1] * h.q() * v.q(), h.m(), v.m()})
      .contiguous();
}

// phase_kernel's inverse for a gradient, dropping the zero taps' entries.
Tensor kernel_of_phases(const Tensor& wp, Size2d kernel, Size2d stride, Size2d dilation) {
  const Axis h{kernel.h, stride.h, dilation.h}, v{kernel.w, stride.w, dilation.w};
  const int64_t co = wp.shape()[0], cg = wp.shape()[1] / (h.q() * v.q());
  Tensor t = wp.reshape({co, cg, h.q(), v.q(), h.m(), v.m()})
                 .pad({{0, 0}, {0, 0}, {0, h.s - h.q()}, {0, v.s - v.q()}, {0, 0}, {0, 0}})
                 .permute({0, 1, 4, 2, 5, 3})
                 .reshape({co, cg, h.m() * h.s, v.m() * v.s})
                 .shrink({{0, co}, {0, cg}, {0, h.taps()}, {0, v.taps()}});
  if (h.d > 1 || v.d > 1)  // every d-th position: pad K to k*d, view [k, d], keep d's first
    t = t.pad({{0, 0}, {0, 0}, {0, h.d - 1}, {0, v.d - 1}})
            .reshape({co, cg, h.k, h.d, v.k, v.d})
            .shrink({{0, co}, {0, cg}, {0, h.k}, {0, 1}, {0, v.k}, {0, 1}})
            .reshape({co, cg, h.k, v.k});
  return t;
}

// floor(a / b) for b > 0.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The column axis of conv2d_by_columns: stride s, padding p, kernel k (undilated). Output j's
// tap t reads x column s*j + t - p = s*(j + m) + r with t - p = s*m + r, 0 <= r < s: phase
// r's column j + m, m from lo = floor(-p / s) to floor((k - 1 - p) / s), so M taps a phase,
// the phase images padded by -lo before; tap m' = m - lo of phase r is the kernel's column
// s*m' + r + off (off = s*lo + p, in (-s, 0]), zero outside [0, k).
struct Columns {
  int64_t k, s, p;
  int64_t lo() const { return floor_div(-p, s); }
  int64_t m() const { return floor_div(k - 1 - p, s) - lo() + 1; }
  int64_t off() const { return s * lo() + p; }
};

// x [N, C, H, W] as the correlation's input: its column phases [N, C*s, H, W / s] (channel
// c*s + r holds x[c, h, s*b + r]), padded, rows by the conv's padding and columns so that output
// j's windows start at phase column j + lo (ow + M - 1 columns), stored. Two copies: the phases,
// a transposing copy with no bounds to test (a 32-float load split into two 16-lane vectors),
// then the padding, a contiguous copy. As one copy the padding's mask kept the transpose from
// vector loads (18 ms against 2 + 4 for the stem at batch 64); read in place, the correlation
// tested each tap's bounds (76 ms against 67 stored) and its weight gradient's dot tile its
// window's (141 against 80; docs/performance.md).
Tensor column_input(const Tensor& x, const Columns& c, int64_t pad_h, int64_t ow) {
  const Shape& xs = x.shape();
  const Dim n = xs[0];
  const int64_t ch = xs[1] * c.s, h = xs[2], b = xs[3] / c.s;
  const Tensor images =
      x.reshape({n, xs[1], h, b, c.s}).permute({0, 1, 4, 2, 3}).contiguous().reshape({n, ch, h, b});
  const int64_t cols = ow + c.m() - 1, after = cols + c.lo() - b;
  return images.pad({{0, 0}, {0, 0}, {pad_h, pad_h}, {-c.lo(), std::max<int64_t>(after, 0)}})
      .shrink({{0, n}, {0, ch}, {0, h + 2 * pad_h}, {0, cols}})
      .contiguous();
}

}  // namespace

bool forward_by_columns(int64_t width, int64_t kernel_w, Size2d stride, Size2d dilation) {
  return stride.w > 1 && dilation.w == 1 && width % stride.w == 0 && kernel_w >= stride.w;
}

Tensor conv2d_by_columns(const Tensor& x, const Tensor& w, Size2d stride, Size2d padding, Size2d dilation,
                         int64_t groups) {
  const Shape &xs = x.shape(), &ws = w.shape();
  const Columns c{ws[3], stride.w, padding.w};
  const int64_t ow = (xs[3] + 2 * padding.w - c.k) / c.s + 1, co = ws[0], cg = ws[1], kh = ws[2];
  // w's columns [k] -> [M, s]: column s*m' + r + off, zeros around.
  const Tensor wp = w.pad({{0, 0}, {0, 0}, {0, 0}, {-c.off(), c.s * c.m() + c.off() - c.k}})
                        .reshape({co, cg, kh, c.m(), c.s})
                        .permute({0, 1, 4, 2, 3})
                        .reshape({co, cg * c.s, kh, c.m()})
                        .contiguous();
  return correlate(column_input(x, c, padding.h, ow), wp, {}, {stride.h, 1}, {dilation.h, 1}, groups,
                   "conv2d");
}

Tensor weight_grad_by_columns(const Tensor& x, const Tensor& grad, Size2d kernel, Size2d stride,
                              Size2d padding, Size2d dilation, int64_t groups) {
  const Shape& gs = grad.shape();
  const Columns c{kernel.w, stride.w, padding.w};
  const int64_t co = gs[1], cg = x.shape()[1] / groups;
  const Tensor wp = weight_grad(column_input(x, c, padding.h, gs[3]), grad, kernel.h, c.m(), {stride.h, 1},
                                {0, 0}, {dilation.h, 1}, groups)
                        .contiguous();
  // [C_out, cg*s, kh, M] -> [C_out, cg, kh, M*s] (column s*m' + r + off) -> the k real columns.
  return wp.reshape({co, cg, c.s, kernel.h, c.m()})
      .permute({0, 1, 3, 4, 2})
      .reshape({co, cg, kernel.h, c.m() * c.s})
      .shrink({{0, co}, {0, cg}, {0, kernel.h}, {-c.off(), -c.off() + c.k}});
}

bool forward_by_phase(Size2d stride, Size2d dilation) {
  auto fits = [](int64_t s, int64_t d) { return s == 1 || d == 1; };
  return (stride.h > 1 || stride.w > 1) && fits(stride.h, dilation.h) && fits(stride.w, dilation.w);
}

Tensor conv2d_by_phase(const Tensor& x, const Tensor& w, Size2d stride, Size2d padding, Size2d dilation,
                       int64_t groups) {
  const Size2d kernel{w.shape()[2], w.shape()[3]};
  return correlate(phase_images(x, kernel, stride, padding, dilation), phase_kernel(w, stride, dilation), {},
                   {1, 1}, {1, 1}, groups, "conv2d");
}

Tensor weight_grad_by_phase(const Tensor& x, const Tensor& grad, Size2d kernel, Size2d stride, Size2d padding,
                            Size2d dilation, int64_t groups) {
  const Axis h{kernel.h, stride.h, dilation.h}, v{kernel.w, stride.w, dilation.w};
  const Tensor wp = weight_grad(phase_images(x, kernel, stride, padding, dilation), grad, h.m(), v.m(),
                                {1, 1}, {0, 0}, {1, 1}, groups)
                        .contiguous();
  // Stored before the taps are picked out of it: indexed through [kh, kw]'s phase split, its
  // reduce would read the images through a divmod per element, unvectorised.
  return kernel_of_phases(wp, kernel, stride, dilation);
}

Tensor input_grad_by_phase(const Tensor& grad, const Tensor& w, Size2d size, Size2d stride, Size2d padding,
                           Size2d dilation, int64_t groups) {
  const Shape &gs = grad.shape(), &ws = w.shape();
  const Dim n = gs[0];
  const int64_t cout = gs[1], cg = ws[1], og = cout / groups, cin = cg * groups;
  const Axis h{ws[2], stride.h, dilation.h}, v{ws[3], stride.w, dilation.w};
  const int64_t ra = ceil_div(padding.h + size.h, h.s), rb = ceil_div(padding.w + size.w, v.s);
  // dx_r[a] = sum over m of dy[a - m] w_r[m]: dy with M - 1 zero rows before and enough after
  // for A rows of windows (cut where dy runs past them: those rows reach beyond p + size), stored
  // so the correlation reads it without a bounds check per element.
  std::vector<std::pair<int64_t, int64_t>> grow(4, {0, 0});
  std::vector<std::pair<Dim, Dim>> cut;
  for (const Dim& e : gs) cut.emplace_back(0, e);
  for (const auto& [a, ax, rows] : {std::tuple{2, h, ra}, std::tuple{3, v, rb}}) {
    const int64_t after = rows - gs[a];
    grow[a] = {ax.m() - 1, std::max<int64_t>(after, 0)};
    cut[a] = {0, ax.m() - 1 + gs[a] + after};
  }
  const Tensor gp = grad.pad(grow).shrink(cut).contiguous();
  // The flipped phase kernel with in and out channels swapped per group, of the Q phases that
  // hold a tap, [C_in*Qh*Qw, og, Mh, Mw].
  const int64_t qh = h.q(), qw = v.q();
  const Tensor wt = split_taps(w, h, v)
                        .flip({2, 4})
                        .reshape({groups, og, cg, h.m(), qh, v.m(), qw})
                        .permute({0, 2, 4, 6, 1, 3, 5})
                        .reshape({cin * qh * qw, og, h.m(), v.m()})
                        .contiguous();
  const Tensor phases = correlate(gp, wt, {}, {1, 1}, {1, 1}, groups, "conv2d (input gradient)").contiguous();
  // The phases without taps are zeros, then every phase interleaved into x's rows.
  return phases.reshape({n, cin, qh, qw, ra, rb})
      .pad({{0, 0}, {0, 0}, {0, h.s - qh}, {0, v.s - qw}, {0, 0}, {0, 0}})
      .permute({0, 1, 4, 2, 5, 3})
      .reshape({n, cin, ra * h.s, rb * v.s})
      .shrink({{0, n}, {0, cin}, {padding.h, padding.h + size.h}, {padding.w, padding.w + size.w}});
}

}  // namespace loom::nn::functional::detail_conv
