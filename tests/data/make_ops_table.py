#!/usr/bin/env python3
"""Writes tests/data/ops_table.json: PyTorch's values (and Float64 gradients of sum(y)) for the
activations, var/std, triu/tril, masked_fill, rounding, log1p/expm1, any/all, sort/argsort, norm and
clamp_min/clamp_max that tests/src/test_tensor_activation.cpp
checks loom against. Run once with PyTorch installed (python3 tests/data/make_ops_table.py);
the JSON is committed, so the tests never need torch. Non-finite numbers are the strings
"nan", "inf" and "-inf"."""
import json, math, os
import torch
import torch.nn.functional as F
from torch_json import DTYPES, enc, tensor_json

torch.manual_seed(26)
cases = []


def add(op, x, args, fn, mask=None):
    x = x.clone()
    grad = None
    if x.dtype == torch.float64:
        x.requires_grad_(True)
    y = fn(x) if mask is None else fn(x, mask)
    if x.requires_grad and y.requires_grad:
        try:
            y.sum().backward()
            grad = x.grad
        except RuntimeError:  # PyTorch 1.13's var backward with keepdim over all dims; values only
            pass
    case = {"op": op, "args": args, "x": tensor_json(x), "y": tensor_json(y)}
    if mask is not None:
        case["mask"] = tensor_json(mask)
    if grad is not None:
        case["grad"] = tensor_json(grad)
    cases.append(case)


special = [-math.inf, -27.0, -7.0, -6.0, -5.9, -4.0, -3.0, -2.0, -1.0, -0.5, -0.49999, -0.1, -1e-10, -0.0, 0.0,
           1e-300, 1e-30, 1e-10, 0.3, 0.5, 0.50001, 0.7, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 3.9, 4.0, 4.5, 5.0, 5.9,
           6.0, 27.0, math.inf, math.nan]
grid = [i / 100 - 7 for i in range(1401)]
for dt in ["float32", "float64"]:
    d = DTYPES[dt]
    add("erf", torch.tensor(special + grid, dtype=d), {}, torch.erf)
    add("erf", torch.empty(0, 3, dtype=d), {}, torch.erf)
    wide = torch.tensor([-30.0, -10.0, -3.0, -1.0, -0.0, 0.0, 1e-8, 0.5, 1.0, 3.0, 10.0, 30.0] + grid[::7], dtype=d)
    odd = torch.randn(3, 5, dtype=d) * 3
    for approximate in ["none", "tanh"]:
        for x in [wide, odd, torch.tensor([0.75], dtype=d), torch.empty(0, dtype=d)]:
            add("gelu", x, {"approximate": approximate}, lambda t: F.gelu(t, approximate=approximate))
    for x in [wide, odd, torch.tensor([-0.25], dtype=d), torch.empty(2, 0, dtype=d)]:
        add("silu", x, {}, F.silu)
        add("leaky_relu", x, {"negative_slope": 0.01}, F.leaky_relu)
        add("softplus", x, {"beta": 1.0, "threshold": 20.0}, F.softplus)
    at = torch.tensor([-800.0, -40.0, -1.0, 0.0, 2.0, 2.5, 2.5000001, 3.0, 19.0, 20.0, 21.0, 800.0], dtype=d)
    for beta, threshold in [(1.0, 20.0), (2.0, 5.0), (0.5, 1.0), (1.0, 1000.0), (-1.0, 20.0)]:
        add("softplus", at, {"beta": beta, "threshold": threshold},
            lambda t: F.softplus(t, beta=beta, threshold=threshold))
    kink = torch.tensor([-2.0, -0.0, 0.0, 1e-12, 2.0], dtype=d)
    for slope in [0.01, 0.2, -0.5]:
        add("leaky_relu", kink, {"negative_slope": slope}, lambda t: F.leaky_relu(t, slope))

    # var and std
    base = torch.randn(5, 7, dtype=d) * 2 + 1
    three = torch.randn(4, 1, 3, dtype=d)
    for x, dims in [(base, []), (base, [0]), (base, [1]), (base, [-1]), (base, [0, 1]), (three, [0, 2]),
                    (three, [1]), (three, [2, 0]), (torch.tensor([[5.0]], dtype=d), []),
                    (torch.tensor([[5.0, 6.0]], dtype=d), [1]), (torch.tensor([[5.0, 5.0]], dtype=d), [1]),
                    (torch.empty(0, 3, dtype=d), [0]), (torch.tensor(2.5, dtype=d), []),
                    (torch.randn(2, 3, dtype=d), [0])]:
        for correction in [0, 1, 2, 3]:  # PyTorch 1.13 takes integer corrections
            for keepdim in [False, True]:
                args = {"dims": dims, "correction": correction, "keepdim": keepdim}
                dim = dims if dims else None
                add("var", x, args, lambda t: torch.var(t, dim=dim, correction=correction, keepdim=keepdim))
                add("std", x, args, lambda t: torch.std(t, dim=dim, correction=correction, keepdim=keepdim))

