/* CUDA IPC between two processes: a block exported with cudaIpcGetMemHandle
 * (cuIpcGetMemHandle) opens in another process as that block, not the
 * segment around it: the importer (this program again, exec'd, under the same
 * environment) reads the block's bytes and writes new ones the exporter then
 * sees. Run under the preload (expandable and classic segments) and on the
 * simulated device alone: all must pass.
 *   prog_ipc runtime|driver          the exporter (runs the importer)
 *   prog_ipc no-export               a block that cannot be exported: CUDA's error
 *   prog_ipc import HEX SIZE OLD NEW [twice]   the importer (exit 0: all as expected)
 *   prog_ipc import-gone HEX         opening must fail: the block is freed
 * A stuck or hostile peer cannot hang or fool either side (under the preload):
 *   prog_ipc stuck-client            a client that connects and says nothing delays no importer
 *   prog_ipc hostile                 a server that never answers, one that is not the exporter
 *   prog_ipc other-user              (as root) an importer of another user is refused
 *   prog_ipc fork-export             a forked child does not keep the parent's exports
 *   prog_ipc close-held              the importer's close waits for its queued work
 *   prog_ipc peer-import             (2 devices) an import is open to the devices with peer access */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/preload/simhooks.h"

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

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int run2(const char *mode, const cudaIpcMemHandle_t *h, const char *extra) {
    char hex[2 * sizeof *h + 1];
    to_hex(h, hex);
    char *args[] = {(char *)self, (char *)mode, hex, (char *)extra, NULL};
    return run_child(args);
}

/* This process's cudalloc server, from /proc/net/unix: its abstract name. */
static int own_server(struct sockaddr_un *a, socklen_t *len) {
    char want[64], line[512];
    snprintf(want, sizeof want, "@cudalloc-ipc-%d", (int)getpid());
    FILE *f = fopen("/proc/net/unix", "r");
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        char *at = strstr(line, want), end = at ? at[strlen(want)] : 0;
        if (!at || (end != '-' && end != '\n' && end != ' ')) continue;
        at[strcspn(at, " \n")] = 0;
        memset(a, 0, sizeof *a);
        a->sun_family = AF_UNIX;
        memcpy(a->sun_path + 1, at + 1, strlen(at + 1));
        *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(at));
        found = 1;
    }
    if (f) fclose(f);
    return found;
}

/* One client connects to our server and says nothing: an importer that comes
 * next is answered at once, not after it. */
static int stuck_client(void) {
    void *b = filled(3 * MIB, 0x22);
    cudaIpcMemHandle_t h;
    CHECK(cudaIpcGetMemHandle(&h, b) == cudaSuccess, "handle");
    struct sockaddr_un a;
    socklen_t len = 0;
    CHECK(own_server(&a, &len), "our server in /proc/net/unix");
    int mute = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    CHECK(connect(mute, (struct sockaddr *)&a, len) == 0, "a client that will say nothing connects");
    double t0 = now();
    import_checked("past a mute client", &h, 3 * MIB, 0x22, 0x44, 0);
    double took = now() - t0;
    CHECK(took < 3, "the importer waited %.1f s behind the mute client", took);
    close(mute);
    cudaFree(b);
    CHECK_DONE("ipc-stuck-client");
}

/* A handle as cudalloc makes it (ipc.c: version 2) naming process pid's
 * server `tag`. */
static cudaIpcMemHandle_t forged(pid_t pid, uint64_t tag) {
    struct {
        char magic[8];
        int32_t version, pid;
        uint64_t id, nonce, size, tag;
    } f = {{'c', 'u', 'd', 'a', 'l', 'l', 'o', 'c'}, 2, (int32_t)pid, 1, 1, 4096, tag};
    cudaIpcMemHandle_t h;
    memset(&h, 0, sizeof h);
    memcpy(&h, &f, sizeof f);
    return h;
}

