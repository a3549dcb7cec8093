"""A small GPT-style model trained on random bytes, to record real PyTorch
allocation traces (record_alloc.c, `make record-torch-traces`). One case per
run; each marks an iteration boundary after every optimizer step:

  fixed       batch 8, sequence 64 every step: healthy
  varying     batch 4..12 and sequence 16..64 drawn every step: healthy; the
              model keeps a causal mask per sequence length seen and a
              position table made again larger when a longer sequence comes
              (bounded per-shape caches, as real models have)
  eval-kept   a validation batch scored every step without torch.no_grad(),
              its loss kept in a list: each kept loss holds its graph and
              the forward pass's activations (a retained graph)
  eval-sum    the same, summed with `running_loss += loss` (a retained graph)
  train-sum   `running_loss += loss` on the training loss, after backward():
              backward has freed the saved tensors, so no tensor memory grows
  varying-big varying on a larger model (3 blocks, 128 channels, sequences
              to 192, batch 4..16): a peak of ~100-200 MiB that moves with
              the shapes, for the allocator's reserved-memory figures

The memory fixes, measured (cudalloc predicts each one's peak from the plain
run; these runs are what it is checked against): one model, the same batches,
FIX_STEPS optimizer steps, the gradients set to None before each:

  fix-plain       forward, backward, AdamW step
  fix-accum2      gradient accumulation: 2 micro-batches of B/2, loss / 2 each
  fix-accum4      4 micro-batches of B/4, loss / 4 each
  fix-bf16        the forward under torch.autocast('cpu', dtype=torch.bfloat16)
  fix-checkpoint  torch.utils.checkpoint.checkpoint around each block

MODEL (default a) picks the fix cases' model from FIX_MODELS: L blocks, C
channels, NH heads, sequence T, batch B.

  RECORD_ALLOC_CSV=out.csv LD_PRELOAD=record_alloc.so python3 train_gpt.py CASE

SEED=N (default 0) draws other weights, data and shapes: the committed traces
use 0; other seeds give more traces of the same kind to validate a policy on.
"""
import ctypes
import math
import os
import random
import sys

import torch
import torch.utils.checkpoint
import torch.nn as nn
import torch.nn.functional as F

CASES = ("fixed", "varying", "eval-kept", "eval-sum", "train-sum", "varying-big")
FIXES = ("fix-plain", "fix-accum2", "fix-accum4", "fix-bf16", "fix-checkpoint")
FIX_STEPS = 3
FIX_MODELS = {
    "a": dict(L=4, C=64, NH=4, T=64, B=16),
    "b": dict(L=6, C=96, NH=6, T=48, B=12),
    "c": dict(L=3, C=128, NH=8, T=96, B=8),
    "d": dict(L=8, C=64, NH=2, T=32, B=32),
    "e": dict(L=4, C=64, NH=8, T=128, B=4),
    "f": dict(L=2, C=256, NH=4, T=32, B=16),
    "g": dict(L=5, C=80, NH=5, T=40, B=12),
    "h": dict(L=2, C=192, NH=3, T=96, B=8),
}
STEPS = 50
V, C, NH, L, TMAX = 256, 64, 4, 1, 64
BIG = dict(C=128, NH=4, L=3, TMAX=192, STEPS=40)  # varying-big: the model's sizes


def step_mark():
    """An iteration boundary in the recorded trace (record_alloc.c)."""
    try:
        ctypes.CDLL(None).record_alloc_step()
    except AttributeError:
        pass  # not recording


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.out = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x, mask):
        B, T, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, NH, C // NH).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // NH) + mask
        y = F.softmax(att, dim=-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        nn.init.normal_(self.wte.weight, std=0.02)
        self.wpe = nn.Parameter(torch.randn(TMAX, C) * 0.02)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.masks = {}      # per sequence length: bounded by the lengths seen
        self.positions = None  # indices 0..T-1, made again when T grows

    def mask(self, T):
        if T not in self.masks:
            self.masks[T] = torch.full((T, T), float("-inf")).triu(1)
        return self.masks[T]

    def forward(self, idx, targets, checkpoint=False):
        B, T = idx.shape
        if self.positions is None or self.positions.numel() < T:
            self.positions = torch.arange(T)
        x = self.wte(idx) + self.wpe[self.positions[:T]]
        mask = self.mask(T)
        for blk in self.blocks:
            if checkpoint:
                x = torch.utils.checkpoint.checkpoint(blk, x, mask)
            else:
                x = blk(x, mask)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T))


def fix_run(case, seed):
    """One of the fix cases: FIX_STEPS optimizer steps of the same batches."""
    global C, NH, L, TMAX
    name = os.environ.get("MODEL", "a")
    if name not in FIX_MODELS:
        sys.exit("MODEL: expected one of " + ", ".join(FIX_MODELS))
    shape = FIX_MODELS[name]
    C, NH, L, TMAX, B = shape["C"], shape["NH"], shape["L"], shape["T"], shape["B"]
    accum = {"fix-accum2": 2, "fix-accum4": 4}.get(case, 1)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(FIX_STEPS):
        data = torch.randint(0, V, (B, TMAX + 1))
        opt.zero_grad(set_to_none=True)
        mb = B // accum
        for i in range(accum):
            micro = data[i * mb:(i + 1) * mb]
            if case == "fix-bf16":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = model(micro[:, :-1], micro[:, 1:])
            else:
                loss = model(micro[:, :-1], micro[:, 1:], checkpoint=case == "fix-checkpoint")
            (loss / accum).backward()
        opt.step()
        step_mark()
    print(f"{case} (model {name}, seed {seed}): {FIX_STEPS} steps, last loss {loss.item():.3f}")


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES + FIXES:
        sys.exit("usage: train_gpt.py " + "|".join(CASES + FIXES))
    case = sys.argv[1]
    global C, NH, L, TMAX, STEPS
    if case == "varying-big":
        C, NH, L, TMAX, STEPS = BIG["C"], BIG["NH"], BIG["L"], BIG["TMAX"], BIG["STEPS"]
    seed = int(os.environ.get("SEED", "0"))
    torch.manual_seed(seed)
    rng = random.Random(seed)
    torch.set_num_threads(1)
    if case in FIXES:
        return fix_run(case, seed)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    val = torch.randint(0, V, (4, 32))
    kept, running_loss = [], 0.0
    for step in range(STEPS):
        if case == "varying":
            B, T = rng.randint(4, 12), rng.choice(range(16, TMAX + 1, 8))
        elif case == "varying-big":
            B, T = rng.randint(4, 16), rng.choice(range(32, TMAX + 1, 16))
        else:
            B, T = 8, TMAX
        data = torch.randint(0, V, (B, T + 1))
        loss = model(data[:, :-1], data[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if case == "train-sum":
            running_loss += loss
        if case in ("eval-kept", "eval-sum"):
            val_loss = model(val[:, :-1], val[:, 1:])  # the bug: no torch.no_grad()
            if case == "eval-kept":
                kept.append(val_loss)
            else:
                running_loss += val_loss
        step_mark()
    print(f"{case}: {STEPS} steps, last loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
