#!/usr/bin/env python3
"""Writes tests/data/half_table.json: the cases of make_ops_table.py and make_nn_table.py (and the
composites they leave out: softmax, log_softmax, logsumexp, sum, mean, layer_norm, cross_entropy,
matmul, ...) rerun in bfloat16 and float16, which tests/src/test_tensor_half_parity.cpp checks
loom against. Run once with PyTorch installed (python3 tests/data/make_half_table.py); the JSON is
committed, so the tests never need torch.

Each case holds its inputs (half values, written as the float each one is exactly; dtype
"bfloat16" or "float16"), and two sets of outputs:
- "float32": PyTorch's float32 result on the inputs widened to float32 (exactly), not rounded:
  rounded once to the case's dtype it is what "compute in float32, round once" gives;
- "torch": PyTorch's own result in the half dtype, written as the elements where it differs from
  the float32 output rounded once ("differs": [index, value] pairs; none where PyTorch rounds once),
  or absent (with "torch_error") where this PyTorch's CPU build has no kernel for that dtype (1.13
  has few for float16).
Non-finite numbers are the strings "nan", "inf" and "-inf". Values only: no gradients."""
import json, math, os
import numpy as np
import torch
import torch.nn.functional as F

torch.manual_seed(28)
HALVES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
NAMES = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32",
         torch.float64: "float64", torch.int64: "int64", torch.bool: "bool"}


