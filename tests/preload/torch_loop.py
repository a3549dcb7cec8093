"""A small PyTorch training loop for scripts/gpu-check.sh: under the preload
(PYTORCH_NO_CUDA_MEMORY_CACHING=1 LD_PRELOAD=libcudalloc.so), or with cudalloc
as PyTorch's pluggable allocator (by hand: pluggable LIB; through the cudalloc
module: module, with python/ on PYTHONPATH). Prints the final loss and the step time."""
import sys
import time

import torch

mode = sys.argv[1]
if mode == "pluggable":  # with every hook cudalloc has (docs/pytorch.md)
    import ctypes

    alloc = torch.cuda.memory.CUDAPluggableAllocator(sys.argv[2], "cudalloc_torch_malloc", "cudalloc_torch_free")
    lib = ctypes.CDLL(sys.argv[2])
    fn = lambda name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    alloc.allocator().set_record_stream_fn(fn("cudalloc_torch_record_stream"))
    alloc.allocator().set_reset_fn(fn("cudalloc_torch_empty_cache"))
    alloc.allocator().set_base_alloc_fn(fn("cudalloc_torch_base_alloc"))
    torch.cuda.memory.change_current_allocator(alloc)
elif mode == "module":
    import cudalloc
    cudalloc.use_as_torch_allocator()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
target = torch.randn(64, 1024, device="cuda")
times = []
for step in range(60):
    t0 = time.perf_counter()
    x = torch.randn(64, 1024, device="cuda")
    loss = (model(x) - target).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
times.sort()
print(f"torch {mode}: final loss {loss.item():.4f}, median step {1e3 * times[len(times) // 2]:.2f} ms")
if mode == "pluggable":  # out of memory raises PyTorch's exception, and the run goes on
    try:
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
        print("torch pluggable oom: no exception")
    except torch.OutOfMemoryError:
        print("torch pluggable oom: torch.OutOfMemoryError")
    torch.cuda.empty_cache()
    print(f"torch pluggable after oom: {torch.ones(4, device='cuda').sum().item():.0f}")
if mode == "module":
    s = cudalloc.stats()
    print(f"cudalloc stats: available {cudalloc.available()}, peak allocated {s['allocated_bytes.all.peak']} B, "
          f"{s['num_device_alloc']} device allocations")
