#!/usr/bin/env python3
"""Writes tests/data/nn_table.json: PyTorch's values and Float64 gradients for cumsum, repeat,
topk and torch.nn.functional's pad, conv1d, conv2d, conv_transpose2d, max_pool2d, avg_pool2d,
adaptive_avg_pool2d, batch_norm, interpolate, the losses and einsum, which tests/src/test_nn_functional.cpp,
test_tensor_scan.cpp, test_nn_losses.cpp and test_tensor_einsum.cpp check loom against. Each case holds its inputs, its outputs, a weight w per
output and the gradient of sum(y * w) for each Float64 input. Run once with PyTorch installed
(python3 tests/data/make_nn_table.py); the JSON is committed, so the tests never need torch. New cases
are appended last, and the committed JSON keeps the earlier ones as first written: rerun on another
machine, oneDNN's convolutions can differ in their last bits."""
import json, math, os
import torch
import torch.nn.functional as F
from torch_json import tensor_json as tj

torch.manual_seed(26)
cases = []


def add(op, args, inputs, fn, grad=True):
    inputs = [t.clone() for t in inputs]
    for t in inputs:
        if grad and t.dtype == torch.float64:
            t.requires_grad_(True)
    out = fn(*inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    case = {"op": op, "args": args, "inputs": [tj(t) for t in inputs], "outputs": [tj(o) for o in outs]}
    y = outs[0]
    if grad and y.requires_grad:
        w = torch.randn(y.shape, dtype=y.dtype)
        case["w"] = tj(w)
        leaves = [t for t in inputs if t.requires_grad]
        gs = torch.autograd.grad((y * w).sum(), leaves, allow_unused=True)
        case["grads"] = [tj(g if g is not None else torch.zeros_like(t)) for g, t in zip(gs, leaves)]
    cases.append(case)


f64, f32 = torch.float64, torch.float32

# ---- cumsum, repeat, topk ----
for dt in [f64, f32]:
    x = torch.randn(3, 4, 5, dtype=dt)
    for dim in [0, 1, 2, -1]:
        add("cumsum", {"dim": dim}, [x], lambda t: torch.cumsum(t, dim))
    add("cumsum", {"dim": 0}, [torch.randn(1, dtype=dt)], lambda t: torch.cumsum(t, 0))
    add("cumsum", {"dim": 1}, [torch.randn(0, 3, dtype=dt)], lambda t: torch.cumsum(t, 1))
    add("cumsum", {"dim": 0}, [torch.tensor([1e30, 1.0, -1e30, math.inf, 2.0], dtype=dt)],
        lambda t: torch.cumsum(t, 0), grad=False)
for dt in [torch.int64, torch.int32]:
    add("cumsum", {"dim": 1}, [torch.randint(-5, 5, (2, 7), dtype=dt)], lambda t: torch.cumsum(t, 1))
add("cumsum", {"dim": 0}, [torch.tensor([True, False, True, True])], lambda t: torch.cumsum(t, 0))

for reps in [[2, 3], [1, 1], [2, 1, 3], [0, 2], [3, 2, 1, 2]]:
    add("repeat", {"repeats": reps}, [torch.randn(2, 3, dtype=f64)], lambda t: t.repeat(*reps))
add("repeat", {"repeats": [4]}, [torch.tensor([1, 2, 3])], lambda t: t.repeat(4))

for dt in [f64, f32]:
    x = torch.randn(4, 9, dtype=dt)
    for k, dim, largest in [(3, -1, True), (9, 1, True), (2, 0, True), (1, -1, False), (4, 0, False),
                            (0, 1, True)]:
        add("topk", {"k": k, "dim": dim, "largest": largest}, [x],
            lambda t: torch.topk(t, k, dim, largest))
    # NaN and infinities, no ties: PyTorch ranks NaN above everything.
    v = torch.tensor([0.5, math.nan, -math.inf, 3.0, math.inf, -1.0, 2.0], dtype=dt)
    for largest in [True, False]:
        add("topk", {"k": 5, "dim": 0, "largest": largest}, [v], lambda t: torch.topk(t, 5, 0, largest),
            grad=False)
add("topk", {"k": 3, "dim": 1, "largest": True}, [torch.randint(-50, 50, (3, 8))],
    lambda t: torch.topk(t, 3, 1))
# Ties: the values and their gradients at ties must agree; loom's indices are the lowest first.
add("topk_ties", {"k": 3, "dim": 0, "largest": True}, [torch.tensor([1., 3, 3, 2, 3, 0, 3], dtype=f64)],
    lambda t: torch.topk(t, 3, 0))

# ---- pad ----
for mode, pads in [("constant", [1, 2]), ("constant", [1, 0, 2, 3]), ("constant", [-1, 2, 0, -2]),
                   ("constant", [1, 1, 1, 1, 1, 1]), ("reflect", [2, 1]), ("reflect", [1, 3, 2, 0]),
                   ("replicate", [3, 1]), ("replicate", [2, 0, 1, 4])]:
    # PyTorch 1.13 pads the last len(pad) / 2 axes of a tensor of len(pad) / 2 + 1 or + 2 axes
    x = torch.randn(*([2, 3, 4, 5][-(len(pads) // 2 + 2):]), dtype=f64)
    value = 1.5 if mode == "constant" else 0.0
    add("pad", {"pad": pads, "mode": mode, "value": value}, [x],
        lambda t: F.pad(t, pads, mode=mode, value=value) if mode == "constant" else F.pad(t, pads, mode=mode))
add("pad", {"pad": [1, 1], "mode": "reflect", "value": 0.0}, [torch.randn(1, 2, 3, dtype=f64)],
    lambda t: F.pad(t, [1, 1], mode="reflect"))

# ---- conv1d, conv2d ----
for n, cin, cout, h, w_, k, stride, padding, dilation, groups, bias in [
    (2, 3, 4, 7, 6, (3, 3), (1, 1), (0, 0), (1, 1), 1, True),
    (1, 2, 3, 5, 5, (3, 3), (1, 1), (1, 1), (1, 1), 1, False),
    (2, 4, 6, 9, 8, (3, 2), (2, 3), (1, 0), (1, 1), 2, True),
    (1, 3, 2, 10, 9, (3, 3), (2, 2), (2, 1), (2, 3), 1, True),
    (2, 4, 4, 6, 7, (3, 3), (1, 1), (1, 1), (1, 1), 4, True),   # depthwise
    (1, 2, 4, 6, 6, (2, 2), (1, 2), (0, 1), (2, 1), 2, False),  # depthwise multiplier 2
    (1, 1, 1, 1, 1, (1, 1), (1, 1), (0, 0), (1, 1), 1, True),
    (3, 2, 3, 4, 4, (4, 4), (1, 1), (0, 0), (1, 1), 1, True),   # kernel = input
    (0, 2, 3, 5, 5, (3, 3), (1, 1), (1, 1), (1, 1), 1, True),   # empty batch
    (1, 3, 5, 11, 13, (5, 3), (3, 2), (2, 1), (1, 2), 1, True),
    (2, 6, 4, 5, 5, (1, 1), (2, 2), (0, 0), (1, 1), 2, True),
    (1, 2, 2, 3, 3, (3, 3), (4, 4), (3, 3), (1, 1), 1, True),   # stride > kernel
]:
    x = torch.randn(n, cin, h, w_, dtype=f64)
    wt = torch.randn(cout, cin // groups, *k, dtype=f64)
    b = torch.randn(cout, dtype=f64)
    args = {"stride": list(stride), "padding": list(padding), "dilation": list(dilation), "groups": groups,
            "bias": bias}
    if bias:
        add("conv2d", args, [x, wt, b], lambda a, c, d: F.conv2d(a, c, d, stride, padding, dilation, groups))
    else:
        add("conv2d", args, [x, wt], lambda a, c: F.conv2d(a, c, None, stride, padding, dilation, groups))
x32 = torch.randn(2, 3, 8, 8, dtype=f32)
w32 = torch.randn(5, 3, 3, 3, dtype=f32)
add("conv2d", {"stride": [1, 1], "padding": [1, 1], "dilation": [1, 1], "groups": 1, "bias": False},
    [x32, w32], lambda a, c: F.conv2d(a, c, None, 1, 1))
for n, cin, cout, l, k, stride, padding, dilation, groups in [
    (2, 3, 4, 9, 3, 1, 0, 1, 1), (1, 4, 2, 10, 3, 2, 1, 2, 2), (3, 2, 2, 5, 5, 1, 2, 1, 2), (1, 1, 1, 1, 1, 1, 0, 1, 1)]:
    x = torch.randn(n, cin, l, dtype=f64)
    wt = torch.randn(cout, cin // groups, k, dtype=f64)
    b = torch.randn(cout, dtype=f64)
    add("conv1d", {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups, "bias": True},
        [x, wt, b], lambda a, c, d: F.conv1d(a, c, d, stride, padding, dilation, groups))

# ---- conv_transpose2d: weight [cin, cout / groups, kh, kw] ----
for n, cin, cout, h, w_, k, stride, padding, output_padding, dilation, groups in [
    (2, 3, 4, 4, 5, (3, 3), (1, 1), (0, 0), (0, 0), (1, 1), 1),
    (1, 2, 3, 3, 3, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 1),
    (2, 4, 2, 3, 4, (2, 3), (2, 1), (0, 1), (1, 0), (1, 1), 2),
    (1, 2, 2, 4, 3, (3, 2), (1, 2), (2, 0), (0, 1), (2, 1), 1),
    (1, 4, 4, 3, 3, (3, 3), (3, 3), (4, 4), (2, 2), (1, 1), 4),
    (0, 2, 3, 3, 3, (2, 2), (2, 2), (0, 0), (0, 0), (1, 1), 1),
]:
    x = torch.randn(n, cin, h, w_, dtype=f64)
    wt = torch.randn(cin, cout // groups, *k, dtype=f64)
    b = torch.randn(cout, dtype=f64)
    args = {"stride": list(stride), "padding": list(padding), "output_padding": list(output_padding),
            "dilation": list(dilation), "groups": groups, "bias": True}
    add("conv_transpose2d", args, [x, wt, b],
        lambda a, c, d: F.conv_transpose2d(a, c, d, stride, padding, output_padding, groups, dilation))

# ---- pooling ----
for shape, k, stride, padding in [((2, 3, 6, 6), (2, 2), None, (0, 0)), ((1, 2, 7, 5), (3, 3), (2, 2), (1, 1)),
                                  ((2, 1, 5, 8), (3, 2), (1, 3), (1, 0)), ((1, 1, 1, 1), (1, 1), None, (0, 0)),
                                  ((0, 2, 4, 4), (2, 2), None, (0, 0)), ((1, 2, 9, 9), (4, 4), (3, 3), (2, 2))]:
    x = torch.randn(*shape, dtype=f64)
    args = {"kernel": list(k), "stride": list(stride) if stride else [], "padding": list(padding)}
    add("max_pool2d", args, [x], lambda t: F.max_pool2d(t, k, stride, padding))
    for cip in [True, False]:
        a2 = dict(args, count_include_pad=cip)
        add("avg_pool2d", a2, [x], lambda t: F.avg_pool2d(t, k, stride, padding, count_include_pad=cip))
# Ties: every window of a constant image, and repeated maxima; the gradient goes to the first.
tie = torch.tensor([[[[1., 1, 2, 2, 0], [1, 1, 2, 2, 0], [3, 0, 3, 5, 5], [0, 3, 3, 5, 5]]]], dtype=f64)
add("max_pool2d", {"kernel": [2, 2], "stride": [], "padding": [0, 0]}, [tie], lambda t: F.max_pool2d(t, 2))
add("max_pool2d", {"kernel": [2, 2], "stride": [1, 1], "padding": [0, 0]}, [tie],
    lambda t: F.max_pool2d(t, 2, 1))
add("max_pool2d", {"kernel": [3, 3], "stride": [1, 1], "padding": [1, 1]}, [torch.zeros(1, 1, 3, 4, dtype=f64)],
    lambda t: F.max_pool2d(t, 3, 1, 1))
add("max_pool2d", {"kernel": [2, 2], "stride": [], "padding": [0, 0]},
    [torch.tensor([[[[-math.inf, 1.0], [-math.inf, -math.inf]]]], dtype=f64)], lambda t: F.max_pool2d(t, 2),
    grad=False)
for shape, out in [((2, 3, 6, 6), (3, 3)), ((1, 2, 7, 5), (3, 2)), ((1, 1, 5, 7), (5, 7)), ((1, 2, 4, 4), (1, 1)),
                   ((2, 1, 3, 10), (2, 4))]:
    add("adaptive_avg_pool2d", {"output_size": list(out)}, [torch.randn(*shape, dtype=f64)],
        lambda t: F.adaptive_avg_pool2d(t, out))

# ---- batch_norm: outputs are y, then the running mean and var after the call ----
for shape, training, affine in [((4, 3, 5, 5), True, True), ((4, 3, 5, 5), False, True), ((8, 2), True, False),
                                ((2, 3, 4), True, True), ((3, 2, 3, 3), False, False)]:
    c = shape[1]
    x = torch.randn(*shape, dtype=f64) * 2 + 0.5
    rm, rv = torch.randn(c, dtype=f64), torch.rand(c, dtype=f64) + 0.5
    wt, b = torch.randn(c, dtype=f64), torch.randn(c, dtype=f64)
    args = {"training": training, "momentum": 0.1, "eps": 1e-5, "affine": affine}

    def bn(a, m, v, *wb):
        m, v = m.detach().clone(), v.detach().clone()
        y = F.batch_norm(a, m, v, wb[0] if wb else None, wb[1] if wb else None, training, 0.1, 1e-5)
        return y, m, v
    add("batch_norm", args, [x, rm, rv] + ([wt, b] if affine else []), bn)

# ---- interpolate ----
for shape, mode, scale, size in [((1, 2, 3, 4), "nearest", 2.0, None), ((2, 1, 3, 3), "bilinear", 2.0, None),
                                 ((1, 1, 4, 5), "nearest", None, [7, 3]), ((1, 2, 4, 3), "bilinear", None, [5, 7]),
                                 ((1, 1, 5, 5), "bilinear", None, [2, 3]), ((1, 1, 2, 2), "nearest", 3.0, None)]:
    args = {"mode": mode, "scale_factor": scale if scale else 0.0, "size": size if size else []}
    kw = {"align_corners": False} if mode == "bilinear" else {}
    add("interpolate", args, [torch.randn(*shape, dtype=f64)],
        lambda t: F.interpolate(t, size=size, scale_factor=scale, mode=mode, **kw))

# ---- losses (appended last: the cases above keep their random draws) ----
RED = ["mean", "sum", "none"]
for dt in [f64, f32]:
    for red in RED:
        # class indices: [N, C], [N, C, d1, d2], [C]; weights, an ignored label, label smoothing
        for shape, lshape in [((6, 5), (6,)), ((2, 4, 3, 2), (2, 3, 2)), ((5,), ())]:
            x = torch.randn(*shape, dtype=dt) * 2
            classes = shape[0] if len(shape) == 1 else shape[1]
            y = torch.randint(0, classes, lshape)
            w = torch.rand(classes, dtype=dt) + 0.5
            for weight, ignore, smooth in [(False, None, 0.0), (True, None, 0.0), (False, 1, 0.0), (True, 2, 0.0),
                                           (False, None, 0.2), (True, 0, 0.1)]:
                args = {"reduction": red, "weight": weight, "ignore_index": ignore if ignore is not None else "none",
                        "label_smoothing": smooth}
                kw = {"reduction": red, "label_smoothing": smooth}
                if ignore is not None:
                    kw["ignore_index"] = ignore
                inputs = [x, y] + ([w] if weight else [])
                # PyTorch does not differentiate class weights: detached, their gradient is 0 (the test
                # detaches loom's too).
                add("cross_entropy", args, inputs,
                    lambda a, b, c=None: F.cross_entropy(a, b, weight=None if c is None else c.detach(), **kw))
                if smooth == 0:
                    kw2 = {k: v for k, v in kw.items() if k != "label_smoothing"}
                    add("nll_loss", args, [torch.log_softmax(x, 1 if x.dim() > 1 else 0).detach(), y] + inputs[2:],
                        lambda a, b, c=None: F.nll_loss(a, b, weight=None if c is None else c.detach(), **kw2))
        # every label ignored: the mean is 0 / 0
        y_all = torch.full((3,), 4, dtype=torch.int64)
        add("cross_entropy", {"reduction": red, "weight": False, "ignore_index": 4, "label_smoothing": 0.0},
            [torch.randn(3, 5, dtype=dt), y_all], lambda a, b: F.cross_entropy(a, b, ignore_index=4, reduction=red))
        # class probabilities, with and without smoothing and weights
        for shape in [(4, 3), (2, 3, 4)]:
            x = torch.randn(*shape, dtype=dt)
            p = torch.softmax(torch.randn(*shape, dtype=dt), 1)
            for weight, smooth in [(False, 0.0), (True, 0.0), (False, 0.3)]:
                args = {"reduction": red, "weight": weight, "ignore_index": "none", "label_smoothing": smooth}
                inputs = [x, p] + ([torch.rand(3, dtype=dt) + 0.5] if weight else [])
                add("cross_entropy", args, inputs,
                    lambda a, b, c=None: F.cross_entropy(a, b, weight=None if c is None else c.detach(),
                                                         reduction=red, label_smoothing=smooth))
        # binary cross-entropies
        z = torch.tensor([[-30.0, -2.0, -0.5, 0.0], [0.0, 0.5, 3.0, 40.0]], dtype=dt)
        t = torch.tensor([[0.0, 1.0, 0.3, 1.0], [0.0, 0.5, 1.0, 0.0]], dtype=dt)
        bw = torch.rand(2, 4, dtype=dt) + 0.5
        pw = torch.tensor([0.5, 1.0, 2.0, 3.0], dtype=dt)
        for weight, pos in [(False, False), (True, False), (False, True), (True, True)]:
            args = {"reduction": red, "weight": weight, "pos_weight": pos}
            inputs = [z, t] + ([bw] if weight else []) + ([pw] if pos else [])
            def bce_logits(a, b, *rest, weight=weight, pos=pos):
                rest = list(rest)
                wt = rest.pop(0).detach() if weight else None  # not differentiated by PyTorch
                pwt = rest.pop(0).detach() if pos else None
                return F.binary_cross_entropy_with_logits(a, b, weight=wt, pos_weight=pwt, reduction=red)
            add("binary_cross_entropy_with_logits", args, inputs, bce_logits)
        probs = torch.tensor([[0.0, 1e-30, 0.1, 0.5], [0.9, 1.0 - 1e-7, 1.0, 0.3]], dtype=dt)
        add("binary_cross_entropy", {"reduction": red, "weight": False}, [probs, t],
            lambda a, b: F.binary_cross_entropy(a, b, reduction=red), grad=False)
        inner = torch.tensor([[0.01, 0.2, 0.5, 0.7], [0.9, 0.4, 0.6, 0.3]], dtype=dt)
        add("binary_cross_entropy", {"reduction": red, "weight": True}, [inner, t, bw],
            lambda a, b, c: F.binary_cross_entropy(a, b, weight=c.detach(), reduction=red))
        # regression losses, kinks included (d = 0, |d| = beta)
        pred = torch.tensor([[0.0, 0.5, -1.5, 2.0], [3.0, -0.25, 1.0, 0.1]], dtype=dt)
        target = torch.tensor([[0.0, 0.0, 0.0, 0.5], [-1.0, 0.0, 0.0, 0.1]], dtype=dt)
        add("mse_loss", {"reduction": red}, [pred, target], lambda a, b: F.mse_loss(a, b, reduction=red))
        add("l1_loss", {"reduction": red}, [pred, target], lambda a, b: F.l1_loss(a, b, reduction=red))
        # beta = 0 is l1_loss; PyTorch 1.13's gradient there at d = 0 is -1 for both the input and
        # the target (not even opposite), so only its values are kept.
        for beta in [1.0, 0.5, 0.0]:
            add("smooth_l1_loss", {"reduction": red, "beta": beta}, [pred, target],
                lambda a, b: F.smooth_l1_loss(a, b, reduction=red, beta=beta), grad=beta != 0)
        for delta in [1.0, 0.5, 2.0]:
            add("huber_loss", {"reduction": red, "delta": delta}, [pred, target],
                lambda a, b: F.huber_loss(a, b, reduction=red, delta=delta))
        # the target broadcast to the input's shape
        add("mse_loss", {"reduction": red}, [pred, torch.tensor([1.0, -1.0, 0.0, 2.0], dtype=dt)],
            lambda a, b: F.mse_loss(a, b.expand_as(a), reduction=red))

# ---- einsum (appended after the losses: every case above keeps its draws) ----
EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(2, 3), (3, 2)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 2)]),
    ("...ij,...jk", [(2, 1, 3, 4), (3, 4, 2)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ii", [(4, 4)]),
    ("ii->i", [(4, 4)]),
    ("bii->bi", [(2, 3, 3)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(5,)] * 2),
    ("ij,ij->ij", [(3, 4)] * 2),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("abc,cd,bd->ad", [(2, 3, 4), (4, 5), (3, 5)]),
    ("ik,jk->", [(2, 3), (4, 3)]),
    ("ij,j->i", [(3, 4), (4,)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("ij,jk->ik", [(0, 3), (3, 2)]),
    ("ij,jk->ik", [(2, 0), (0, 3)]),
    ("i,j->ij", [(1,), (3,)]),
    ("ij,jk->ik", [(1, 3), (3, 1)]),
    ("ij,jk->ik", [(2, 3), (1, 4)]),
    ("bij,jk->bik", [(1, 2, 3), (3, 2)]),
]
for dt in [f64, f32]:
    for eq, shapes in EINSUM:
        add("einsum", {"equation": eq}, [torch.randn(*s, dtype=dt) for s in shapes],
            lambda *ts: torch.einsum(eq, *ts))

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn_table.json")
with open(out, "w") as f:
    json.dump({"generator": "tests/data/make_nn_table.py", "torch": torch.__version__, "cases": cases}, f,
              separators=(",", ":"))
print(len(cases), "cases ->", out)
