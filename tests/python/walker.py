"""What cudalloc's stack capture makes of the Python code calling it, compared
with what Python itself says (sys._getframe): function, file and line of every
frame, where the Python frames sit among the native ones, and no interpreter
frames left. Through ctypes.CDLL (the call releases the GIL, as PyTorch's
operators do) and ctypes.PyDLL (it keeps the GIL).

    python3 walker.py BUILD/tests/python/libpyprobe.so      (walker.sh runs it
    with each Python at hand)
"""
import ctypes
import importlib.util
import os
import sys
import tempfile
import threading

probe = sys.argv[1]
released = ctypes.CDLL(probe)
held = ctypes.PyDLL(probe)
for lib in (released, held):
    lib.pyprobe_capture.restype = ctypes.c_long
    lib.pyprobe_capture.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
CALLBACK = ctypes.CFUNCTYPE(ctypes.c_long)
released.pyprobe_call.argtypes = [CALLBACK]
released.pyprobe_call.restype = ctypes.c_long
released.pyprobe_python.restype = ctypes.c_char_p
ULL = ctypes.c_ulonglong
released.pyprobe_counts.argtypes = [ctypes.POINTER(ULL), ctypes.POINTER(ULL)]

version = "%d.%d" % sys.version_info[:2]
supported = (3, 10) <= sys.version_info[:2] <= (3, 13)
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL %s (python %s) %s" % (name, version, detail))


