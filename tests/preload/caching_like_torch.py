"""Allocates as PyTorch's caching allocator does on top of cudaMalloc: a 2 MiB
segment for small tensors, 20 MiB ones for medium tensors, a large request
rounded up to 2 MiB, none given back. Through ctypes, on the libcudart found
on LD_LIBRARY_PATH (the simulated one in tests). tests/preload/run.sh runs it
under `cudalloc run` and expects the launcher's PyTorch line and the summary's
warning about a caching allocator on top."""
import ctypes
import os

cudart = ctypes.CDLL("libcudart.so.13")
MIB = 1 << 20
segments = [2 * MIB, 20 * MIB, 20 * MIB, 20 * MIB, 64 * MIB, 2 * MIB]
kept = []
for size in segments:
    p = ctypes.c_void_p()
    rc = cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size))
    assert rc == 0 and p.value, f"cudaMalloc({size}) = {rc}"
    kept.append(p)
print("segments:", len(kept), "PYTORCH_NO_CUDA_MEMORY_CACHING=" + os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "unset"))
