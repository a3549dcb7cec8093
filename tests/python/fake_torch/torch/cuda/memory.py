import ctypes

current = None


class CUDAPluggableAllocator:
    def __init__(self, path, alloc_fn_name, free_fn_name):
        self.path = path
        lib = ctypes.CDLL(path)  # RTLD_LOCAL, as PyTorch's dlopen
        self.malloc = getattr(lib, alloc_fn_name)
        self.malloc.restype = ctypes.c_void_p
        self.malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        self.free = getattr(lib, free_fn_name)
        self.free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]


def change_current_allocator(allocator):
    global current
    if current is not None:
        raise RuntimeError("Can't swap an already initialized allocator")
    current = allocator


def allocate(size):
    """What a CUDA tensor of `size` bytes costs: CUDA initialized and device 0
    made current (torch.cuda's lazy init), then the allocator's malloc on it
    and its default stream."""
    assert ctypes.CDLL("libcudart.so.13").cudaSetDevice(0) == 0
    return current.malloc(size, 0, None)


def release(ptr, size):
    current.free(ptr, size, 0, None)
