"""cudalloc from Python: iteration marks, PyTorch-named statistics, reports.

Run the program under the launcher (`cudalloc run -- python train.py`, or
`python -m cudalloc run -- train.py`) and call:

    import cudalloc
    for batch in loader:
        with cudalloc.iteration():      # or cudalloc.step() at the end of each step
            train_step(batch)
    print(cudalloc.stats()["allocated_bytes.all.peak"])

Without the preload, available() is False and every call is a no-op (stats()
is {}), so the marks can stay in the code. use_as_torch_allocator() makes
cudalloc PyTorch's allocator (CUDAPluggableAllocator), with or without it.
"""
import atexit
import collections
import contextlib
import ctypes
import json
import sys

from . import _build, _native

__all__ = ["available", "version", "step", "iteration", "iterations", "stats", "report", "empty_cache",
           "reset_peak_memory_stats", "use_as_torch_allocator", "library_path", "on_leak", "memory_stats",
           "memory_summary"]
__version__ = _build.version

_lib = None
_looked = False


def _library():
    global _lib, _looked
    if not _looked:
        _lib, _looked = _native.loaded(), True
    return _lib


def available():
    """True when libcudalloc is in this process (the preload, or PyTorch's
    pluggable allocator set by use_as_torch_allocator())."""
    return _library() is not None


def version():
    """The library's version ("0.1.0 (git 1a2b3c4d5e6f)"), or None without it."""
    lib = _library()
    return lib.cudalloc_version().decode() if lib else None


def step():
    """An iteration of the training loop ends here (the most trusted marker)."""
    lib = _library()
    if lib:
        lib.cudalloc_step()


class iteration(contextlib.ContextDecorator):
    """`with cudalloc.iteration(): train_step()`: the block is one iteration
    (it ends when the block does, by an exception too). Also a decorator."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        step()
        return False


def iterations():
    """Iterations seen so far (marks, NVTX "step" ranges, or detection); 0 without it."""
    lib = _library()
    return lib.cudalloc_iteration() if lib else 0


_CORE = ("active_bytes", "allocated_bytes", "allocation", "requested_bytes", "reserved_bytes", "segment")
_COUNTERS = ("num_alloc_retries", "num_device_alloc", "num_device_free", "num_ooms")


def _device_index(device):
    """torch's forms: None (the current device), an int, "cuda:1", a torch.device."""
    if device is None or device == "cuda":
        torch = sys.modules.get("torch")  # never imported here: only asked when in use
        if torch is not None and torch.cuda.is_initialized():
            return torch.cuda.current_device()
        return 0
    if isinstance(device, int):
        return device
    if isinstance(device, str) and device.startswith("cuda:") and device[5:].isdigit():
        return int(device[5:])
    index = getattr(device, "index", None)
    if getattr(device, "type", None) == "cuda":
        return _device_index(index)
    raise ValueError("cudalloc: bad device %r: accepted: None, an int, 'cuda', 'cuda:N', a CUDA torch.device"
                     % (device,))


def stats(device=None):
    """The device's figures under the names of torch.cuda.memory_stats()
    ("allocated_bytes.all.current", ".peak", ..., "num_ooms"), sorted by name as
    torch sorts them; {} without the library or for a device it never used."""
    lib = _library()
    index = _device_index(device)
    if lib is None:
        return {}
    s = _native.Stats()
    if lib.cudalloc_get_stats(index, ctypes.byref(s)) != 0:
        return {}
    out = {}
    for name in _CORE:
        out[name + ".all.current"] = getattr(s, name)
        out[name + ".all.peak"] = getattr(s, name + "_peak")
    for name in _COUNTERS:
        out[name] = getattr(s, name)
    return dict(sorted(out.items()))


def memory_stats(device=None):
    """torch.cuda.memory_stats()'s shape: an OrderedDict sorted by name, with
    the keys cudalloc has ("allocated_bytes.all.current", ..., "num_ooms");
    empty without the library."""
    return collections.OrderedDict(stats(device))


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.2f %s" % (n, unit))
        n /= 1024.0


def memory_summary(device=None, abbreviated=False):
    """torch.cuda.memory_summary()'s table over memory_stats(): current and
    peak of each figure, OOMs and retries, and the iterations cudalloc has
    seen. abbreviated is accepted for torch's signature (there are no pools
    to leave out)."""
    s = memory_stats(device)
    index = _device_index(device)
    width = 75
    lines = ["|" + "=" * width + "|",
             "|" + ("cudalloc memory summary, device ID %d" % index).center(width) + "|",
             "|" + "-" * width + "|"]
    if not s:
        lines.append("|" + "cudalloc is not in this process, or the device was never used".center(width) + "|")
        lines.append("|" + "=" * width + "|")
        return "\n".join(lines) + "\n"
    lines += ["|" + ("CUDA OOMs: %d" % s["num_ooms"]).center(37) + "|" +
              ("cudaMalloc retries: %d" % s["num_alloc_retries"]).center(37) + "|",
              "|" + "=" * width + "|",
              "| %-21s | %-23s | %-23s |" % ("Metric", "Cur Usage", "Peak Usage"),
              "|" + "-" * width + "|"]
    rows = (("Allocated memory", "allocated_bytes", _size), ("Active memory", "active_bytes", _size),
            ("Requested memory", "requested_bytes", _size), ("GPU reserved memory", "reserved_bytes", _size),
            ("Allocations", "allocation", str), ("GPU reserved segments", "segment", str))
    for label, key, fmt in rows:
        lines.append("| %-21s | %23s | %23s |" % (label, fmt(s[key + ".all.current"]), fmt(s[key + ".all.peak"])))
    lines += ["|" + "-" * width + "|",
              "| %-73s |" % ("Iterations seen: %d; device allocations %d, frees %d" %
                            (iterations(), s["num_device_alloc"], s["num_device_free"])),
              "|" + "=" * width + "|"]
    return "\n".join(lines) + "\n"


