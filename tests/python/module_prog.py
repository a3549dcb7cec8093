"""The cudalloc Python module, tried as a training script would use it.

    module_prog.py bare                    no preload: available() False, every call a no-op
    module_prog.py preload VERSION PREFIX  under `cudalloc run --report PREFIX` (simulated device)
    module_prog.py pluggable               no preload, a stand-in torch (fake_torch/ on PYTHONPATH)
    module_prog.py exit N                  exits with status N (the launcher passes it on)

Device memory comes from ctypes -> libcudart's cudaMalloc, as PyTorch's tensors reach it."""
import ctypes
import os
import sys

import cudalloc

MiB = 1 << 20
KEYS = sorted("%s.all.%s" % (k, w) for k in ("active_bytes", "allocated_bytes", "allocation", "requested_bytes",
                                             "reserved_bytes", "segment") for w in ("current", "peak"))
KEYS = sorted(KEYS + ["num_alloc_retries", "num_device_alloc", "num_device_free", "num_ooms"])


def bare():
    assert not cudalloc.available()
    assert cudalloc.version() is None
    assert cudalloc.step() is None
    with cudalloc.iteration():
        pass

    @cudalloc.iteration()
    def train_step():
        return 42
    assert train_step() == 42
    assert cudalloc.iterations() == 0
    assert cudalloc.stats() == {} and cudalloc.stats(0) == {} and cudalloc.stats("cuda:1") == {}
    assert cudalloc.memory_stats() == {} and "cudalloc is not in this process" in cudalloc.memory_summary()

    @cudalloc.on_leak
    def never(finding):
        raise AssertionError("called without the library")
    assert callable(never)
    assert cudalloc.report() is False
    assert cudalloc.empty_cache() is None and cudalloc.reset_peak_memory_stats() is None
    try:
        cudalloc.stats("cpu")
        raise AssertionError("stats('cpu') accepted")
    except ValueError as e:
        assert "bad device 'cpu'" in str(e), e
    try:
        import torch  # noqa: F401
    except ImportError:
        try:
            cudalloc.use_as_torch_allocator()
            raise AssertionError("use_as_torch_allocator without torch")
        except ImportError as e:
            assert "torch is not importable" in str(e), e
    assert cudalloc.__version__ == sys.argv[2], (cudalloc.__version__, sys.argv[2])


def preload():
    version, prefix = sys.argv[2], sys.argv[3]
    cudart = ctypes.CDLL("libcudart.so.13")
    cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    cudart.cudaFree.argtypes = [ctypes.c_void_p]

    def malloc(n):
        p = ctypes.c_void_p()
        assert cudart.cudaMalloc(ctypes.byref(p), n) == 0
        return p

    assert cudalloc.available()
    assert cudalloc.version() == version, (cudalloc.version(), version)
    assert cudalloc.stats() == {}, "no device used yet"
    kept = []
    for step in range(10):
        with cudalloc.iteration():
            activation = malloc(4 * MiB)
            kept.append(malloc(MiB))  # kept for ever: the leak
            cudart.cudaFree(activation)
    s = cudalloc.stats()
    assert sorted(s) == KEYS, sorted(s)
    assert list(s) == KEYS, "sorted by name, as torch.cuda.memory_stats()"
    assert s["allocated_bytes.all.current"] == 10 * MiB, s
    assert s["allocated_bytes.all.peak"] == 14 * MiB, s  # 9 kept + 4 + 1 in the last step
    assert s["allocation.all.current"] == 10 and s["allocation.all.peak"] == 11, s
    assert s["requested_bytes.all.current"] == 10 * MiB, s
    assert s["reserved_bytes.all.current"] >= 10 * MiB and s["segment.all.current"] >= 1, s
    assert s["num_ooms"] == 0 and s["num_device_alloc"] >= 1, s
    assert s == cudalloc.stats(0) == cudalloc.stats("cuda:0"), "device None is device 0 here"
    assert cudalloc.stats(3) == {}, "a device never used"
    assert cudalloc.iterations() == 10, cudalloc.iterations()
    for p in kept:
        cudart.cudaFree(p)
    cudalloc.empty_cache()
    s = cudalloc.stats()
    assert s["allocated_bytes.all.current"] == 0 and s["reserved_bytes.all.current"] == 0, s
    cudalloc.reset_peak_memory_stats()
    assert cudalloc.stats()["allocated_bytes.all.peak"] == 0
    assert cudalloc.report() is True and os.path.exists(prefix + ".json"), "report() wrote " + prefix + ".json"
    preloaded = os.environ["LD_PRELOAD"].split(":")[0]
    assert os.path.samefile(cudalloc.library_path(), preloaded), (cudalloc.library_path(), preloaded)


def pluggable():
    import torch
    ctypes.CDLL("libcudart.so.13")  # PyTorch is linked with it
    assert not cudalloc.available()
    allocator = cudalloc.use_as_torch_allocator()
    assert torch.cuda.memory.current is allocator, "change_current_allocator was called with it"
    assert os.path.realpath(allocator.path) == os.path.realpath(sys.argv[2]), (allocator.path, sys.argv[2])
    assert cudalloc.available(), "the library PyTorch loaded is found"
    p = torch.cuda.memory.allocate(3 * MiB)
    assert p, "cudalloc_torch_malloc gave no memory"
    s = cudalloc.stats()
    assert s["allocated_bytes.all.current"] == 3 * MiB, s
    torch.cuda.memory.release(p, 3 * MiB)
    cudalloc.step()
    assert cudalloc.iterations() == 1 and cudalloc.stats()["allocated_bytes.all.current"] == 0


mode = sys.argv[1]
if mode == "exit":
    sys.exit(int(sys.argv[2]))
{"bare": bare, "preload": preload, "pluggable": pluggable}[mode]()
print("module_prog %s: ok" % mode)
