/* CUDA IPC between two processes: a block exported with cudaIpcGetMemHandle
 * (cuIpcGetMemHandle) opens in another process as that block, not the
 * segment around it: the importer (this program again, exec'd, under the same
 * environment) reads the block's bytes and writes new ones the exporter then
 * sees. Run under the preload (expandable and classic segments) and on the
 * simulated device alone: all must pass.
 *   prog_ipc runtime|driver          the exporter (runs the importer)
 *   prog_ipc no-export               a block that cannot be exported: CUDA's error
 *   prog_ipc import HEX SIZE OLD NEW [twice]   the importer (exit 0: all as expected)
 *   prog_ipc import-gone HEX         opening must fail: the block is freed */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/preload/check.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

static const char *self;
static int use_driver;

static void to_hex(const cudaIpcMemHandle_t *h, char *out) {
    for (size_t i = 0; i < sizeof *h; i++) sprintf(out + 2 * i, "%02x", (unsigned char)h->reserved[i]);
}

static void from_hex(const char *s, cudaIpcMemHandle_t *h) {
    for (size_t i = 0; i < sizeof *h; i++) {
        unsigned v = 0;
        sscanf(s + 2 * i, "%2x", &v);
        h->reserved[i] = (char)v;
    }
}

/* Runs this program with args in a child process: its exit status. */
static int run_child(char *const *args) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execv(self, args);
        _exit(127);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

static cudaError_t get_handle(cudaIpcMemHandle_t *h, void *p) {
    if (!use_driver) return cudaIpcGetMemHandle(h, p);
    return (cudaError_t)cuIpcGetMemHandle((CUipcMemHandle *)h, (CUdeviceptr)p);
}

static void *filled(size_t size, int value) {
    void *p = NULL;
    CHECK(cudaMalloc(&p, size) == cudaSuccess, "cudaMalloc %zu", size);
    CHECK(cudaMemset(p, value, size) == cudaSuccess, "cudaMemset");
    return p;
}

static int all_are(const void *dev, size_t size, int value) {
    unsigned char *h = malloc(size);
    int ok = cudaMemcpy(h, dev, size, cudaMemcpyDeviceToHost) == cudaSuccess;
    for (size_t i = 0; ok && i < size; i++) ok = h[i] == (unsigned char)value;
    free(h);
    return ok;
}

/* The importer reads `old` in the block and writes `new`. */
static int import_checked(const char *what, const cudaIpcMemHandle_t *h, size_t size, int old, int new, int twice) {
    char hex[2 * sizeof *h + 1], sz[32], o[8], n[8];
    to_hex(h, hex);
    snprintf(sz, sizeof sz, "%zu", size);
    snprintf(o, sizeof o, "%d", old);
    snprintf(n, sizeof n, "%d", new);
    char *args[] = {(char *)self, "import", hex, sz, o, n, twice ? "twice" : NULL, NULL};
    int rc = run_child(args);
    CHECK(rc == 0, "%s: the importer failed with %d", what, rc);
    return rc;
}

static int exporter(const char *name) {
    /* b and c share a classic segment (c not at its start); a is small */
    void *b = filled(8 * MIB, 0x22), *c = filled(3 * MIB, 0x33), *a = filled(100 * KIB, 0x11);
    cudaIpcMemHandle_t hb, hc, ha, again;
    CHECK(get_handle(&hb, b) == cudaSuccess && get_handle(&hc, c) == cudaSuccess && get_handle(&ha, a) == cudaSuccess,
          "handles");
    CHECK(get_handle(&again, (char *)c + 512) == cudaErrorInvalidValue, "inside a block: cudaErrorInvalidValue");
    CHECK(get_handle(&again, c) == cudaSuccess && !memcmp(&again, &hc, sizeof again), "the same block, the same handle");
    void *mine = NULL;
    CHECK(cudaIpcOpenMemHandle(&mine, hc, cudaIpcMemLazyEnablePeerAccess) == cudaErrorDeviceUninitialized,
          "a process cannot open its own handle");
    cudaGetLastError();
    import_checked("8 MiB", &hb, 8 * MIB, 0x22, 0x44, 1);
    import_checked("3 MiB", &hc, 3 * MIB, 0x33, 0x55, 0);
    import_checked("100 KiB", &ha, 100 * KIB, 0x11, 0x66, 0);
    CHECK(all_are(b, 8 * MIB, 0x44) && all_are(c, 3 * MIB, 0x55) && all_are(a, 100 * KIB, 0x66),
          "the importer's writes reached the exporter's blocks, and only them");
    /* freed: its handle opens nothing any more */
    CHECK(cudaFree(c) == cudaSuccess, "cudaFree");
    char hex[2 * sizeof hc + 1];
    to_hex(&hc, hex);
    char *args[] = {(char *)self, "import-gone", hex, NULL};
    CHECK(run_child(args) == 0, "a freed block's handle does not open");
    cudaFree(a);
    cudaFree(b);
    CHECK_DONE(name);
}

static int importer(int argc, char **argv) {
    if (argc < 6) return 2;
    cudaIpcMemHandle_t h;
    from_hex(argv[2], &h);
    size_t size = strtoull(argv[3], NULL, 10);
    int old = atoi(argv[4]), new = atoi(argv[5]);
    void *p = NULL, *q = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
    CHECK(e == cudaSuccess, "cudaIpcOpenMemHandle: %s", cudaGetErrorName(e));
    if (e != cudaSuccess) return 1;
    CHECK(all_are(p, size, old), "the block's bytes, all %zu of them", size);
    CHECK(cudaMemset(p, new, size) == cudaSuccess, "write");
    if (argc > 6) {
        CHECK(cudaIpcOpenMemHandle(&q, h, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess && q == p,
              "opened again: the same pointer");
        CHECK(cudaIpcCloseMemHandle(q) == cudaSuccess, "close once");
        CHECK(all_are(p, 4096, new), "still open after one close");
    }
    CHECK(cudaIpcCloseMemHandle(p) == cudaSuccess, "close");
    return check_failures ? 1 : 0;
}

static int import_gone(char **argv) {
    cudaIpcMemHandle_t h;
    from_hex(argv[2], &h);
    void *p = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
    return e == cudaErrorInvalidResourceHandle ? 0 : 1;
}

/* A block that cannot be exported (no shareable handles here): CUDA's error. */
static int no_export(void) {
    void *p = filled(4 * MIB, 1);
    cudaIpcMemHandle_t h;
    CHECK(cudaIpcGetMemHandle(&h, p) == cudaErrorInvalidValue, "cudaErrorInvalidValue");
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "and it is the last error");
    cudaFree(p);
    CHECK_DONE("ipc-no-export");
}

int main(int argc, char **argv) {
    self = argv[0];
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "runtime")) return exporter("ipc-runtime");
    if (!strcmp(mode, "driver")) {
        use_driver = 1;
        return exporter("ipc-driver");
    }
    if (!strcmp(mode, "no-export")) return no_export();
    if (!strcmp(mode, "import")) return importer(argc, argv);
    if (!strcmp(mode, "import-gone") && argc > 2) return import_gone(argv);
    fprintf(stderr, "usage: prog_ipc runtime|driver|no-export\n");
    return 2;
}