for dt in ["float32", "float64", "int64", "bool"]:
    d = DTYPES[dt]
    m = (torch.arange(20) % 7).reshape(4, 5).to(d) if dt != "bool" else (torch.arange(20) % 3 == 0).reshape(4, 5)
    for x in [m, (m.reshape(2, 2, 5) if True else None), m[:1, :1], m[:0, :3], m[:3, :1]]:
        for k in [-7, -2, -1, 0, 1, 2, 6]:
            add("triu", x, {"k": k}, lambda t: torch.triu(t, k))
            add("tril", x, {"k": k}, lambda t: torch.tril(t, k))
    x = (torch.arange(6) - 2).reshape(2, 3).to(d) if dt != "bool" else torch.tensor([[True, False, True]] * 2)
    for mask in [torch.tensor([True, False, True]), torch.tensor([[True], [False]]),
                 torch.tensor([[True, False, False], [False, True, True]]), torch.ones(4, 2, 3).bool()]:
        for value in [2.7, -1.0, 0.0] + ([math.inf] if dt.startswith("float") else []):
            add("masked_fill", x, {"value": enc(value)}, lambda t, mk: t.masked_fill(mk, value), mask)
    add("masked_fill", x[:1], {"value": 1.0}, lambda t, mk: t.masked_fill(mk, 1.0), torch.ones(2, 0, 3).bool())

# Rounding (ties, -0, huge, inf, NaN; round with decimals), log1p and expm1 (tiny, near the
# branch switches, large), any and all over axes and empty ones. Appended last: the cases above
# keep their random draws.
ties = [-3.5, -2.5, -1.5, -0.5, -0.49999, -0.0, 0.0, 0.49999, 0.5, 1.5, 2.5, 3.5, 1e15 + 0.5, 2.0 ** 52 + 1,
        -(2.0 ** 23) - 0.5, 1e30, -1e30, math.inf, -math.inf, math.nan, 0.3, -0.7, 2.675, -1.35]
for dt in ["float32", "float64"]:
    d = DTYPES[dt]
    x = torch.tensor(ties, dtype=d)
    add("floor", x, {}, torch.floor)
    add("ceil", x, {}, torch.ceil)
    add("trunc", x, {}, torch.trunc)
    add("round", x, {"decimals": 0}, torch.round)
    for decimals in [1, 2, -1]:
        add("round", x, {"decimals": decimals}, lambda t: torch.round(t, decimals=decimals))
    small = [-1.0, -0.999, -0.5, -1e-3, -1e-8, -1e-20, -0.0, 0.0, 1e-20, 1e-8, 1e-3, 0.5, 1.0, 1.0999, 1.1,
             1.1001, 2.0, 10.0, 100.0, 1e10, 1e30, math.inf, math.nan]
    add("log1p", torch.tensor(small + [-2.0] + grid[600:], dtype=d), {}, torch.log1p)
    add("expm1", torch.tensor(small + [-1.1001, -1.1, -1.0999, -30.0, -100.0, -math.inf, 80.0] + grid, dtype=d), {},
        torch.expm1)
