#!/usr/bin/python3
"""The workloads of bench/bench_kernels.cpp, bench/bench_matmul.cpp, bench/bench_conv.cpp and bench/models in PyTorch and numpy, same names and sizes.

Prints one JSON object: {"threads": n, "torch": {workload: ms}, "numpy": {workload: ms},
"torch_losses": {model: [first, twentieth]}, "torch_isa": "AVX2", "blas": "openblas 0.3.21
Cooperlake", "blas_core": "Cooperlake"}, each time the median
of repeated runs on realized inputs; a model's time is one training step of its PyTorch
twin (model_twins.py), its losses those of the warm-up steps before timing. bench/compare runs it beside
loom; the peers are never a build or test dependency. Run torch with
GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (bench/compare sets it) so its large buffers get
huge pages as loom's do. `--peers numpy` runs numpy alone.

OpenBLAS (numpy's BLAS, and torch's: Debian builds torch with BLAS_INFO=generic, the
libblas.so.3 that libopenblas0-pthread provides) reads OPENBLAS_CORETYPE once, when it is
loaded: unset, it picks its kernels from CPUID (Cooperlake's AVX-512 ones on a Zen 4/5);
OPENBLAS_CORETYPE=Haswell gives its AVX2 ones. "blas_core" is the core it ran, from
threadpoolctl. bench/compare runs this once with OPENBLAS_CORETYPE unset and numpy once
more with it set to Haswell.
"""
import argparse
import json
import re
import statistics
import time

import numpy as np
import torch
from threadpoolctl import threadpool_info, threadpool_limits

import model_twins


def median_ms(fn, min_time):
    fn()  # warm up: allocations, lazy initialisation
    times, start = [], time.perf_counter()
    while len(times) < 3 or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def torch_workloads():
    g = torch.Generator().manual_seed(0)
    r = lambda *shape: torch.randn(*shape, generator=g)
    a1, b1 = r(1024, 1024), r(1024, 1024)
    a, b, c = r(4096, 4096), r(4096, 4096), r(4096, 4096)
    v, s = r(1 << 24), r(4096, 1024)
    w = r(1 << 22) * 3e9
    return {
        "add_1024x1024": lambda: a1 + b1,
        "add_4096x4096": lambda: a + b,
        "relu_exp_4096x4096": lambda: torch.relu(a * b + c).exp(),
        "cast_f32_i32_4M": lambda: w.to(torch.int32),
        "sum_16M": lambda: v.sum(),
        "sum_axis1_4096x4096": lambda: a.sum(1),
        "sum_axis0_4096x4096": lambda: a.sum(0),
        "softmax_4096x1024": lambda: torch.softmax(s, -1),
        "log_softmax_4096x1024": lambda: torch.log_softmax(s, -1),
        "exp_4096x4096": lambda: a.exp(),
        "tanh_4096x4096": lambda: a.tanh(),
        "sigmoid_4096x4096": lambda: torch.sigmoid(a),
        "sin_4096x4096": lambda: a.sin(),
        "cos_4096x4096": lambda: a.cos(),
        **matmul_workloads(torch, r),
        **torch_layer_workloads(r),
        **conv_workloads(),
        **attention_workloads(),
        **gpt_decode_workloads(),
    }


# bench/bench_conv.cpp's rows: name, N, C, H = W, C_out, k, stride, padding, groups.
CONVS = [("conv2d_3x3_64x64x56x56", 64, 64, 56, 64, 3, 1, 1, 1),
         ("conv2d_stem_64x3x224x224", 64, 3, 224, 64, 7, 2, 3, 1),
         ("conv2d_depthwise_64x128x28x28", 64, 128, 28, 128, 3, 1, 1, 128),
         ("conv2d_3x3_8x64x56x56", 8, 64, 56, 64, 3, 1, 1, 1),
         ("conv2d_stem_8x3x224x224", 8, 3, 224, 64, 7, 2, 3, 1),
         ("conv2d_depthwise_8x128x28x28", 8, 128, 28, 128, 3, 1, 1, 128)]


