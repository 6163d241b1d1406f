#!/usr/bin/env python3
"""PyTorch's twin of examples/fashion_mnist --model cnn --epochs 1: the same network (conv, batch
norm, ReLU and max-pool twice, dropout, two linear layers), Adam at 1e-3, shuffled batches of 64
from Debian's dataset-fashion-mnist, normalised as the example does. Prints the training epoch's
wall time (the batches' assembly included) and the mean loss as JSON. bench/compare runs it.
Run: python3 bench/peers/fashion_cnn_epoch.py --threads 2"""
import argparse
import gzip
import json
import time

import numpy as np
import torch
from torch import nn

DATA = "/usr/share/datasets/fashion-mnist"


def idx(name, offset):
    with gzip.open(f"{DATA}/{name}", "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    images = torch.from_numpy(idx("train-images-idx3-ubyte.gz", 16).copy()).reshape(-1, 1, 28, 28)
    labels = torch.from_numpy(idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64))
    model = nn.Sequential(nn.Conv2d(1, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    start = time.perf_counter()
    order = torch.randperm(images.shape[0])
    total, steps = 0.0, 0
    for b in range(0, images.shape[0], args.batch_size):
        batch = order[b:b + args.batch_size]
        x = (images[batch].float() / 255.0 - 0.2860) / 0.3530
        loss = loss_fn(model(x), labels[batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item()
        steps += 1
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "images": int(images.shape[0]), "mean_loss": total / steps,
                      "torch": torch.__version__, "isa": torch.backends.cpu.get_cpu_capability()
                      if hasattr(torch.backends, "cpu") else "?"}))


if __name__ == "__main__":
    main()
