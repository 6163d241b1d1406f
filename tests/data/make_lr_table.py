#!/usr/bin/env python3
"""Writes lr_table.json: the learning rate PyTorch's schedulers set after
construction and after each step(), for the cases tests/src/test_lr_scheduler.cpp
replays. Run once with PyTorch installed (/usr/bin/python3 make_lr_table.py);
the test reads the committed table and never needs torch."""
import json

import torch
from torch.optim import SGD
from torch.optim.lr_scheduler import (ChainedScheduler, CosineAnnealingLR, LinearLR, OneCycleLR, SequentialLR,
                                      StepLR)


def opt(lr):
    return SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr, momentum=0.9)


def run(o, step, steps):
    lrs = [o.param_groups[0]["lr"]]
    for _ in range(steps):
        o.step()
        step()
        lrs.append(o.param_groups[0]["lr"])
    return lrs


cases = {}
o = opt(0.1); s = StepLR(o, step_size=3, gamma=0.5); cases["step"] = run(o, s.step, 10)
o = opt(0.1); s = LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=4); cases["linear"] = run(o, s.step, 8)
o = opt(0.1); s = CosineAnnealingLR(o, T_max=5, eta_min=0.01); cases["cosine"] = run(o, s.step, 14)
o = opt(0.1); s = OneCycleLR(o, max_lr=0.5, total_steps=12, cycle_momentum=False); cases["onecycle"] = run(o, s.step, 11)
o = opt(0.1)
s = OneCycleLR(o, max_lr=0.5, total_steps=10, pct_start=0.25, anneal_strategy="linear", div_factor=10,
               final_div_factor=100, three_phase=True, cycle_momentum=False)
cases["onecycle_three_phase_linear"] = run(o, s.step, 9)
o = opt(0.1)
s = SequentialLR(o, [LinearLR(o, start_factor=0.1, total_iters=3), CosineAnnealingLR(o, T_max=6)], milestones=[3])
cases["sequential_warmup_cosine"] = run(o, s.step, 10)
o = opt(0.1)
s = ChainedScheduler([LinearLR(o, start_factor=0.5, total_iters=2), StepLR(o, step_size=2, gamma=0.5)])
cases["chained_linear_step"] = run(o, s.step, 8)

with open("lr_table.json", "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f, indent=1)
