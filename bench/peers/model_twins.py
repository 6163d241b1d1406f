"""The models of bench/models/*.hpp in PyTorch, as a PyTorch user writes them, same names and shapes.

Each twin has the same parameters in the same order, initialised with the same numbers
(bench/models/model.hpp's uniform_stream and init_parameters, recomputed here with
numpy's uint64 arithmetic), the same batch and the same optimizer, so its first loss is
loom's. Where PyTorch has the op loom's program builds by hand, the twin uses PyTorch's
(F.gelu(approximate="tanh"), nn.Conv2d, F.max_pool2d, nn.LSTM): the fastest program a
PyTorch user would write. Attention is written by hand on both sides (PyTorch 1.13 has
no scaled_dot_product_attention).
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

WARMUP_STEPS = 20


def uniform_stream(n, stream):
    """bench/models/model.hpp's uniform_stream: splitmix64's finaliser of a counter."""
    h = np.arange(1, n + 1, dtype=np.uint64) + np.uint64(stream * 0x9E3779B97F4A7C15 % 2 ** 64)
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return (h >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def uniform_tensor(shape, stream, bound):
    u = uniform_stream(math.prod(shape), stream)
    return torch.from_numpy((bound * (2 * u - 1)).astype(np.float32)).reshape(shape)


def label_tensor(shape, stream, classes):
    return torch.from_numpy((uniform_stream(math.prod(shape), stream) * classes).astype(np.int64)).reshape(shape)


def init_parameters(model, loom_shapes=None, to_torch=None):
    """bench/models/model.hpp's init_parameters. A parameter whose loom layout differs gets
    its values in loom's shape (`loom_shapes`) and, if its order differs too, `to_torch`."""
    loom_shapes, to_torch = loom_shapes or {}, to_torch or {}
    with torch.no_grad():
        for k, (name, p) in enumerate(model.named_parameters()):
            if name.rsplit(".", 1)[0].rsplit(".", 1)[-1].startswith("ln"):
                continue
            shape = loom_shapes.get(name, tuple(p.shape))
            bound = 1 / math.sqrt(shape[-1]) if len(shape) >= 2 else 0.05
            values = uniform_tensor(shape, k, bound)
            p.copy_(to_torch.get(name, lambda v: v)(values).reshape(p.shape))


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