def conv_workloads():
    """bench/bench_conv.cpp: conv2d forward (no autograd) and forward+backward (both gradients of
    sum(y * y)) on uniform inputs, and a 2x2 max-pool; inputs are made on first use, so a filter
    that skips the convolutions allocates none of them."""
    F = torch.nn.functional
    out = {}
    for name, n, c, hw, co, k, s, p, g in CONVS:
        inputs = {}

        def made(n=n, c=c, hw=hw, co=co, k=k, g=g, inputs=inputs):
            if not inputs:
                inputs["x"], inputs["w"] = torch.rand(n, c, hw, hw), torch.rand(co, c // g, k, k)
                inputs["xg"] = inputs["x"].clone().requires_grad_()
                inputs["wg"] = inputs["w"].clone().requires_grad_()
            return inputs

        def forward(made=made, s=s, p=p, g=g):
            t = made()
            with torch.no_grad():
                return F.conv2d(t["x"], t["w"], None, s, p, 1, g)

        def forward_backward(made=made, s=s, p=p, g=g):
            t = made()
            y = F.conv2d(t["xg"], t["wg"], None, s, p, 1, g)
            return torch.autograd.grad((y * y).sum(), [t["xg"], t["wg"]])

        out[f"{name}_forward"] = forward
        out[f"{name}_forward_backward"] = forward_backward
    pool = {}
    out["max_pool2d_forward"] = lambda: F.max_pool2d(pool.setdefault("x", torch.rand(8, 64, 56, 56)), 2)
    return out


# bench/bench_attention.cpp's rows: name, B, H, T, d; causal.
ATTENTIONS = [("attention_causal_4x8x1024x64", 4, 8, 1024, 64),
              ("attention_causal_4x8x2048x64", 4, 8, 2048, 64)]


def attention_workloads():
    """bench/bench_attention.cpp: causal attention forward (no autograd) and forward+backward (the
    gradients of q, k and v of sum(y * y)), by torch's scaled_dot_product_attention where this
    torch has it (2.0 and later), else the eager formula a model of torch 1.x writes; inputs are
    made on first use."""
    F = torch.nn.functional

    def sdpa(q, k, v):
        if hasattr(F, "scaled_dot_product_attention"):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        t = q.shape[-2]
        s = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        return s.softmax(-1) @ v

    out = {}
    for name, b, h, t, d in ATTENTIONS:
        inputs = {}

        def made(b=b, h=h, t=t, d=d, inputs=inputs):
            if not inputs:
                for n in "qkv":
                    inputs[n] = torch.randn(b, h, t, d)
                    inputs[n + "g"] = inputs[n].clone().requires_grad_()
            return inputs

        def forward(made=made):
            i = made()
            with torch.no_grad():
                return sdpa(i["q"], i["k"], i["v"])

        def forward_backward(made=made):
            i = made()
            y = sdpa(i["qg"], i["kg"], i["vg"])
            return torch.autograd.grad((y * y).sum(), [i["qg"], i["kg"], i["vg"]])

        out[f"{name}_forward"] = forward
        out[f"{name}_forward_backward"] = forward_backward
    return out


def gpt_decode_workloads():
    """bench/bench_attention.cpp's gpt_decode_256: the GPT twin (model_twins.CharGpt, the
    model of examples/gpt.hpp without dropout) decodes 256 tokens greedily, one at a time,
    with a KV cache as a PyTorch user writes one: preallocated keys and values per layer,
    the new token's written at its position, its query attending to the positions so far."""
    model = None

    def decode():
        nonlocal model
        if model is None:
            model = model_twins.CharGpt().eval()
        m, d, heads = model, model_twins.CharGpt.dim, model_twins.CharGpt.heads
        hd = d // heads
        with torch.no_grad():
            caches = [(torch.zeros(1, heads, m.seq, hd), torch.zeros(1, heads, m.seq, hd)) for _ in m.blocks]
            token = 0
            for p in range(256):
                x = m.wte(torch.tensor([[token]])) + m.wpe(torch.tensor([p]))
                for b, (kc, vc) in zip(m.blocks, caches):
                    q, k, v = (t.reshape(1, 1, heads, hd).permute(0, 2, 1, 3) for t in b.attn(b.ln1(x)).split(d, 2))
                    kc[:, :, p] = k[:, :, 0]
                    vc[:, :, p] = v[:, :, 0]
                    s = q @ kc[:, :, :p + 1].transpose(-2, -1) * hd ** -0.5
                    x = x + b.proj((torch.softmax(s, -1) @ vc[:, :, :p + 1]).permute(0, 2, 1, 3).reshape(1, 1, d))
                    x = x + b.fc2(model.activation(b.fc1(b.ln2(x))))
                logits = m.ln_f(x) @ m.wte.weight.t()
                token = int(logits.argmax())

    # bench_attention's captured row replays loom's recorded step; torch has no such mode,
    # so its eager decode stands beside both rows.
    return {"gpt_decode_256": decode, "gpt_decode_256_captured": decode}


def matmul_workloads(lib, r):
    """The matmul workloads of bench/bench_matmul.cpp that need only a matmul (`lib.matmul`)."""
    out = {}
    for n in (512, 1024, 4096):
        a, b = r(n, n), r(n, n)
        out[f"matmul_{n}"] = lambda a=a, b=b: lib.matmul(a, b)
    for n in range(500, 521):
        a, b = r(n, n), r(n, n)
        out[f"matmul_sweep_{n}"] = lambda a=a, b=b: lib.matmul(a, b)
    x, w = r(1, 4096), r(4096, 4096)
    out["gemv_4096"] = lambda: lib.matmul(x, w)
    return out


def torch_layer_workloads(r):
    """The layer workloads of bench/bench_matmul.cpp: a fused linear layer, an MLP's SGD step, MLA forward."""
    x, w, b = r(256, 784), r(784, 512), r(512)
    out = {"linear_relu_256x784x512": lambda: torch.relu(torch.addmm(b, x, w))}
    for n in (1024, 4096):  # bfloat16 operands and result, as bench_matmul's matmul_bf16_<n>
        a16, b16 = r(n, n).bfloat16(), r(n, n).bfloat16()
        out[f"matmul_bf16_{n}"] = lambda a=a16, b=b16: torch.matmul(a, b)
    xh, wh, bh = r(128, 128), r(10, 128), r(10)
    out["classifier_head_128x128x10"] = lambda: torch.nn.functional.linear(xh, wh, bh)
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                              torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(mlp.parameters(), lr=0.01)
    xb, yb = r(256, 784), torch.randint(0, 10, (256,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(mlp(xb), yb).backward()
        opt.step()

    out["mlp_sgd_step_256"] = step
    for name, shape in (("mla_forward_small", (8, 20, 8, 64, 512, 128)),
                        ("mla_forward_big", (4, 512, 16, 64, 1024, 256))):
        out[name] = mla_forward(r, *shape)
    return out


def mla_forward(r, batch, seq, heads, head_dim, d_model, latent):
    """Multi-head latent attention's forward pass, as bench/bench_matmul.cpp writes it in loom."""
    hd = heads * head_dim
    x = r(batch, seq, d_model)
    w_dq, w_dkv = r(d_model, latent), r(d_model, latent)
    w_uq, w_uk, w_uv, w_o = r(latent, hd), r(latent, hd), r(latent, hd), r(hd, d_model)
    causal = torch.arange(seq).unsqueeze(0) <= torch.arange(seq).unsqueeze(1)
    heads_first = lambda t: t.reshape(batch, seq, heads, head_dim).permute(0, 2, 1, 3)

    def forward():
        with torch.no_grad():
            cq, ckv = x @ w_dq, x @ w_dkv
            q, k, v = heads_first(cq @ w_uq), heads_first(ckv @ w_uk), heads_first(ckv @ w_uv)
            s = (q @ k.transpose(-1, -2)) * head_dim ** -0.5
            a = torch.softmax(s.masked_fill(~causal, float("-inf")), -1) @ v
            return a.permute(0, 2, 1, 3).reshape(batch, seq, hd) @ w_o

    return forward


def numpy_workloads():
    rng = np.random.default_rng(0)
    r = lambda *shape: rng.standard_normal(shape, dtype=np.float32)
    a1, b1 = r(1024, 1024), r(1024, 1024)
    a, b, c = r(4096, 4096), r(4096, 4096), r(4096, 4096)
    v, s = r(1 << 24), r(4096, 1024)
    w = r(1 << 22) * np.float32(3e9)

    def softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def log_softmax(x):
        m = x - x.max(-1, keepdims=True)
        return m - np.log(np.exp(m).sum(-1, keepdims=True))

    return {
        "add_1024x1024": lambda: a1 + b1,
        "add_4096x4096": lambda: a + b,
        "relu_exp_4096x4096": lambda: np.exp(np.maximum(a * b + c, 0)),
        "cast_f32_i32_4M": lambda: w.astype(np.int32),
        "sum_16M": lambda: v.sum(),
        "sum_axis1_4096x4096": lambda: a.sum(1),
        "sum_axis0_4096x4096": lambda: a.sum(0),
        "softmax_4096x1024": lambda: softmax(s),
        "log_softmax_4096x1024": lambda: log_softmax(s),
        "exp_4096x4096": lambda: np.exp(a),
        "tanh_4096x4096": lambda: np.tanh(a),
        "sigmoid_4096x4096": lambda: 1 / (1 + np.exp(-a)),
        "sin_4096x4096": lambda: np.sin(a),
        "cos_4096x4096": lambda: np.cos(a),
        **matmul_workloads(np, r),
    }


def blas():
    """The BLAS behind numpy's and torch's matmuls and the core its kernels are for
    (OpenBLAS's architecture: Haswell is AVX2, SkylakeX and Cooperlake AVX-512). Debian's
    libblas.so.3 is netlib's reference BLAS unless an optimised one (libopenblas0-pthread)
    is installed."""
    found = [i for i in threadpool_info() if i["user_api"] == "blas"]
    known = [f"{i['internal_api']} {i.get('version') or ''} {i.get('architecture') or ''}".strip() for i in found]
    cores = sorted({i.get("architecture") or "unknown" for i in found})
    return ", ".join(known) or "reference BLAS (no OpenBLAS, MKL or BLIS loaded)", ", ".join(cores) or "reference"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--min-time", type=float, default=0.5, help="seconds per workload")
    p.add_argument("--filter", default="", help="only workloads whose name matches this regular expression")
    p.add_argument("--peers", default="torch,numpy", help="which peers to run: torch, numpy or both")
    args = p.parse_args()
    peers = args.peers.split(",")
    torch.set_num_threads(args.threads)
    blas_name, blas_core = blas()
    out = {"threads": args.threads, "torch": {}, "numpy": {}, "torch_losses": {},
           "torch_isa": model_twins.cpu_capability(), "blas": blas_name, "blas_core": blas_core}
    with threadpool_limits(limits=args.threads):
        for peer, workloads in (("torch", torch_workloads), ("numpy", numpy_workloads)):
            if peer not in peers:
                continue
            for name, fn in workloads().items():
                if re.search(args.filter, name):
                    out[peer][name] = median_ms(fn, args.min_time)
        for twin in model_twins.MODELS:
            if "torch" in peers and re.search(args.filter, twin.name):
                step, out["torch_losses"][twin.name] = model_twins.training_step(twin)
                out["torch"][twin.name] = median_ms(step, args.min_time)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
