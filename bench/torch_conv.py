#!/usr/bin/env python3
"""PyTorch's side of bench/bench_conv.cpp on the same shapes, 2 threads: conv2d forward and
forward+backward (both gradients of sum(y * y)), and max_pool2d. Run: python3 bench/torch_conv.py"""
import time
import torch
import torch.nn.functional as F

torch.set_num_threads(2)
CONVS = [(64, 64, 56, 64, 3, 1, 1, 1), (64, 3, 224, 64, 7, 2, 3, 1), (64, 128, 28, 128, 3, 1, 1, 128),
         (8, 64, 56, 64, 3, 1, 1, 1), (8, 3, 224, 64, 7, 2, 3, 1), (8, 128, 28, 128, 3, 1, 1, 128)]


def best(fn, reps=5):
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times) * 1e3


for i, (n, c, hw, out, k, s, p, g) in enumerate(CONVS):
    x = torch.rand(n, c, hw, hw)
    w = torch.rand(out, c // g, k, k)
    with torch.no_grad():
        fwd = best(lambda: F.conv2d(x, w, None, s, p, 1, g))
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()

    def step():
        y = F.conv2d(xg, wg, None, s, p, 1, g)
        torch.autograd.grad((y * y).sum(), [xg, wg])
    print(f"conv2d [{n},{c},{hw},{hw}] x [{out},{c // g},{k},{k}] stride {s} pad {p} groups {g}: forward {fwd:.2f} ms, forward+backward {best(step):.2f} ms")
x = torch.rand(8, 64, 56, 56)
print(f"max_pool2d: forward {best(lambda: F.max_pool2d(x, 2)):.2f} ms")
