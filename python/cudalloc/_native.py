"""Finding libcudalloc: the copy loaded in this process (preloaded by
`cudalloc run`, or loaded by PyTorch as its pluggable allocator), and the
cudalloc tree (bin/cudalloc, lib/libcudalloc.so.N) this package belongs to."""
import ctypes
import os
import re
import shutil

from . import _build

SONAME = "libcudalloc.so." + _build.version.split(".")[0]
_MAPPED = re.compile(r"\s(/\S.*/libcudalloc\.so[.0-9]*)$")


class Stats(ctypes.Structure):
    """include/cudalloc.h's cudalloc_stats, field for field."""
    _fields_ = [(name, ctypes.c_int64) for name in (
        "allocated_bytes", "allocated_bytes_peak", "reserved_bytes", "reserved_bytes_peak",
        "active_bytes", "active_bytes_peak", "requested_bytes", "requested_bytes_peak",
        "allocation", "allocation_peak", "segment", "segment_peak",
        "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free")]


# include/cudalloc.h's cudalloc_leak_fn: the finding as JSON, the caller's context
LEAK_FN = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p)


def _declare(lib):
    lib.cudalloc_get_stats.argtypes = [ctypes.c_int, ctypes.POINTER(Stats)]
    lib.cudalloc_iteration.restype = ctypes.c_long
    lib.cudalloc_version.restype = ctypes.c_char_p
    lib.cudalloc_on_leak.argtypes = [LEAK_FN, ctypes.c_void_p]
    return lib


def mapped_path():
    """The path of the libcudalloc mapped into this process, or None."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                m = _MAPPED.search(line.rstrip("\n"))
                if m:
                    return m.group(1)
    except OSError:
        pass
    return None


def loaded():
    """A handle on the libcudalloc already in this process, or None. Never
    loads it: without the preload every call of the module stays a no-op."""
    everything = ctypes.CDLL(None)
    if hasattr(everything, "cudalloc_step"):  # preloaded: in the global scope
        return _declare(everything)
    path = mapped_path()  # loaded with RTLD_LOCAL, as PyTorch loads a pluggable allocator
    if path:
        try:
            return _declare(ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LOCAL))
        except OSError:
            pass
    return None


def _roots():
    """Trees that may hold bin/cudalloc and lib/: the one make install put this
    package beside, build/ of the checkout it sits in, the launcher on PATH's."""
    here = os.path.dirname(os.path.abspath(__file__))
    if _build.root is not None:
        yield os.path.normpath(os.path.join(here, _build.root))
    yield os.path.normpath(os.path.join(here, "..", "..", "build"))
    on_path = shutil.which("cudalloc")
    if on_path:
        yield os.path.dirname(os.path.dirname(os.path.realpath(on_path)))


def launcher_path():
    """The cudalloc launcher of this package's tree, or None."""
    for root in _roots():
        path = os.path.join(root, "bin", "cudalloc")
        if os.access(path, os.X_OK):
            return path
    return None


def library_path():
    """The libcudalloc to load: the one in this process, else this package's tree's."""
    path = mapped_path()
    if path:
        return path
    for root in _roots():
        path = os.path.join(root, "lib", SONAME)
        if os.path.exists(path):
            return path
    return None