/* A child serving the name of process `as`: accepts and never answers. */
static pid_t fake_server(pid_t as, uint64_t tag) {
    int ready[2];
    if (pipe(ready) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "cudalloc-ipc-%d-%016llx",
                         (int)(as ? as : getpid()), (unsigned long long)tag);
        int l = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        bind(l, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n));
        listen(l, 4);
        if (write(ready[1], "x", 1) != 1) _exit(1);
        for (;;) {
            int s = accept(l, NULL, NULL);
            (void)s; /* kept open, never answered */
        }
    }
    char c;
    close(ready[1]);
    if (read(ready[0], &c, 1) != 1) pid = -1;
    close(ready[0]);
    return pid;
}

static int hostile(void) {
    cudaFree(0);
    /* a server that never answers: the importer gives up, with CUDA's error */
    pid_t mute = fake_server(0, 0x1234);
    cudaIpcMemHandle_t h = forged(mute, 0x1234);
    double t0 = now();
    CHECK(run2("import-fails", &h, NULL) == 0, "the open failed");
    double took = now() - t0;
    CHECK(took < 20, "the importer waited %.1f s for a server that never answers", took);
    /* a server under the exporter's name that is another process: not used */
    pid_t sleeper = fork();
    if (sleeper == 0) {
        pause();
        _exit(0);
    }
    pid_t impostor = fake_server(sleeper, 0x5678);
    h = forged(sleeper, 0x5678);
    t0 = now();
    CHECK(run2("import-fails", &h, NULL) == 0, "the open failed");
    took = now() - t0;
    CHECK(took < 3, "an impostor was not refused at once (%.1f s)", took);
    kill(mute, SIGKILL);
    kill(impostor, SIGKILL);
    kill(sleeper, SIGKILL);
    while (wait(NULL) > 0) {}
    CHECK_DONE("ipc-hostile");
}

static int import_fails(char **argv) {
    cudaIpcMemHandle_t h;
    from_hex(argv[2], &h);
    void *p = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
    fprintf(stderr, "import-fails: %s\n", cudaGetErrorName(e));
    return e != cudaSuccess ? 0 : 1;
}

/* As root: an importer of another user (nobody) is refused. */
static int other_user(void) {
    if (geteuid() != 0) {
        printf("ipc-other-user: skipped (not root)\n");
        return 0;
    }
    void *b = filled(3 * MIB, 0x22);
    cudaIpcMemHandle_t h;
    CHECK(cudaIpcGetMemHandle(&h, b) == cudaSuccess, "handle");
    char hex[2 * sizeof h + 1];
    to_hex(&h, hex);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(126);
        execl(self, self, "import-fails", hex, (char *)NULL);
        _exit(126);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && (WEXITSTATUS(status) == 126 || WEXITSTATUS(status) == 127)) {
        /* nobody may not reach this tree (a home directory of mode 700) */
        printf("ipc-other-user: skipped (user nobody cannot run %s here)\n", self);
        cudaFree(b);
        return 0;
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "another user's importer is refused (status %d)", status);
    cudaFree(b);
    CHECK_DONE("ipc-other-user");
}

/* Descriptors of simulated device memory this process holds. */
static int memory_fds(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[300], link[256];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, link, sizeof link - 1);
        if (len > 0 && (link[len] = 0, strstr(link, "memfd:simgpu-vmm"))) n++;
    }
    if (d) closedir(d);
    return n;
}

/* A forked child (a DataLoader worker) keeps none of the parent's exports. */
static int fork_export(void) {
    void *b = filled(5 * MIB, 0x22);
    cudaIpcMemHandle_t h;
    CHECK(cudaIpcGetMemHandle(&h, b) == cudaSuccess, "handle");
    int parent = memory_fds(), pipefd[2];
    CHECK(pipe(pipefd) == 0, "pipe");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int child = memory_fds();
        _exit(write(pipefd[1], &child, sizeof child) == sizeof child ? 0 : 1);
    }
    int child = -1;
    CHECK(read(pipefd[0], &child, sizeof child) == sizeof child, "the child's count");
    waitpid(pid, NULL, 0);
    CHECK(child < parent, "the child holds %d of the parent's %d memory descriptors: the exports too", child, parent);
    cudaFree(b);
    CHECK(memory_fds() == child, "the parent, its export dropped, holds what the child held (%d, %d)", memory_fds(),
          child);
    CHECK_DONE("ipc-fork-export");
}

