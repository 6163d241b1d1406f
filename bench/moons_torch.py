"""PyTorch's steps per second on the moons loop of bench_train (same sizes:
200 points, MLP 2-16-16-2, full-batch cross-entropy). Ad hoc, for comparison:
    python3 bench/moons_torch.py [threads]
"""
import math
import sys
import time

import torch


def moons(n=200, noise=0.1, seed=42):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(n, generator=g, dtype=torch.float64) * math.pi
    upper = torch.arange(n) < n // 2
    x = torch.where(upper, torch.cos(t), 1 - torch.cos(t))
    y = torch.where(upper, torch.sin(t), 0.5 - torch.sin(t))
    pts = torch.stack([x, y], 1) + noise * torch.randn(n, 2, generator=g, dtype=torch.float64)
    return pts.float(), (~upper).long()


def steps_per_second(make_opt, seconds=2.0):
    x, y = moons()
    model = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16),
                                torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = make_opt(model.parameters())

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(50):
        step()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    return n / (time.perf_counter() - t0)


if __name__ == "__main__":
    torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"moons_step/sgd   {steps_per_second(lambda p: torch.optim.SGD(p, lr=0.5)):10.0f} steps/s")
    print(f"moons_step/adam  {steps_per_second(lambda p: torch.optim.Adam(p, lr=1e-2)):10.0f} steps/s")
