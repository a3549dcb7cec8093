"""CUDA graphs and many streams with PyTorch under cudalloc, for scripts/gpu-check.sh.

  torch_graph.py capture            a torch.cuda.graph capture of a small step; with
                                    PYTORCH_NO_CUDA_MEMORY_CACHING=1 (what `cudalloc run` sets) PyTorch
                                    allocates with plain cudaMalloc, which CUDA refuses during a
                                    capture: the first line of the error is printed, to compare with
                                    and without the preload
  torch_graph.py replay [LIB]       the step captured and replayed: with LIB, cudalloc as PyTorch's
                                    pluggable allocator; replays must compute the right values and
                                    leave eager tensors allocated after the capture untouched
  torch_graph.py streams N          N side streams alive (as PyTorch's stream pool and NCCL make
                                    them), then tensor allocate/free pairs: microseconds per pair
"""
import sys
import time

import torch

mode = sys.argv[1]


def step(x):
    return (x @ x).relu().sum(dim=0)


if mode == "capture":
    x = torch.randn(256, 256, device="cuda")
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            y = step(x)
        print("torch capture: captured")
    except RuntimeError as e:
        print("torch capture: refused: " + str(e).strip().splitlines()[0])
elif mode == "replay":
    if len(sys.argv) > 2:
        alloc = torch.cuda.memory.CUDAPluggableAllocator(sys.argv[2], "cudalloc_torch_malloc", "cudalloc_torch_free")
        torch.cuda.memory.change_current_allocator(alloc)
    static_x = torch.randn(256, 256, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as PyTorch asks
        for _ in range(3):
            step(static_x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = step(static_x)
    eager = [torch.full((256, 256), 7.0, device="cuda") for _ in range(16)]
    right = untouched = True
    for _ in range(5):
        static_x.copy_(torch.randn(256, 256, device="cuda"))
        g.replay()
        torch.cuda.synchronize()
        right &= bool(torch.allclose(static_y, step(static_x), rtol=1e-3, atol=1e-2))
        untouched &= all(bool((e == 7.0).all()) for e in eager)
    print(f"torch replay: right values {right}, eager tensors untouched {untouched}")
elif mode == "streams":
    pool = [torch.cuda.Stream() for _ in range(int(sys.argv[2]))]
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(2000):
            t = torch.empty(1 << 18, device="cuda")
            del t
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / 2000)
    times.sort()
    print(f"torch streams {len(pool)}: {1e6 * times[2]:.2f} us per allocate/free pair")
else:
    sys.exit(f"torch_graph.py: unknown mode '{mode}' (capture, replay, streams)")
