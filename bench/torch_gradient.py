#!/usr/bin/python3
# PyTorch's side of bench/bench_gradient.cpp, for an ad-hoc comparison on the same
# machine (never a test dependency): /usr/bin/python3 bench/torch_gradient.py
import time

import torch


def best_ms(fn, min_time=0.5):
    fn()  # warm up
    times, start = [], time.perf_counter()
    while time.perf_counter() - start < min_time or len(times) < 5:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return 1e3 * times[len(times) // 2]  # the median


def input(n):
    return ((torch.arange(n) % 97).float() * 0.01 - 0.5).requires_grad_()


def forward_backward(x, f):
    x.grad = None
    loss = f(x)
    loss.backward()
    loss.item()
    return x.grad


for name, f in [("sum", lambda x: x.sum()), ("l2_norm", lambda x: x.square().sum().sqrt())]:
    for n in ([1 << 24] if name == "sum" else [1 << 20, 1 << 24]):
        x = input(n)
        with torch.no_grad():
            fwd = best_ms(lambda: f(x).item())
        both = best_ms(lambda: forward_backward(x, f))
        print(f"torch {name}/{n}: forward {fwd:.3f} ms, forward+backward {both:.3f} ms, "
              f"ratio {both / fwd:.2f} (threads {torch.get_num_threads()})")
