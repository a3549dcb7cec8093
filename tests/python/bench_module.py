"""What the cudalloc Python module costs per call, with the preload (under
`cudalloc run`) and without: the best of 7 runs of 20000 calls each.
    make bench-python-module"""
import ctypes
import timeit

import cudalloc

cudart = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
assert cudart.cudaMalloc(ctypes.byref(p), 1 << 20) == 0  # a device in use: stats() has figures


def in_iteration():
    with cudalloc.iteration():
        pass


where = "preload" if cudalloc.available() else "no preload"
for name, fn in [("step()", cudalloc.step), ("with iteration():", in_iteration), ("stats()", cudalloc.stats),
                 ("available()", cudalloc.available)]:
    best = min(timeit.repeat(fn, number=20000, repeat=7)) / 20000
    print("%-10s %-18s %6.2f us per call" % (where, name, best * 1e6))
