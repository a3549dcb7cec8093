"""A training-like loop for cudalloc's Python tests: device memory through
ctypes -> libcudart's cudaMalloc (the way PyTorch's tensors reach it), 40
steps, each with a few activations freed at its end, and keep_metric keeping
1 MiB per step for ever (a real leak).

    train_loop.py [--marks] [--healthy] [--gil] [--thread] [--lib DIR]

--marks: cudalloc_step() after each step (ctypes, from the preloaded library);
--healthy: keep_metric frees what it took; --gil: the calls keep the GIL
(ctypes.PyDLL; plain ctypes.CDLL releases it, as PyTorch's operators do);
--thread: the loop runs in another thread; --lib DIR: keep_metric allocates
through devlib.malloc from DIR (a library, as PyTorch's Python layers are).
"""
import ctypes
import sys
import threading

args = set(sys.argv[1:])
cudart = (ctypes.PyDLL if "--gil" in args else ctypes.CDLL)("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaFree.argtypes = [ctypes.c_void_p]
MiB = 1 << 20
metrics = []
malloc = cudart.cudaMalloc
if "--lib" in args:
    sys.path.insert(0, sys.argv[sys.argv.index("--lib") + 1])
    import devlib
    malloc = devlib.malloc


def keep_metric(step):
    p = ctypes.c_void_p()
    assert malloc(ctypes.byref(p), MiB) == 0  # the leak: kept for ever
    if "--healthy" in args:
        cudart.cudaFree(p)
    else:
        metrics.append(p)


def activation(nbytes):
    p = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(p), nbytes) == 0
    return p


def forward(step):
    h = activation(4 * MiB)
    a = activation(2 * MiB)
    logits = activation(8 * MiB)
    return [h, a, logits]


def train_step(step):
    acts = forward(step)
    keep_metric(step)
    for p in acts:
        cudart.cudaFree(p)


def train():
    for step in range(40):
        train_step(step)
        if "--marks" in args:
            ctypes.CDLL(None).cudalloc_step()


if "--thread" in args:
    t = threading.Thread(target=train)
    t.start()
    t.join()
else:
    train()
