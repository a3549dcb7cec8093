"""A recorded PyTorch run's allocations (tests/data/torch, RMM CSV) made again
through cudaMalloc/cudaFree in ctypes, as PyTorch calls them under the preload
with PYTORCH_NO_CUDA_MEMORY_CACHING=1: every free a plain cudaFree, so the
granules a move could take wait for a fence first (the CUDA backend's path,
which cudalloc-replay's count backend does not take). Checks issue 11's goal
on cudalloc's own figures: utilization >= 0.97, or at most 4 MiB reserved past
the peak requested. tests/preload/run.sh runs it on the simulated device.

  python3 replay_torch.py TRACE.csv"""
import ctypes
import sys

cudart = ctypes.CDLL("libcudart.so.13")
cudalloc = ctypes.CDLL(None)  # the preloaded libcudalloc.so


class Stats(ctypes.Structure):  # include/cudalloc.h's cudalloc_stats
    _fields_ = [(name, ctypes.c_int64) for name in (
        "allocated_bytes", "allocated_bytes_peak", "reserved_bytes", "reserved_bytes_peak",
        "active_bytes", "active_bytes_peak", "requested_bytes", "requested_bytes_peak",
        "allocation", "allocation_peak", "segment", "segment_peak",
        "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free")]


def main(path):
    live, requested, peak = {}, 0, 0
    with open(path) as f:
        next(f)  # Thread,Time,Action,Pointer,Size,Stream
        for line in f:
            _, _, action, ptr, size = line.split(",")[:5]
            if action == "allocate":
                p = ctypes.c_void_p()
                rc = cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(int(size)))
                if rc != 0:
                    sys.exit(f"replay_torch: cudaMalloc({size}) returned {rc}")
                live[ptr] = (p, int(size))
                requested += int(size)
                peak = max(peak, requested)
            elif action == "free" and ptr in live:
                p, n = live.pop(ptr)
                if cudart.cudaFree(p) != 0:
                    sys.exit(f"replay_torch: cudaFree({p.value:#x}) failed")
                requested -= n
    s = Stats()
    if cudalloc.cudalloc_get_stats(0, ctypes.byref(s)) != 0:
        sys.exit("replay_torch: cudalloc_get_stats failed: run it under the preload")
    util, waste = peak / s.reserved_bytes_peak, s.reserved_bytes_peak - peak
    print(f"replay_torch: peak requested {peak}, peak reserved {s.reserved_bytes_peak}, utilization {util:.3f}, "
          f"{waste / 2**20:.1f} MiB past the peak, {s.num_device_alloc} granules created")
    if util < 0.97 and waste > 4 << 20:
        sys.exit("replay_torch: goal missed: utilization < 0.97 and more than 4 MiB past the peak")


if __name__ == "__main__":
    main(sys.argv[1])
