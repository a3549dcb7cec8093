"""A Python training loop told of its leak while it runs (tests/preload/live.sh).

    live_prog.py LEAK_STEPS STEPS [--detect]

Device memory through ctypes -> libcudart's cudaMalloc, as PyTorch's tensors
reach it; cudalloc.step() ends each step. keep_metric keeps 1 MiB a step for
the first LEAK_STEPS steps, then nothing more: cudalloc.on_leak gets the
finding ("leak") and later its end ("stopped"). Prints each event as
"event EVENT ITERATION TITLE", then memory_summary(). --detect: no marks, and
100 small activations a step, as a real model has: the iterations are found
in the allocation pattern (tried from 8192 events on), and cudalloc's own
thread judges them once a second, so the leak is told while the loop runs,
at an iteration the test cannot know in advance."""
import ctypes
import sys
import time

import cudalloc

cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaFree.argtypes = [ctypes.c_void_p]
MiB = 1 << 20
leak_steps, steps = int(sys.argv[1]), int(sys.argv[2])
detect = "--detect" in sys.argv
kept, events = [], []


@cudalloc.on_leak
def told(finding):
    events.append(finding)
    print("event %s %d %s" % (finding["event"], finding["iteration"], finding["title"]), flush=True)


def alloc(n):
    p = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(p), n) == 0
    return p


def keep_metric(step):
    if step < leak_steps:
        kept.append(alloc(MiB))  # the leak


def train_step(step):
    acts = [alloc(4 * MiB), alloc(2 * MiB)] + [alloc(4096) for _ in range(100 if detect else 0)]
    keep_metric(step)
    for p in acts:
        cudart.cudaFree(p)


for step in range(steps):
    train_step(step)
    if not detect:
        cudalloc.step()
    time.sleep(0.03)  # a step takes time: each mark is judged (at most 50 a second)
told_at = len(events)  # told while the loop ran
if detect:
    assert told_at >= 1 and events[0]["event"] == "leak" and events[0]["bytes_per_iteration"] == MiB, events
    print("live_prog: ok (detected iterations)", flush=True)
    sys.exit(0)

stats = cudalloc.memory_stats()
assert list(stats) == sorted(stats) and stats["allocated_bytes.all.current"] == len(kept) * MiB, stats
summary = cudalloc.memory_summary()
assert "Allocated memory" in summary and "Iterations seen: %d" % steps in summary, summary
print(summary, end="")
kinds = [e["event"] for e in events]
assert kinds == ["leak", "stopped"], kinds
leak = events[0]
assert leak["bytes_per_iteration"] == MiB and leak["device"] == 0, leak
print("live_prog: ok", flush=True)
