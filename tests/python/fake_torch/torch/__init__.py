"""A stand-in for PyTorch in cudalloc's Python tests: what use_as_torch_allocator
reaches (torch.cuda.memory.CUDAPluggableAllocator, change_current_allocator),
doing what PyTorch does with them: dlopen the library (RTLD_LOCAL), look the two
functions up, and allocate through them (allocate/free below)."""
__version__ = "0.0-fake"
from . import cuda  # noqa: E402,F401