/* The importer's close with its work still queued on the mapping. */
static int close_held(void) {
    void *b = filled(3 * MIB, 0x22);
    cudaIpcMemHandle_t h;
    CHECK(cudaIpcGetMemHandle(&h, b) == cudaSuccess, "handle");
    CHECK(run2("import-held", &h, NULL) == 0, "the importer");
    cudaFree(b);
    CHECK_DONE("ipc-close-held");
}

static int import_held(char **argv) {
    cudaIpcMemHandle_t h;
    from_hex(argv[2], &h);
    void *p = NULL;
    cudaStream_t s;
    cudaEvent_t done;
    CHECK(simhooks_init(), "simulated device");
    CHECK(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess, "open");
    CHECK(cudaStreamCreate(&s) == cudaSuccess && cudaEventCreate(&done) == cudaSuccess, "stream, event");
    hold(s, 1);
    CHECK(cudaMemsetAsync(p, 0x77, 3 * MIB, s) == cudaSuccess, "work on the mapping, held");
    CHECK(cudaEventRecord(done, s) == cudaSuccess, "record");
    CHECK(cudaEventQuery(done) == cudaErrorNotReady, "the work is queued");
    CHECK(cudaIpcCloseMemHandle(p) == cudaSuccess, "close");
    CHECK(cudaEventQuery(done) == cudaSuccess, "the close waited for the work on the mapping");
    hold(s, 0);
    return check_failures ? 1 : 0;
}

/* Two devices: the import is open to device 1, which has peer access to
 * device 0 (before the open, and after it). */
static int peer_import(void) {
    void *b = filled(3 * MIB, 0x22);
    cudaIpcMemHandle_t h;
    CHECK(cudaIpcGetMemHandle(&h, b) == cudaSuccess, "handle");
    CHECK(run2("import-peer", &h, "before") == 0, "peer access enabled before the open");
    CHECK(run2("import-peer", &h, "after") == 0, "peer access enabled after the open");
    cudaFree(b);
    CHECK_DONE("ipc-peer-import");
}

static unsigned long long access_of(int device, void *p) {
    unsigned long long flags = 99;
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device};
    CHECK(cuMemGetAccess(&flags, &loc, (CUdeviceptr)p) == CUDA_SUCCESS, "cuMemGetAccess");
    return flags;
}

static int import_peer(char **argv) {
    cudaIpcMemHandle_t h;
    from_hex(argv[2], &h);
    int before = !strcmp(argv[3], "before");
    void *p = NULL;
    CHECK(cudaSetDevice(1) == cudaSuccess && (!before || cudaDeviceEnablePeerAccess(0, 0) == cudaSuccess),
          "device 1 reaches device 0");
    CHECK(cudaSetDevice(0) == cudaSuccess, "device 0");
    CHECK(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess, "open on device 0");
    if (!before) {
        CHECK(cudaSetDevice(1) == cudaSuccess && cudaDeviceEnablePeerAccess(0, 0) == cudaSuccess, "peer access now");
        cudaSetDevice(0);
    }
    CHECK(access_of(0, p) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "device 0 reaches the import");
    CHECK(access_of(1, p) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "device 1, with peer access, reaches it too");
    CHECK(cudaIpcCloseMemHandle(p) == cudaSuccess, "close");
    return check_failures ? 1 : 0;
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
    if (!strcmp(mode, "stuck-client")) return stuck_client();
    if (!strcmp(mode, "hostile")) return hostile();
    if (!strcmp(mode, "other-user")) return other_user();
    if (!strcmp(mode, "fork-export")) return fork_export();
    if (!strcmp(mode, "close-held")) return close_held();
    if (!strcmp(mode, "peer-import")) return peer_import();
    if (!strcmp(mode, "import-fails") && argc > 2) return import_fails(argv);
    if (!strcmp(mode, "import-held") && argc > 2) return import_held(argv);
    if (!strcmp(mode, "import-peer") && argc > 3) return import_peer(argv);
    fprintf(stderr, "usage: prog_ipc runtime|driver|no-export\n");
    return 2;
}