for dt in ["float32", "int64", "bool"]:
    d = DTYPES[dt]
    m = torch.tensor([[0, 0, 1], [0, 0, 0], [2, 3, 4], [0, 5, 0]]).to(d)
    for dims in [[], [0], [1], [0, 1]]:
        for keepdim in [False, True]:
            args = {"dims": dims, "keepdim": keepdim}
            dim = tuple(dims) if dims else None
            for op, fn in [("any", torch.any), ("all", torch.all)]:
                if dim is None:
                    add(op, m, args, lambda t: fn(t).reshape([1] * t.dim()) if keepdim else fn(t))
                else:
                    f = lambda t: t
                    for a in sorted(dim, reverse=True):
                        f = (lambda g, a: lambda t: fn(g(t), a, keepdim=keepdim))(f, a)
                    add(op, m, args, f)
    add("any", m[:0], {"dims": [0], "keepdim": False}, lambda t: torch.any(t, 0))
    add("all", m[:0], {"dims": [0], "keepdim": False}, lambda t: torch.all(t, 0))
nan_row = torch.tensor([[math.nan, 0.0], [0.0, 0.0]])
add("any", nan_row, {"dims": [1], "keepdim": False}, lambda t: torch.any(t, 1))
add("all", nan_row, {"dims": [0], "keepdim": False}, lambda t: torch.all(t, 0))

# sort and argsort (stable, NaN last ascending and first descending, ties in order), the vector
# norms (a zero vector's 2-norm gradient is 0), one-sided clamps.
for dt in ["float32", "float64", "int64"]:
    d = DTYPES[dt]
    if dt == "int64":
        rows = torch.tensor([[3, 1, 2, 1, 0], [5, 5, -1, 2, 5]], dtype=d)
    else:
        rows = torch.tensor([[0.5, -1.0, math.nan, 0.5, 2.0], [math.inf, -0.0, 0.0, -math.inf, 1.0]], dtype=d)
    for dim in [1, 0, -1]:
        for descending in [False, True]:
            args = {"dim": dim, "descending": descending}
            add("sort", rows, args, lambda t: torch.sort(t, dim=dim, descending=descending, stable=True)[0])
            add("argsort", rows, args, lambda t: torch.sort(t, dim=dim, descending=descending, stable=True)[1])
add("sort", torch.tensor([True, False, True]), {"dim": 0, "descending": False},
    lambda t: torch.sort(t, stable=True)[0])
for dt in ["float32", "float64"]:
    d = DTYPES[dt]
    m = torch.randn(3, 4, dtype=d) * 2
    m[1] = 0.0
    for p in [2.0, 1.0, math.inf, -math.inf, 0.0, 3.0, 0.5]:
        for dims, keepdim in [([], False), ([1], False), ([0], True), ([0, 1], False)]:
            add("norm", m, {"p": enc(p), "dims": dims, "keepdim": keepdim},
                lambda t: torch.linalg.vector_norm(t, ord=p, dim=dims if dims else None, keepdim=keepdim))
    # NaN only in Float32 (values, no gradient): loom's clamp'(NaN) is 1, PyTorch's 0 (semantics 35).
    c = torch.tensor([-2.0, -0.5, -0.0, 0.0, 0.5, 1.0, 3.0, math.inf, -math.inf] + ([math.nan] if dt == "float32" else []),
                     dtype=d)
    for bound in [-0.5, 0.0, 1.0]:
        add("clamp_min", c, {"bound": bound}, lambda t: torch.clamp(t, min=bound))
        add("clamp_max", c, {"bound": bound}, lambda t: torch.clamp(t, max=bound))
ci = torch.tensor([-5, 0, 3, 7], dtype=torch.int64)
add("clamp_min", ci, {"bound": 2.5}, lambda t: torch.clamp(t, min=3))
add("clamp_max", ci, {"bound": 2.5}, lambda t: torch.clamp(t, max=2))

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops_table.json")
with open(out, "w") as f:
    json.dump({"generator": "tests/data/make_ops_table.py", "torch": torch.__version__, "cases": cases}, f,
              separators=(",", ":"))
print(len(cases), "cases ->", out)
