"""An inference server in Python that makes a CUDA stream per request
(tests/python/module.sh), through ctypes -> libcudart as a PyTorch extension
reaches it. Worker threads each keep a window of requests in flight; a
request makes a non-blocking stream, allocates its KV blocks (4 to 64 KiB)
with cudaMallocAsync, works on them (cudaMemsetAsync), and when it leaves
the window frees them in its stream's order and destroys the stream.

    server_streams.py REQUESTS MAX_RESERVED_MIB [KIB,KIB,...]

The block sizes are drawn from the KiB list (default 4,8,16,32,64).

Prints the peak reserved and allocated; exits 1 unless every call succeeded
and the peak reserved (cudalloc.stats()) stayed within MAX_RESERVED_MIB."""
import ctypes
import random
import sys
import threading

import cudalloc

cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaStreamCreateWithFlags.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
cudart.cudaStreamDestroy.argtypes = [ctypes.c_void_p]
cudart.cudaMallocAsync.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p]
cudart.cudaFreeAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
cudart.cudaMemsetAsync.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p]
NON_BLOCKING = 1
WORKERS, WINDOW, BLOCKS = 4, 64, 4
requests, max_mib = int(sys.argv[1]), int(sys.argv[2])
sizes = [int(k) << 10 for k in (sys.argv[3] if len(sys.argv) > 3 else "4,8,16,32,64").split(",")]
errors = []


def start(rng):
    stream = ctypes.c_void_p()
    if cudart.cudaStreamCreateWithFlags(ctypes.byref(stream), NON_BLOCKING) != 0:
        errors.append("stream")
    blocks = []
    for _ in range(BLOCKS):
        p, n = ctypes.c_void_p(), rng.choice(sizes)
        if cudart.cudaMallocAsync(ctypes.byref(p), n, stream) != 0 or \
                cudart.cudaMemsetAsync(p, 0, n, stream) != 0:
            errors.append("alloc %d" % n)
        blocks.append(p)
    return stream, blocks


def finish(stream, blocks):
    for p in blocks:
        if cudart.cudaFreeAsync(p, stream) != 0:
            errors.append("free")
    if cudart.cudaStreamDestroy(stream) != 0:
        errors.append("destroy")


def worker(seed, count):
    rng, window = random.Random(seed), []
    for _ in range(count):
        window.append(start(rng))
        if len(window) > WINDOW:
            finish(*window.pop(0))
    for request in window:
        finish(*request)


threads = [threading.Thread(target=worker, args=(i, requests // WORKERS)) for i in range(WORKERS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
s = cudalloc.stats()
reserved, allocated = s["reserved_bytes.all.peak"] >> 20, s["allocated_bytes.all.peak"] >> 20
print("server_streams: %d requests, %d streams in flight at most: peak reserved %d MiB, allocated %d MiB"
      % (requests, WORKERS * (WINDOW + 1), reserved, allocated))
if errors or reserved > max_mib:
    print("server_streams: FAILED: %d errors %s; peak reserved %d MiB, bound %d MiB"
          % (len(errors), errors[:3], reserved, max_mib))
    sys.exit(1)
print("server_streams: ok")