def expected(frame):
    """Python's own view: (function, file, line) from frame outwards."""
    out = []
    while frame:
        code = frame.f_code
        out.append((getattr(code, "co_qualname", code.co_name), code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return out


def capture(lib=released):
    """(site, cudalloc's frames, Python's frames), both taken on one line."""
    buf = ctypes.create_string_buffer(1 << 17)
    site, want = lib.pyprobe_capture(buf, len(buf)), expected(sys._getframe())
    frames = []
    for line in buf.value.decode("utf-8").splitlines():
        kind, fn, where, ln = line.split("\t")
        frames.append((kind, fn, where, int(ln)))
    return site, frames, want


def python_part(frames):
    return [(fn, where, ln) for kind, fn, where, ln in frames if kind == "python"]


# The interpreter's frames: its library (or the executable it is linked
# into), libffi and ctypes; by name where the module says nothing.
shared_libpython = any("libpython3" in l for l in open("/proc/self/maps"))
exe = os.path.realpath(sys.executable)
INTERNAL_NAMES = ("_Py", "Py", "ffi_", "_ctypes", "_call_function_pointer", "pyrun_", "run_mod", "run_eval_code")


def interpreter_frames(frames):
    bad = []
    for kind, fn, where, ln in frames:
        if kind == "python":
            continue
        base = os.path.basename(where)
        if (base.startswith(("libpython3", "libffi.so", "_ctypes.")) or fn.startswith(INTERNAL_NAMES)
                or (not shared_libpython and os.path.realpath(where) == exe)):
            bad.append((fn, where))
    return bad


def same(name, got):
    site, frames, want = got
    check(name + ": a site", site > 0, "site %d" % site)
    check(name + ": Python frames as Python has them", python_part(frames) == want,
          "\n  got  %s\n  want %s" % (python_part(frames), want))
    check(name + ": no interpreter frames", not interpreter_frames(frames), str(interpreter_frames(frames)))
    check(name + ": the capture is innermost", frames and frames[0][0] == "python" and frames[0][1] == "capture",
          str(frames[:2]))


if not supported:
    # Native frames only, and a reason; never a crash.
    site, frames, want = capture()
    check("unsupported: a site", site > 0, "site %d" % site)
    check("unsupported: no Python frames", not python_part(frames), str(python_part(frames)))
    why = released.pyprobe_python().decode()
    check("unsupported: says why", "Python %s is not supported" % version in why, why)
    print("walker (python %s, unsupported): %d passed, %d failed" % (version, passed, failed))
    sys.exit(1 if failed else 0)


# Plain calls, with the GIL released and held.
def level3(lib):
    return capture(lib)


def level2(lib):
    return level3(lib)


def level1(lib):
    return level2(lib)


same("calls, GIL released", level1(released))
same("calls, GIL held", level1(held))


# A class made (type.__call__ runs __init__ in another C call of the eval
# loop), a method, a generator resumed by next() (C as well), a lambda.
class Model:
    def __init__(self):
        self.made = capture()

    def forward(self):
        return capture()


def gen():
    yield capture()


same("__init__", Model().made)
same("method", Model().forward())
same("generator", next(gen()))
same("lambda", (lambda: capture())())


# C calling back into Python: the callback's frames, then the C frame that
# called it, then the frames that called C.
results = []


def callback():
    results.append(capture())
    return 0


def calls_c():
    return released.pyprobe_call(CALLBACK(callback))


calls_c()
same("callback through C", results[0])
frames = results[0][1]
kinds = [(k, fn) for k, fn, _, _ in frames]
at = [i for i, (k, fn) in enumerate(kinds) if k == "native" and fn == "pyprobe_call"]
check("callback: the C frame is there once", len(at) == 1, str(kinds))
if len(at) == 1:
    inner = [fn for k, fn in kinds[:at[0]] if k == "python"]
    outer = [fn for k, fn in kinds[at[0] + 1:] if k == "python"]
    check("callback: its frames before the C frame", inner == ["capture", "callback"], str(inner))
    check("callback: the caller's frames after it", outer[:2] == ["calls_c", "<module>"], str(outer))


# Another thread: its own frames (threading's among them).
out = []
th = threading.Thread(target=lambda: out.append(level1(released)))
th.start()
th.join()
same("thread", out[0])


# Deep recursion: the innermost 64 frames are kept.
def recurse(n):
    return recurse(n - 1) if n else capture()


site, frames, want = recurse(100)
py = python_part(frames)
check("deep: 64 innermost frames", len(py) == 64 and py == want[:64], "got %d frames" % len(py))


# Names and files beyond ASCII: Latin-1, other BMP and astral characters.
src = "def größe(cap):\n    return cap()\n\n\ndef μέτρο(cap):\n    return größe(cap)\n"
tmp = tempfile.mkdtemp()
path = os.path.join(tmp, "modü_😀.py")
with open(path, "w", encoding="utf-8") as f:
    f.write(src)
spec = importlib.util.spec_from_file_location("modu", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
got = mod.μέτρο(capture)
same("names beyond ASCII", got)
check("names beyond ASCII: read", [fn for fn, _, _ in python_part(got[1])[1:3]] == ["größe", "μέτρο"] and
      python_part(got[1])[1][1] == path, str(python_part(got[1])[:3]))
os.unlink(path)
os.rmdir(tmp)


# Sites: one per (native stack, Python stack); the same line twice is one.
def site_a():
    return capture()[0]


def site_b():
    return capture()[0]


a1, a2, b = site_a(), site_a(), site_b()
check("sites: same line, same site", a1 == a2, "%d %d" % (a1, a2))
check("sites: another line, another site", a1 != b, "%d %d" % (a1, b))

# Repeats are answered by the thread's cache: no new build.
h0, b0, h1, b1 = ULL(), ULL(), ULL(), ULL()
for i in range(11):
    site_a()
    if i == 0:
        released.pyprobe_counts(h0, b0)
released.pyprobe_counts(h1, b1)
check("cache: repeats hit", h1.value - h0.value == 10 and b1.value == b0.value,
      "hits +%d builds +%d" % (h1.value - h0.value, b1.value - b0.value))

check("interpreter found", released.pyprobe_python().decode() == version, released.pyprobe_python().decode())
print("walker (python %s): %d passed, %d failed" % (version, passed, failed))
sys.exit(1 if failed else 0)
