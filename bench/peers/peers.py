#!/usr/bin/python3
"""The workloads of bench/bench_kernels.cpp in PyTorch and numpy, same names and sizes.

Prints one JSON object: {"threads": n, "torch": {workload: ms}, "numpy": {workload: ms}},
each time the median of repeated runs on realized inputs. bench/compare runs it beside
loom; the peers are never a build or test dependency. Run torch with
GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (bench/compare sets it) so its large buffers get
huge pages as loom's do.
"""
import argparse
import json
import statistics
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits


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
    return {
        "add_1024x1024": lambda: a1 + b1,
        "add_4096x4096": lambda: a + b,
        "relu_exp_4096x4096": lambda: torch.relu(a * b + c).exp(),
        "sum_16M": lambda: v.sum(),
        "sum_axis1_4096x4096": lambda: a.sum(1),
        "sum_axis0_4096x4096": lambda: a.sum(0),
        "softmax_4096x1024": lambda: torch.softmax(s, -1),
        "log_softmax_4096x1024": lambda: torch.log_softmax(s, -1),
        "exp_4096x4096": lambda: a.exp(),
        "tanh_4096x4096": lambda: a.tanh(),
        "sigmoid_4096x4096": lambda: torch.sigmoid(a),
    }


def numpy_workloads():
    rng = np.random.default_rng(0)
    r = lambda *shape: rng.standard_normal(shape, dtype=np.float32)
    a1, b1 = r(1024, 1024), r(1024, 1024)
    a, b, c = r(4096, 4096), r(4096, 4096), r(4096, 4096)
    v, s = r(1 << 24), r(4096, 1024)

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
        "sum_16M": lambda: v.sum(),
        "sum_axis1_4096x4096": lambda: a.sum(1),
        "sum_axis0_4096x4096": lambda: a.sum(0),
        "softmax_4096x1024": lambda: softmax(s),
        "log_softmax_4096x1024": lambda: log_softmax(s),
        "exp_4096x4096": lambda: np.exp(a),
        "tanh_4096x4096": lambda: np.tanh(a),
        "sigmoid_4096x4096": lambda: 1 / (1 + np.exp(-a)),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--min-time", type=float, default=0.5, help="seconds per workload")
    p.add_argument("--filter", default="", help="only workloads whose name contains this")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    out = {"threads": args.threads, "torch": {}, "numpy": {}}
    with threadpool_limits(limits=args.threads):
        for peer, workloads in (("torch", torch_workloads()), ("numpy", numpy_workloads())):
            for name, fn in workloads.items():
                if args.filter in name:
                    out[peer][name] = median_ms(fn, args.min_time)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
