#!/usr/bin/env python3
"""Writes tests/data/attention_table.json: PyTorch's values and Float64 gradients of
scaled_dot_product_attention on small cases (is_causal with L = S, L < S and L > S, Bool and float
masks, a key-padding mask broadcast over heads, scale, enable_gqa, Float32), which
tests/src/test_nn_attention.cpp checks loom against. The format is make_nn_table.py's: each case
holds its inputs (q, k, v, then the mask if any), the output, a weight w per output element and the
gradient of sum(y * w) for each Float64 input (the float mask's too). Run once with PyTorch installed
(python3 tests/data/make_attention_table.py); the JSON is committed, so the tests never need torch.

torch.nn.functional.scaled_dot_product_attention arrived in PyTorch 2.0 (enable_gqa in 2.5). Before
2.5, the cases run PyTorch's documented reference implementation of it (its docstring's
"equivalent" code: the causal mask is ones(L, S).tril(0), aligned top-left; a Bool mask is True
where attention is allowed; k and v heads repeat_interleave'd for GQA); "implementation" in the JSON
says which ran."""
import json, math, os
import torch
import torch.nn.functional as F
from torch_json import tensor_json as tj

torch.manual_seed(27)
f64, f32 = torch.float64, torch.float32
HAVE_SDPA = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)  # enable_gqa


def reference_sdpa(q, k, v, attn_mask=None, is_causal=False, scale=None, enable_gqa=False):
    L, S = q.size(-2), k.size(-2)
    scale_factor = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    bias = torch.zeros(L, S, dtype=q.dtype)
    if is_causal:
        assert attn_mask is None
        bias = bias.masked_fill(torch.ones(L, S, dtype=torch.bool).tril(diagonal=0).logical_not(), -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            bias = bias.masked_fill(attn_mask.logical_not(), -math.inf)
        else:
            bias = attn_mask + bias
    if enable_gqa:
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    weight = q @ k.transpose(-2, -1) * scale_factor
    weight = weight + bias
    return torch.softmax(weight, dim=-1) @ v


def sdpa(q, k, v, mask, is_causal, scale, enable_gqa):
    if HAVE_SDPA:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale,
                                              enable_gqa=enable_gqa)
    return reference_sdpa(q, k, v, mask, is_causal, scale, enable_gqa)


cases = []


def add(q, k, v, mask=None, is_causal=False, scale=None, enable_gqa=False):
    inputs = [t.clone() for t in [q, k, v] + ([mask] if mask is not None else [])]
    for t in inputs:
        if t.dtype == f64:
            t.requires_grad_(True)
    y = sdpa(inputs[0], inputs[1], inputs[2], inputs[3] if mask is not None else None, is_causal, scale,
             enable_gqa)
    args = {"is_causal": is_causal, "scale": scale, "enable_gqa": enable_gqa,
            "mask": "none" if mask is None else ("bool" if mask.dtype == torch.bool else "float")}
    case = {"op": "scaled_dot_product_attention", "args": args, "inputs": [tj(t) for t in inputs],
            "outputs": [tj(y)]}
    if y.requires_grad:
        w = torch.randn(y.shape, dtype=y.dtype)
        case["w"] = tj(w)
        leaves = [t for t in inputs if t.requires_grad]
        case["grads"] = [tj(g) for g in torch.autograd.grad((y * w).sum(), leaves)]
    cases.append(case)


def qkv(lead, L, S, E, Ev, dt=f64, kv_lead=None):
    kv_lead = lead if kv_lead is None else kv_lead
    return (torch.randn(*lead, L, E, dtype=dt), torch.randn(*kv_lead, S, E, dtype=dt),
            torch.randn(*kv_lead, S, Ev, dtype=dt))


def allowed_mask(shape):  # random Bool, every row with at least one key allowed
    m = torch.rand(*shape) < 0.6
    m[..., 0] = True
    return m


# no mask; L != S; leading axes broadcast (k and v shared by the batch)
add(*qkv([2, 3], 3, 5, 4, 3))
add(torch.randn(2, 2, 4, 3, dtype=f64), torch.randn(2, 1, 6, 3, dtype=f64), torch.randn(1, 2, 6, 2, dtype=f64))
# is_causal: square, queries fewer than keys (top-left: query i sees keys 0..i), more than keys
# (queries i >= S see every key), one query, with a scale
add(*qkv([1, 2], 4, 4, 8, 8), is_causal=True)
add(*qkv([2, 2], 3, 5, 4, 2), is_causal=True)
add(*qkv([2], 5, 3, 4, 3), is_causal=True)
add(*qkv([3], 1, 4, 2, 2), is_causal=True)
add(*qkv([2, 2], 6, 6, 4, 4), is_causal=True, scale=0.3)
# Bool masks: [L, S]; a key-padding mask [B, 1, 1, S] broadcast over heads and queries
add(*qkv([2, 2], 3, 5, 4, 3), mask=allowed_mask([3, 5]))
pad = torch.tensor([[True] * 5 + [False] * 2, [True] * 3 + [False] * 4]).reshape(2, 1, 1, 7)
add(*qkv([2, 3], 4, 7, 4, 2), mask=pad)
add(*qkv([2, 3], 7, 7, 4, 2), mask=pad & torch.ones(7, 7, dtype=torch.bool).tril(), scale=1.5)
# float masks added to the scores (their gradient is checked too), one with -inf entries
add(*qkv([2], 3, 5, 4, 3), mask=torch.randn(3, 5, dtype=f64))
add(*qkv([2, 2], 4, 4, 4, 4), mask=torch.randn(2, 1, 4, 4, dtype=f64), scale=0.7)
add(*qkv([2], 3, 3, 2, 2), mask=torch.zeros(3, 3, dtype=f64).masked_fill(
    torch.ones(3, 3, dtype=torch.bool).tril().logical_not(), -math.inf))
# enable_gqa: 4 query heads reading 2 (then 1) key/value heads, with is_causal and a Bool mask
add(*qkv([2, 4], 3, 5, 4, 3, kv_lead=[2, 2]), is_causal=True, enable_gqa=True)
add(*qkv([1, 6], 4, 4, 2, 2, kv_lead=[1, 1]), mask=allowed_mask([4, 4]), enable_gqa=True)
add(*qkv([1, 2], 3, 3, 2, 2, kv_lead=[1, 2]), enable_gqa=True)  # equal heads: nothing repeats
# Float32: values only
add(*qkv([2, 2], 5, 5, 8, 8, dt=f32), is_causal=True)
add(*qkv([2, 2], 3, 6, 4, 4, dt=f32), mask=allowed_mask([2, 1, 3, 6]), scale=0.25)
add(*qkv([1, 4], 3, 5, 4, 4, dt=f32, kv_lead=[1, 2]), is_causal=True, enable_gqa=True)

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention_table.json")
with open(out, "w") as f:
    json.dump({"generator": "tests/data/make_attention_table.py", "torch": torch.__version__,
               "implementation": "torch.nn.functional.scaled_dot_product_attention" if HAVE_SDPA
               else "PyTorch's documented reference implementation of scaled_dot_product_attention",
               "cases": cases}, f, separators=(",", ":"))
print(f"{len(cases)} cases written to {out}")
