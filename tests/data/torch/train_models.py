"""Four model families trained on random data, each plainly and under each
memory fix, to check cudalloc's predictions of the fixes (issue 28) on models
its rules were not tuned on (train_gpt.py's fix cases are the tuned ones).
Recorded by record_alloc.c (`make record-torch-models`): sizes only.

  FAMILY  resnet  a small ResNet-style CNN: a stem, 3 stages of 2 residual
                  blocks (16, 32, 64 channels, the first block of stages 2
                  and 3 downsamples with a 1x1 shortcut), 32x32 images
          lstm    a language model: embedding 64, two 1-layer nn.LSTM of 192
                  units (one module per layer, so each can be checkpointed),
                  256-way head, 24 timesteps
          lstm1   the same with one nn.LSTM of 2 layers: its timesteps and
                  layers all run inside one call (no unit to checkpoint)
          mlp     parameter-heavy: 512 -> 1536 -> 1536 -> 1536 -> 10, batch 64
          tx      a wide 2-layer encoder (nn.TransformerEncoderLayer, 128
                  channels, 4 heads, feed-forward 512) with an 8192-class head
  ZERO    where the gradients are reset: start (opt.zero_grad(set_to_none=
          True) before the forward), end (after opt.step(), PyTorch 2's
          default placement), inplace (zero_grad(set_to_none=False) at the
          start: the gradients are zeroed, never freed)

Cases: fix-plain, fix-accum2, fix-accum4 (k micro-batches of B/k, loss / k,
one optimizer step), fix-bf16 (the forward under torch.autocast('cpu',
dtype=torch.bfloat16)), fix-checkpoint (torch.utils.checkpoint around each
unit, use_reentrant=False: a residual block, an LSTM layer, a hidden layer,
an encoder layer), fix-all (the three together: 4 micro-batches, autocast,
checkpointing).
STEPS (3) optimizer steps on the same batches, AdamW, an iteration boundary
after each step.

  FAMILY=lstm ZERO=end RECORD_ALLOC_CSV=out.csv LD_PRELOAD=record_alloc.so \\
      python3 train_models.py fix-accum2
"""
import ctypes
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

CASES = ("fix-plain", "fix-accum2", "fix-accum4", "fix-bf16", "fix-checkpoint", "fix-all")
STEPS = 3


def step_mark():
    """An iteration boundary in the recorded trace (record_alloc.c)."""
    try:
        ctypes.CDLL(None).record_alloc_step()
    except AttributeError:
        pass  # not recording


def run_units(units, x, checkpoint):
    for u in units:
        x = torch.utils.checkpoint.checkpoint(u, x, use_reentrant=False) if checkpoint else u(x)
    return x


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (self.short(x) if self.short is not None else x))


class ResNet(nn.Module):
    B = 32

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        blocks, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.ModuleList(blocks)
        self.head = nn.Linear(64, 10)

    def batch(self, g):
        return torch.randn(self.B, 3, 32, 32, generator=g), torch.randint(0, 10, (self.B,), generator=g)

    def forward(self, x, y, checkpoint=False):
        x = run_units(self.blocks, self.stem(x), checkpoint)
        return F.cross_entropy(self.head(x.mean((2, 3))), y)


class LSTMLM(nn.Module):
    B, T, V, E, H = 16, 24, 256, 64, 192

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(self.V, self.E)
        self.layers = nn.ModuleList([nn.LSTM(self.E, self.H, batch_first=True),
                                     nn.LSTM(self.H, self.H, batch_first=True)])
        self.head = nn.Linear(self.H, self.V)

    def batch(self, g):
        d = torch.randint(0, self.V, (self.B, self.T + 1), generator=g)
        return d[:, :-1], d[:, 1:]

    def forward(self, x, y, checkpoint=False):
        units = [lambda h, m=m: m(h)[0] for m in self.layers]
        h = run_units(units, self.emb(x), checkpoint)
        return F.cross_entropy(self.head(h).reshape(-1, self.V), y.reshape(-1))


class LSTM1(LSTMLM):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.LSTM(self.E, self.H, num_layers=2, batch_first=True)])


class MLP(nn.Module):
    B, D, H = 64, 512, 1536

    def __init__(self):
        super().__init__()
        dims = (self.D, self.H, self.H, self.H)
        self.hidden = nn.ModuleList(nn.Sequential(nn.Linear(a, b), nn.ReLU()) for a, b in zip(dims, dims[1:]))
        self.head = nn.Linear(self.H, 10)

    def batch(self, g):
        return torch.randn(self.B, self.D, generator=g), torch.randint(0, 10, (self.B,), generator=g)

    def forward(self, x, y, checkpoint=False):
        return F.cross_entropy(self.head(run_units(self.hidden, x, checkpoint)), y)


class Encoder(nn.Module):
    B, T, C, K = 8, 64, 128, 8192

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(256, self.C)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(self.C, 4, 4 * self.C, dropout=0.0, batch_first=True) for _ in range(2))
        self.head = nn.Linear(self.C, self.K)

    def batch(self, g):
        return torch.randint(0, 256, (self.B, self.T), generator=g), torch.randint(0, self.K, (self.B, self.T), generator=g)

    def forward(self, x, y, checkpoint=False):
        h = run_units(self.layers, self.emb(x), checkpoint)
        return F.cross_entropy(self.head(h).reshape(-1, self.K), y.reshape(-1))


FAMILIES = {"resnet": ResNet, "lstm": LSTMLM, "lstm1": LSTM1, "mlp": MLP, "tx": Encoder}
ZEROS = ("start", "end", "inplace")


def main():
    family, zero = os.environ.get("FAMILY", "tx"), os.environ.get("ZERO", "end")
    if len(sys.argv) != 2 or sys.argv[1] not in CASES or family not in FAMILIES or zero not in ZEROS:
        sys.exit("usage: FAMILY=" + "|".join(FAMILIES) + " ZERO=" + "|".join(ZEROS) +
                 " train_models.py " + "|".join(CASES))
    case = sys.argv[1]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = FAMILIES[family]()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = model.batch(torch.Generator().manual_seed(1))
    accum = {"fix-accum2": 2, "fix-accum4": 4, "fix-all": 4}.get(case, 1)
    mb = x.shape[0] // accum
    for step in range(STEPS):
        if zero != "end":
            opt.zero_grad(set_to_none=zero == "start")
        for i in range(accum):
            xs, ys = x[i * mb:(i + 1) * mb], y[i * mb:(i + 1) * mb]
            if case in ("fix-bf16", "fix-all"):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = model(xs, ys, checkpoint=case == "fix-all")
            else:
                loss = model(xs, ys, checkpoint=case == "fix-checkpoint")
            (loss / accum).backward()
        opt.step()
        if zero == "end":
            opt.zero_grad(set_to_none=True)
        step_mark()
    print(f"{family} zero={zero} {case}: {STEPS} steps, last loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
