"""What Python frames cost per tracked allocation: alloc+free pairs on the
count backend made from C at the bottom of a Python stack of a given depth
(the caller reached through ctypes.CDLL, the GIL released, as PyTorch's
operators reach cudaMalloc), untracked, tracked with native frames only, and
tracked with Python frames; the same call site each time (a loop's steady
state), timed on the thread's CPU clock. Also the Python walk alone, and the same walk through CPython's public
frame API (GIL held), for comparison. Median of 11 alternating rounds.

    python3 tests/python/bench.py build/tests/python/libpyprobe.so [pairs]
    (make bench-pyframes)
"""
import ctypes
import statistics
import sys
import traceback

probe = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
released, held = ctypes.CDLL(probe), ctypes.PyDLL(probe)
for lib in (released, held):
    for fn in ("pyprobe_bench", "pyprobe_walk_bench", "pyprobe_api_bench"):
        getattr(lib, fn).restype = ctypes.c_double
    lib.pyprobe_bench.argtypes = [ctypes.c_long, ctypes.c_int]
    lib.pyprobe_walk_bench.argtypes = [ctypes.c_long]
    lib.pyprobe_api_bench.argtypes = [ctypes.c_long]
released.pyprobe_python.restype = ctypes.c_char_p
ROUNDS = 11


def at_depth(depth, fn):
    """fn() called with `depth` Python frames on the stack."""
    if len(traceback.extract_stack()) < depth:
        return at_depth(depth, fn)
    return fn()


def measure(depth):
    times = {k: [] for k in ("untracked", "native", "python", "walk", "api")}
    for _ in range(ROUNDS):
        times["untracked"].append(at_depth(depth, lambda: released.pyprobe_bench(n, 0)))
        times["native"].append(at_depth(depth, lambda: released.pyprobe_bench(n, 1)))
        times["python"].append(at_depth(depth, lambda: released.pyprobe_bench(n, 2)))
        times["walk"].append(at_depth(depth, lambda: released.pyprobe_walk_bench(n)))
        times["api"].append(at_depth(depth, lambda: held.pyprobe_api_bench(n // 10)))
    return {k: statistics.median(v) for k, v in times.items()}


print("Python %s (%s); %d pairs per round, median of %d rounds; ns" %
      (sys.version.split()[0], released.pyprobe_python().decode(), n, ROUNDS))
print("| Python frames | untracked pair | tracked, native frames | tracked, with Python frames "
      "| Python frames' cost | Python walk alone | public-API walk |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for depth in (5, 10, 20, 30):
    m = measure(depth)
    api = "%.1f" % m["api"] if m["api"] >= 0 else "n/a"
    print("| %d | %.1f | %.1f | %.1f | **%.1f** | %.1f | %s |" %
          (depth, m["untracked"], m["native"], m["python"], m["python"] - m["native"], m["walk"], api))