def enc(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def short(v):
    """The shortest decimal that reads back (as a double, then a float) as the float32 v: keeps the
    JSON small; every half value and every float32 result is a float32."""
    return enc(float(repr(np.float32(v)))) if math.isfinite(v) else enc(v)


def tj(t):
    t = t.detach()
    if t.is_floating_point():
        values = [short(v) for v in t.float().reshape(-1).tolist()]
    else:
        values = [enc(v) for v in t.reshape(-1).tolist()]
    return {"shape": list(t.shape), "dtype": NAMES[t.dtype], "values": values}


def outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def differs(got, ref):
    """got (a half tensor) as the elements where it differs from ref (float32) rounded to got's dtype."""
    once = ref.detach().to(got.dtype).float().reshape(-1)
    g = got.detach().float().reshape(-1)
    same = (g == once) | (g.isnan() & once.isnan())
    return {"shape": list(got.shape), "dtype": NAMES[got.dtype],
            "differs": [[i, short(g[i].item())] for i in range(g.numel()) if not same[i]]}


cases = []
HALF = None  # the dtype of the case being made


def rounded(value):
    """A Python number as PyTorch's half kernels read it: rounded to the half dtype first."""
    return float(torch.tensor(value, dtype=torch.float64).to(HALF))


def add(op, args, inputs, fn):
    """inputs: float64 tensors (rounded to each half dtype here) or integer/bool tensors (kept)."""
    global HALF
    for name, half in HALVES.items():
        HALF = half
        xs = [t.to(half) if t.is_floating_point() else t for t in inputs]
        wide = [t.float() if t.is_floating_point() else t for t in xs]
        case = {"op": op, "args": args, "dtype": name, "inputs": [tj(t) for t in xs],
                "float32": [tj(o) for o in outputs(fn(*[t.clone() for t in wide]))]}
        try:
            got = outputs(fn(*[t.clone() for t in xs]))
            case["torch"] = [differs(o, r) for o, r in zip(got, outputs(fn(*[t.clone() for t in wide])))]
        except RuntimeError as e:
            case["torch_error"] = str(e).split("\n")[0][:120]
        cases.append(case)


f64 = torch.float64
randn = lambda *s: torch.randn(*s, dtype=f64)

# ---- make_ops_table.py's ops ----
special = [-math.inf, -27.0, -7.0, -6.0, -5.9, -4.0, -3.0, -2.0, -1.0, -0.5, -0.49999, -0.1, -1e-10, -0.0, 0.0,
           1e-30, 1e-10, 0.3, 0.5, 0.50001, 0.7, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 3.9, 4.0, 4.5, 5.0, 5.9, 6.0, 27.0,
           math.inf, math.nan]
grid = [i / 10 - 7 for i in range(141)]
add("erf", {}, [torch.tensor(special + grid, dtype=f64)], torch.erf)
wide = torch.tensor([-30.0, -10.0, -3.0, -1.0, -0.0, 0.0, 1e-8, 0.5, 1.0, 3.0, 10.0, 30.0] + grid[1::2], dtype=f64)
odd = randn(3, 5) * 3
for approximate in ["none", "tanh"]:
    for x in [wide, odd]:
        add("gelu", {"approximate": approximate}, [x], lambda t: F.gelu(t, approximate=approximate))
for x in [wide, odd]:
    add("silu", {}, [x], F.silu)
    add("leaky_relu", {"negative_slope": 0.01}, [x], F.leaky_relu)
    add("softplus", {"beta": 1.0, "threshold": 20.0}, [x], F.softplus)
at = torch.tensor([-800.0, -40.0, -1.0, 0.0, 2.0, 2.5, 3.0, 19.0, 20.0, 21.0, 800.0], dtype=f64)
for beta, threshold in [(2.0, 5.0), (0.5, 1.0), (-1.0, 20.0)]:
    add("softplus", {"beta": beta, "threshold": threshold}, [at],
        lambda t: F.softplus(t, beta=beta, threshold=threshold))
for slope in [0.2, -0.5]:
    add("leaky_relu", {"negative_slope": slope}, [odd], lambda t: F.leaky_relu(t, slope))
# the elementwise primitives and transcendentals the composites stand on
add("exp", {}, [wide / 4], torch.exp)
add("tanh", {}, [wide], torch.tanh)
add("sigmoid", {}, [wide], torch.sigmoid)
add("log", {}, [wide.abs() + 1e-3], torch.log)
add("sqrt", {}, [wide.abs()], torch.sqrt)
add("rsqrt", {}, [wide.abs() + 1e-3], torch.rsqrt)
add("reciprocal", {}, [wide], torch.reciprocal)
# PyTorch 1.13 rounds a Python number to the tensor's half dtype before the op (so does loom,
# docs/semantics.md); the float32 reference takes the rounded number too.
for value in [0.1, 3.7, -1e-3]:
    add("mul_scalar", {"value": value}, [wide], lambda t: t * rounded(value))
    add("add_scalar", {"value": value}, [wide], lambda t: t + rounded(value))
add("mul", {}, [randn(4, 9) * 3, randn(4, 9)], torch.mul)
add("add", {}, [randn(4, 9) * 3, randn(4, 9)], torch.add)
add("div", {}, [randn(4, 9) * 3, randn(4, 9)], torch.div)

base, three = randn(5, 7) * 2 + 1, randn(4, 1, 3)
for x, dims in [(base, []), (base, [0]), (base, [1]), (base, [0, 1]), (three, [0, 2]), (three, [1]),
                (torch.tensor([[5.0, 6.0]], dtype=f64), [1])]:
    for correction in [0, 1]:
        args = {"dims": dims, "correction": correction, "keepdim": False}
        dim = dims if dims else None
        add("var", args, [x], lambda t: torch.var(t, dim=dim, correction=correction))
        add("std", args, [x], lambda t: torch.std(t, dim=dim, correction=correction))

m = (torch.arange(20) % 7).reshape(4, 5).to(f64) - 2.5
for k in [-2, 0, 1]:
    add("triu", {"k": k}, [m], lambda t: torch.triu(t, k))
    add("tril", {"k": k}, [m], lambda t: torch.tril(t, k))
mask = torch.tensor([[True, False, False, True, False], [False, True, True, False, True]] * 2)
for value in [2.7, -1.0, math.inf]:
    add("masked_fill", {"value": enc(value)}, [m, mask], lambda t, mk: t.masked_fill(mk, value))

# ---- reductions and the composites on them ----
big = randn(5, 24) * 3
for dims in [[], [0], [1]]:
    for name, fn in [("sum", torch.sum), ("mean", torch.mean)]:
        add(name, {"dims": dims}, [big], lambda t: fn(t, dim=dims) if dims else fn(t))
add("sum", {"dims": [1]}, [randn(2, 300)], lambda t: t.sum(1))
add("mean", {"dims": [1]}, [randn(2, 300) + 2], lambda t: t.mean(1))
for axis in [-1, 0]:
    for x in [big, torch.tensor([[0.0, -math.inf, 1.0], [-math.inf, -math.inf, -math.inf], [1e4, 0.0, -1e4]],
                                dtype=f64)]:
        add("softmax", {"axis": axis}, [x], lambda t: torch.softmax(t, axis))
        add("log_softmax", {"axis": axis}, [x], lambda t: torch.log_softmax(t, axis))
    add("logsumexp", {"axis": axis}, [big], lambda t: torch.logsumexp(t, axis))
add("logsumexp", {"axis": 1}, [torch.tensor([[0.0, -math.inf], [-math.inf, -math.inf], [math.inf, 1.0]], dtype=f64)],
    lambda t: torch.logsumexp(t, 1))
for shape in [(4, 16), (3, 2, 40)]:
    x = randn(*shape) * 2 + 0.5
    d = shape[-1]
    add("layer_norm", {"affine": False, "eps": 1e-5}, [x], lambda t: F.layer_norm(t, (d,), eps=1e-5))
    add("layer_norm", {"affine": True, "eps": 1e-5}, [x, randn(d), randn(d)],
        lambda t, w, b: F.layer_norm(t, (d,), w, b, eps=1e-5))
for n, c in [(8, 10), (5, 3)]:
    add("cross_entropy", {}, [randn(n, c) * 2, torch.randint(0, c, (n,))], lambda t, y: F.cross_entropy(t, y))
add("mse", {}, [randn(6, 7), randn(6, 7)], F.mse_loss)
for a, b in [((5, 24), (24, 7)), ((2, 2, 64), (64, 3)), ((1, 300), (300, 2))]:
    add("matmul", {}, [randn(*a), randn(*b)], torch.matmul)

# ---- make_nn_table.py's ops ----
x = randn(3, 4, 5)
for dim in [0, 2]:
    add("cumsum", {"dim": dim}, [x], lambda t: torch.cumsum(t, dim))
add("repeat", {"repeats": [2, 1, 3]}, [randn(2, 3)], lambda t: t.repeat(2, 1, 3))
for k, dim, largest in [(3, -1, True), (2, 0, False)]:
    add("topk", {"k": k, "dim": dim, "largest": largest}, [randn(4, 9)], lambda t: torch.topk(t, k, dim, largest)[0])
for mode, pads in [("constant", [1, 0, 2, 3]), ("reflect", [1, 3, 2, 0]), ("replicate", [2, 0, 1, 4])]:
    value = 1.5 if mode == "constant" else 0.0
    add("pad", {"pad": pads, "mode": mode, "value": value}, [randn(1, 2, 4, 5)],
        lambda t: F.pad(t, pads, mode=mode, value=value) if mode == "constant" else F.pad(t, pads, mode=mode))
for n, cin, cout, h, w_, k, stride, padding, dilation, groups, bias in [
    (2, 3, 4, 7, 6, (3, 3), (1, 1), (0, 0), (1, 1), 1, True),
    (1, 2, 3, 5, 5, (3, 3), (1, 1), (1, 1), (1, 1), 1, False),
    (2, 4, 6, 9, 8, (3, 2), (2, 3), (1, 0), (1, 1), 2, True),
    (1, 3, 2, 10, 9, (3, 3), (2, 2), (2, 1), (2, 3), 1, True),
    (2, 4, 4, 6, 7, (3, 3), (1, 1), (1, 1), (1, 1), 4, True),   # depthwise
    (1, 3, 5, 8, 9, (5, 3), (3, 2), (2, 1), (1, 2), 1, True),
    (1, 12, 4, 5, 5, (3, 3), (1, 1), (1, 1), (1, 1), 1, True),  # 108 products a sum
]:
    inputs = [randn(n, cin, h, w_), randn(cout, cin // groups, *k)] + ([randn(cout)] if bias else [])
    args = {"stride": list(stride), "padding": list(padding), "dilation": list(dilation), "groups": groups,
            "bias": bias}
    add("conv2d", args, inputs,
        lambda a, c, d=None: F.conv2d(a, c, d, stride, padding, dilation, groups))
for n, cin, cout, l, k, stride, padding, dilation, groups in [(2, 3, 4, 9, 3, 1, 0, 1, 1), (1, 4, 2, 10, 3, 2, 1, 2, 2)]:
    add("conv1d", {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups, "bias": True},
        [randn(n, cin, l), randn(cout, cin // groups, k), randn(cout)],
        lambda a, c, d: F.conv1d(a, c, d, stride, padding, dilation, groups))
for n, cin, cout, h, w_, k, stride, padding, output_padding, dilation, groups in [
    (2, 3, 4, 4, 5, (3, 3), (1, 1), (0, 0), (0, 0), (1, 1), 1),
    (1, 2, 3, 3, 3, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 1),
    (2, 4, 2, 3, 4, (2, 3), (2, 1), (0, 1), (1, 0), (1, 1), 2),
]:
    args = {"stride": list(stride), "padding": list(padding), "output_padding": list(output_padding),
            "dilation": list(dilation), "groups": groups, "bias": True}
    add("conv_transpose2d", args, [randn(n, cin, h, w_), randn(cin, cout // groups, *k), randn(cout)],
        lambda a, c, d: F.conv_transpose2d(a, c, d, stride, padding, output_padding, groups, dilation))
for shape, k, stride, padding in [((2, 3, 6, 6), (2, 2), None, (0, 0)), ((1, 2, 7, 5), (3, 3), (2, 2), (1, 1)),
                                  ((1, 2, 9, 9), (4, 4), (3, 3), (2, 2))]:
    x = randn(*shape)
    args = {"kernel": list(k), "stride": list(stride) if stride else [], "padding": list(padding)}
    add("max_pool2d", args, [x], lambda t: F.max_pool2d(t, k, stride, padding))
    for cip in [True, False]:
        add("avg_pool2d", dict(args, count_include_pad=cip), [x],
            lambda t: F.avg_pool2d(t, k, stride, padding, count_include_pad=cip))
for shape, out in [((2, 3, 6, 6), (3, 3)), ((1, 2, 7, 5), (3, 2))]:
    add("adaptive_avg_pool2d", {"output_size": list(out)}, [randn(*shape)], lambda t: F.adaptive_avg_pool2d(t, out))
for shape, training, affine in [((4, 3, 5, 5), True, True), ((4, 3, 5, 5), False, True), ((8, 2), True, False)]:
    c = shape[1]
    inputs = [randn(*shape) * 2 + 0.5, randn(c), torch.rand(c, dtype=f64) + 0.5] + \
        ([randn(c), randn(c)] if affine else [])

    def bn(a, mean, var, *wb, training=training):
        mean, var = mean.clone(), var.clone()
        y = F.batch_norm(a, mean, var, wb[0] if wb else None, wb[1] if wb else None, training, 0.1, 1e-5)
        return y, mean, var
    add("batch_norm", {"training": training, "momentum": 0.1, "eps": 1e-5, "affine": affine}, inputs, bn)
for shape, mode, scale, size in [((1, 2, 3, 4), "nearest", 2.0, None), ((2, 1, 3, 3), "bilinear", 2.0, None),
                                 ((1, 2, 4, 3), "bilinear", None, [5, 7])]:
    args = {"mode": mode, "scale_factor": scale if scale else 0.0, "size": size if size else []}
    kw = {"align_corners": False} if mode == "bilinear" else {}
    add("interpolate", args, [randn(*shape)],
        lambda t: F.interpolate(t, size=size, scale_factor=scale, mode=mode, **kw))

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "half_table.json")
with open(out, "w") as f:
    json.dump({"generator": "tests/data/make_half_table.py", "torch": torch.__version__, "cases": cases}, f,
              separators=(",", ":"))
print(len(cases), "cases ->", out, os.path.getsize(out), "bytes")