_leak_callbacks = []
_leak_trampoline = None


def _on_leak_native(finding_json, _ctx):
    finding = json.loads(finding_json.decode("utf-8", "replace"))
    for fn in list(_leak_callbacks):
        fn(finding)


def on_leak(callback):
    """Call callback(finding) while the job runs: when a leak becomes sure
    (finding["event"] == "leak"), when the device it will run out is near
    ("near"), when it stops growing ("stopped"). finding is a dict: event,
    device, iteration, bytes_per_iteration, growth_since, leaked_bytes,
    n_sites, oom_iteration and oom_time (None when unknown; oom_time in Unix
    seconds), title (what grows, from where). Called on the thread that ended
    the iteration (cudalloc.step()), or on cudalloc's own thread when the
    iterations are detected. Returns callback, so it decorates too; without
    the library nothing is ever called."""
    global _leak_trampoline
    lib = _library()
    _leak_callbacks.append(callback)
    if lib is not None and _leak_trampoline is None:
        _leak_trampoline = _native.LEAK_FN(_on_leak_native)  # kept: the library holds a pointer to it
        lib.cudalloc_on_leak(_leak_trampoline, None)
        # cudalloc's own thread must not call into an interpreter that is shutting down
        atexit.register(lib.cudalloc_on_leak, None, None)
    return callback


def report():
    """Write the reports now (when a report prefix is set: --report,
    CUDALLOC_REPORT or report:). True when they were written."""
    lib = _library()
    return bool(lib) and lib.cudalloc_report() == 0


def empty_cache():
    """Give every cached free granule back to the device, on every device."""
    lib = _library()
    if lib:
        lib.cudalloc_empty_cache()


def reset_peak_memory_stats():
    """The peaks start again from the current figures."""
    lib = _library()
    if lib:
        lib.cudalloc_reset_peak_stats()


def library_path():
    """The libcudalloc in this process, else the one of this package's cudalloc
    tree (make install's, the checkout's build/, the launcher on PATH's); None."""
    return _native.library_path()


def _wire_hooks(allocator, path):
    """The pluggable allocator's other hooks, where this PyTorch has them:
    Tensor.record_stream, torch.cuda.empty_cache(), and each block its own base."""
    import ctypes
    hooks = allocator.allocator() if hasattr(allocator, "allocator") else None
    if hooks is None:
        return
    lib = ctypes.CDLL(path)
    for setter, name in (("set_record_stream_fn", "cudalloc_torch_record_stream"),
                         ("set_reset_fn", "cudalloc_torch_empty_cache"),
                         ("set_base_alloc_fn", "cudalloc_torch_base_alloc")):
        if hasattr(hooks, setter):
            getattr(hooks, setter)(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)


def use_as_torch_allocator():
    """Make cudalloc PyTorch's CUDA allocator (torch.cuda.memory.
    CUDAPluggableAllocator over cudalloc_torch_malloc/free), before the first
    CUDA tensor. Works with or without the preload; returns the allocator."""
    global _looked
    try:
        import torch
    except ImportError as e:
        raise ImportError("cudalloc.use_as_torch_allocator: torch is not importable: %s" % e) from e
    memory = getattr(getattr(torch, "cuda", None), "memory", None)
    pluggable = getattr(memory, "CUDAPluggableAllocator", None)
    if pluggable is None:
        raise RuntimeError("cudalloc.use_as_torch_allocator: torch %s has no torch.cuda.memory.CUDAPluggableAllocator"
                           " (PyTorch 2.0 or later, built with CUDA)" % getattr(torch, "__version__", "?"))
    path = library_path()
    if path is None:
        raise FileNotFoundError("cudalloc.use_as_torch_allocator: %s not found: make install cudalloc, put its "
                                "bin/cudalloc on PATH, or run under `cudalloc run`" % _native.SONAME)
    allocator = pluggable(path, "cudalloc_torch_malloc", "cudalloc_torch_free")
    _wire_hooks(allocator, path)
    memory.change_current_allocator(allocator)
    _looked = False  # loaded now: available() and the calls see it
    return allocator
