// cudalloc's pluggable-allocator entry points, called the way PyTorch calls
// them (torch/csrc/cuda/CUDAPluggableAllocator.cpp), with no PyTorch here: the
// library is dlopen'ed as CUDAPluggableAllocator loads it; malloc and free go
// through std::function; an out-of-memory answer must arrive as PyTorch's
// python_error carrying torch.OutOfMemoryError, caught by reference and
// restored as torch/csrc/Exceptions.h's HANDLE_TH_ERRORS does, also when it
// is thrown in a worker thread and rethrown (the autograd engine's way). A
// module named torch with an OutOfMemoryError class stands in for PyTorch's.
//   torch_contract LIBCUDALLOC oom|threads|no-torch|streams
// Run on the simulated device with CUDALLOC_SIM_MEMORY=64MiB.
#include <Python.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <thread>

// The layout PyTorch's python_error has: what HANDLE_TH_ERRORS catches.
struct python_error : public std::exception {
    PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
    std::string message;
    void restore() {
        PyGILState_STATE g = PyGILState_Ensure();
        Py_XINCREF(type);
        Py_XINCREF(value);
        Py_XINCREF(traceback);
        PyErr_Restore(type, value, traceback);
        PyGILState_Release(g);
    }
};

static int failures;
#define CHECK(cond, what)                                                       \
    do {                                                                        \
        if (!(cond)) {                                                          \
            failures++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, what); \
        }                                                                       \
    } while (0)

static std::function<void *(size_t, int, cudaStream_t)> torch_malloc;
static std::function<void(void *, size_t, int, cudaStream_t)> torch_free;
static void (*record_stream)(void *, cudaStream_t);
static void (*empty_cache)(void);
static void *(*base_alloc)(void *, size_t *);

template <typename T> static void find(void *lib, const char *name, T &fn) {
    void *p = dlsym(lib, name);
    if (!p) fprintf(stderr, "FAIL: %s not in the library\n", name), exit(1);
    fn = reinterpret_cast<T>(p);
}

static void load(const char *path) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) fprintf(stderr, "FAIL: %s\n", dlerror()), exit(1);
    void *(*m)(size_t, int, cudaStream_t);
    void (*f)(void *, size_t, int, cudaStream_t);
    find(lib, "cudalloc_torch_malloc", m);
    find(lib, "cudalloc_torch_free", f);
    find(lib, "cudalloc_torch_record_stream", record_stream);
    find(lib, "cudalloc_torch_empty_cache", empty_cache);
    find(lib, "cudalloc_torch_base_alloc", base_alloc);
    torch_malloc = m;
    torch_free = f;
}

// PyTorch's exceptions module, as far as this test needs it.
static void fake_torch(void) {
    PyRun_SimpleString("import sys, types\n"
                       "torch = types.ModuleType('torch')\n"
                       "exec('class OutOfMemoryError(RuntimeError): pass', torch.__dict__)\n"
                       "sys.modules['torch'] = torch\n");
}

// The Python exception a caught python_error restores: its type's name and text.
static bool is_torch_oom(python_error &e, char *text, size_t n) {
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *mod = PyImport_ImportModule("torch");
    PyObject *oom = mod ? PyObject_GetAttrString(mod, "OutOfMemoryError") : nullptr;
    e.restore();
    bool match = oom && PyErr_ExceptionMatches(oom);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *s = value ? PyObject_Str(value) : nullptr;
    snprintf(text, n, "%s", s ? PyUnicode_AsUTF8(s) : "");
    Py_XDECREF(s);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    Py_XDECREF(oom);
    Py_XDECREF(mod);
    PyGILState_Release(g);
    return match;
}

static int oom(void) {
    void *p = torch_malloc(1 << 20, 0, nullptr);
    CHECK(p, "a small allocation");
    bool raised = false;
    char text[512] = "";
    try {
        void *q = torch_malloc(size_t(1) << 30, 0, nullptr); // more than the device
        CHECK(!q, "1 GiB on a 64 MiB device");
    } catch (python_error &e) {
        raised = is_torch_oom(e, text, sizeof text);
        CHECK(raised, "the exception is torch.OutOfMemoryError");
    }
    CHECK(raised, "out of memory raised rather than NULL returned");
    CHECK(strstr(text, "CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 64.0 MiB"),
          text);
    size_t size = 0;
    CHECK(base_alloc(p, &size) == p && size == (1 << 20), "a block is its own base");
    torch_free(p, 1 << 20, 0, nullptr);
    // the allocator goes on after the exception
    p = torch_malloc(32 << 20, 0, nullptr);
    CHECK(p, "allocations go on after an out-of-memory exception");
    torch_free(p, 32 << 20, 0, nullptr);
    return failures;
}

// Raised in a worker (the autograd engine's threads), carried to the caller.
static int threads(void) {
    std::exception_ptr caught;
    std::thread t([&] {
        cudaSetDevice(0); // as PyTorch's workers do (device guards)
        try {
            torch_malloc(size_t(1) << 30, 0, nullptr);
        } catch (...) {
            caught = std::current_exception();
        }
    });
    t.join();
    bool raised = false;
    char text[512];
    try {
        if (caught) std::rethrow_exception(caught);
    } catch (python_error &e) {
        raised = is_torch_oom(e, text, sizeof text);
    }
    CHECK(raised, "raised in a worker, rethrown in the caller");
    return failures;
}

// No torch imported: NULL, as before.
static int no_torch(void) {
    void *q = torch_malloc(size_t(1) << 30, 0, nullptr);
    CHECK(!q, "NULL outside PyTorch");
    return failures;
}

// record_stream: the block's stream waits on the recorded one before reuse;
// empty_cache gives the memory back.
static int streams(void) {
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreate(&s1) == cudaSuccess && cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess,
          "streams");
    void *driver = dlopen("libcuda.so.1", RTLD_NOW);
    auto wait_of = reinterpret_cast<int (*)(void *, void **)>(dlsym(driver, "simgpu_stream_last_wait"));
    void *p = torch_malloc(8 << 20, 0, s1), *ev = nullptr;
    record_stream(p, s2);
    torch_free(p, 8 << 20, 0, s1);
    CHECK(wait_of && wait_of(s1, &ev) == 0 && ev, "the block's stream waits on the recorded stream");
    void *q = torch_malloc(8 << 20, 0, s1);
    torch_free(q, 8 << 20, 0, s1);
    empty_cache();
    size_t free_b = 0, total = 0;
    CHECK(cudaMemGetInfo(&free_b, &total) == cudaSuccess && free_b == total, "empty_cache gave everything back");
    return failures;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    load(argv[1]);
    if (cudaSetDevice(0) != cudaSuccess) return 1;
    Py_Initialize();
    if (strcmp(argv[2], "no-torch") != 0) fake_torch();
    PyThreadState *saved = PyEval_SaveThread(); // PyTorch's operators release the GIL
    int rc = !strcmp(argv[2], "oom")        ? oom()
             : !strcmp(argv[2], "threads")  ? threads()
             : !strcmp(argv[2], "no-torch") ? no_torch()
             : !strcmp(argv[2], "streams")  ? streams()
                                            : 2;
    PyEval_RestoreThread(saved);
    printf("torch-%s: %s\n", argv[2], rc ? "FAILED" : "ok");
    return rc ? 1 : 0;
}
