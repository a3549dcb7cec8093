/* A C program that allocates device memory, then loads Python with dlopen
 * and runs a script that allocates through ctypes: cudalloc must find the
 * late interpreter and name the script's lines.
 *
 *   embed LIBPYTHON SCRIPT [ARGS...]      (PYTHONHOME as that Python's prefix) */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __attribute__((noinline)) int c_allocations(void) {
    for (int i = 0; i < 100; i++) {
        void *p;
        if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return -1;
        cudaFree(p);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: embed LIBPYTHON SCRIPT [ARGS...]\n");
        return 2;
    }
    if (c_allocations() != 0) return 1; /* before Python is there */
    void *py = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL); /* global: extension modules need its symbols */
    if (!py) {
        fprintf(stderr, "embed: %s\n", dlerror());
        return 1;
    }
    void (*init)(int) = (void (*)(int))dlsym(py, "Py_InitializeEx");
    int (*run)(const char *) = (int (*)(const char *))dlsym(py, "PyRun_SimpleString");
    int (*fini)(void) = (int (*)(void))dlsym(py, "Py_FinalizeEx");
    if (!init || !run || !fini) return 1;
    init(0);
    /* runpy with the script's own argv, as `python SCRIPT ARGS` would run it */
    size_t len = 256;
    for (int i = 2; i < argc; i++) len += 4 * strlen(argv[i]) + 8;
    char *code = malloc(len), *at = code;
    at += sprintf(at, "import runpy, sys\nsys.argv = [");
    for (int i = 2; i < argc; i++) {
        *at++ = '\'';
        for (const char *c = argv[i]; *c; c++) at += sprintf(at, *c == '\'' || *c == '\\' ? "\\%c" : "%c", *c);
        at += sprintf(at, "', ");
    }
    sprintf(at, "]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n");
    int rc = run(code);
    free(code);
    return fini() == 0 && rc == 0 ? 0 : 1;
}