class MlpBlock(nn.Module):
    name = "mlp_block_step"

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(128, 512), nn.Linear(512, 128)
        init_parameters(self)

    def batch(self):
        return uniform_tensor((32, 64, 128), 1000, 1), uniform_tensor((32, 64, 128), 1001, 1)

    def loss(self, x, target):
        return F.mse_loss(self.fc2(gelu_tanh(self.fc1(x))), target)

    def optimizer(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


class ResidualStack(nn.Module):
    name = "residual_stack_step"

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln, self.fc1, self.fc2 = nn.LayerNorm(256), nn.Linear(256, 1024), nn.Linear(1024, 256)

        def forward(self, x):
            return x + self.fc2(F.relu(self.fc1(self.ln(x))))

    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[self.Block() for _ in range(10)])
        init_parameters(self)

    def batch(self):
        return uniform_tensor((64, 256), 1000, 1), uniform_tensor((64, 256), 1001, 1)

    def loss(self, x, target):
        return F.mse_loss(self.blocks(x), target)

    def optimizer(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


class Lstm(nn.Module):
    name = "lstm_step"

    def __init__(self):
        super().__init__()
        self.lstm, self.head = nn.LSTM(64, 128), nn.Linear(128, 10)
        init_parameters(self)

    def batch(self):
        return uniform_tensor((32, 16, 64), 1000, 1), label_tensor((16,), 1002, 10)

    def loss(self, x, labels):
        _, (h, _) = self.lstm(x)
        return F.cross_entropy(self.head(h[-1]), labels)

    def optimizer(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


class CharBlock(nn.Module):
    """bench/models/transformer_block.hpp: the character models' pre-norm block, attention by
    hand (PyTorch 1.13 has no scaled_dot_product_attention)."""

    def __init__(self, dim):
        super().__init__()
        self.ln1, self.attn, self.proj = nn.LayerNorm(dim), nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.ln2, self.fc1, self.fc2 = nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def attention(self, x, heads, mask):
        B, T, d = x.shape
        q, k, v = (t.reshape(B, T, heads, d // heads).permute(0, 2, 1, 3) for t in self.attn(x).split(d, dim=2))
        scores = q @ k.transpose(-2, -1) * (d // heads) ** -0.5 + mask
        return self.proj((torch.softmax(scores, -1) @ v).permute(0, 2, 1, 3).reshape(B, T, d))


def causal_mask(seq):
    """[seq, seq]: 0 where a query may see a key, -inf after it."""
    after = torch.arange(seq).unsqueeze(0) > torch.arange(seq).unsqueeze(1)
    return torch.zeros(seq, seq).masked_fill(after, float("-inf"))


class CharTransformer(nn.Module):
    name = "char_transformer_step"
    batch_size, seq, dim, heads, layers, vocab = 32, 64, 128, 4, 2, 65
    tied_head = False  # CharGpt's head is the token embedding

    def __init__(self):
        super().__init__()
        d = self.dim
        self.wte, self.wpe = nn.Embedding(self.vocab, d), nn.Embedding(self.seq, d)
        self.blocks = nn.ModuleList([CharBlock(d) for _ in range(self.layers)])
        self.ln_f = nn.LayerNorm(d)
        if not self.tied_head:
            self.head = nn.Linear(d, self.vocab)
        self.register_buffer("mask", causal_mask(self.seq))
        self.register_buffer("positions", torch.arange(self.seq))
        init_parameters(self)

    @staticmethod
    def activation(x):
        return gelu_tanh(x)

    def batch(self):
        return (label_tensor((self.batch_size, self.seq), 1002, self.vocab),
                label_tensor((self.batch_size * self.seq,), 1003, self.vocab))

    def loss(self, tokens, targets):
        x = self.wte(tokens) + self.wpe(self.positions)
        for b in self.blocks:
            x = x + b.attention(b.ln1(x), self.heads, self.mask)
            x = x + b.fc2(self.activation(b.fc1(b.ln2(x))))
        h = self.ln_f(x)
        logits = h @ self.wte.weight.t() if self.tied_head else self.head(h)
        return F.cross_entropy(logits.reshape(-1, self.vocab), targets)

    def optimizer(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


class CharGpt(CharTransformer):
    """bench/models/char_gpt.hpp: the GPT of examples/gpt.hpp without dropout: the exact GELU,
    the head tied to the token embedding, and a step with clipping and AdamW over two
    parameter groups (weight decay on the matrices only)."""
    name = "gpt_step"
    batch_size, seq, dim, heads, layers, vocab = 8, 256, 256, 4, 4, 114
    tied_head, max_grad_norm = True, 1.0
    activation = staticmethod(F.gelu)

    def optimizer(self):
        params = list(self.parameters())
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99))


class ConvNet(nn.Module):
    name = "conv_net_step"

    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(1, 32, 3), nn.Linear(13 * 13 * 32, 10)
        # loom's features are (row, column, channel), PyTorch's (channel, row, column).
        init_parameters(self, loom_shapes={"conv.weight": (32, 9)},
                        to_torch={"fc.weight": lambda w: w.reshape(10, 13, 13, 32).permute(0, 3, 1, 2)})

    def batch(self):
        return uniform_tensor((64, 1, 28, 28), 1000, 1), label_tensor((64,), 1002, 10)

    def loss(self, x, labels):
        h = F.max_pool2d(F.relu(self.conv(x)), 2)
        return F.cross_entropy(self.fc(h.flatten(1)), labels)

    def optimizer(self):
        return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)


class FashionMlp(nn.Module):
    name = "fashion_mlp_step"

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 256), nn.Linear(256, 128), nn.Linear(128, 10)
        init_parameters(self)

    def batch(self):
        return uniform_tensor((128, 784), 1000, 1), label_tensor((128,), 1002, 10)

    def loss(self, x, labels):
        return F.cross_entropy(self.fc3(F.relu(self.fc2(F.relu(self.fc1(x))))), labels)

    def optimizer(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


MODELS = (MlpBlock, ResidualStack, Lstm, CharTransformer, CharGpt, ConvNet, FashionMlp)


def training_step(model_class):
    """A warmed-up training step of a fresh twin, and its losses at the first and the
    twentieth warm-up step (bench_models' loss_1 and loss_20)."""
    model = model_class()
    opt, batch = model.optimizer(), model.batch()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model.loss(*batch)
        loss.backward()
        if getattr(model, "max_grad_norm", None):
            torch.nn.utils.clip_grad_norm_(model.parameters(), model.max_grad_norm)
        opt.step()
        return loss

    losses = [step().item() for _ in range(WARMUP_STEPS)]
    return step, (losses[0], losses[-1])


def cpu_capability():
    """The vector ISA PyTorch's kernels run (its `CPU capability usage`)."""
    if hasattr(torch.backends, "cpu") and hasattr(torch.backends.cpu, "get_cpu_capability"):
        return torch.backends.cpu.get_cpu_capability()
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage" in line:
            return line.split(":", 1)[1].strip()
    return "unknown"
