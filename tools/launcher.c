/* cudalloc: the launcher. `cudalloc run [options] -- PROGRAM ARGS...` runs a
 * program with libcudalloc.so preloaded, as valgrind or heaptrack would, on the
 * GPU or, when there is none (or when asked), on the simulated device. */
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/size.h"
#include "util/version.h"

/* The help is the man page's SYNOPSIS and OPTIONS too (man/, built from it). */
static void usage(FILE *f) {
    fprintf(f,
            "usage: cudalloc run [--sim SIZE] [--conf CONF] [--report PREFIX] [--] PROGRAM [ARGS...]\n"
            "       cudalloc --version | --help\n"
            "Runs PROGRAM with libcudalloc.so preloaded (LD_PRELOAD, and NVTX_INJECTION64_PATH for\n"
            "iteration marks) and returns its exit status. Without a GPU driver, PROGRAM runs on the\n"
            "simulated device. For a Python program, PYTORCH_NO_CUDA_MEMORY_CACHING=1 unless set.\n"
            "  --sim SIZE       run on the simulated device with SIZE of memory (e.g. 8GiB);\n"
            "                   without a GPU driver the simulated device is used anyway\n"
            "  --conf CONF      CUDALLOC_CONF, e.g. expandable_segments:false,max_reserved:20GiB\n"
            "  --report PREFIX  write PREFIX.txt/.json/.html/.pickle/.csv (%%p pid, %%r rank)\n"
            "  --version        print the version and exit\n"
            "  --help           print this help and exit\n");
}

/* Is a usable GPU driver with at least one device here? */
static int have_gpu(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 0;
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
    int n = 0;
    int ok = init && count && init(0) == 0 && count(&n) == 0 && n > 0;
    /* the simulated driver answers too: it is no GPU */
    ok = ok && !dlsym(h, "simgpu_counters");
    dlclose(h);
    return ok;
}

/* Is the program Python: named python* (python3, python3.11), a .py
 * script, or a file whose #! line names python (torchrun, accelerate)? */
static int is_python(const char *prog) {
    const char *base = strrchr(prog, '/');
    base = base ? base + 1 : prog;
    size_t n = strlen(base);
    if (!strncmp(base, "python", 6) || (n > 3 && !strcmp(base + n - 3, ".py"))) return 1;
    char path[PATH_MAX];
    if (strchr(prog, '/')) {
        snprintf(path, sizeof path, "%s", prog);
    } else { /* as execvp will find it */
        const char *dirs = getenv("PATH");
        int found = 0;
        for (const char *d = dirs ? dirs : "/usr/bin:/bin"; !found && *d;) {
            size_t len = strcspn(d, ":");
            snprintf(path, sizeof path, "%.*s/%s", (int)len, len ? d : ".", prog);
            found = access(path, X_OK) == 0;
            d += len + (d[len] == ':');
        }
        if (!found) return 0;
    }
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256] = "";
    int py = fgets(line, sizeof line, f) && !strncmp(line, "#!", 2) && strstr(line, "python");
    fclose(f);
    return py;
}

static void prepend(const char *var, const char *value) {
    const char *old = getenv(var);
    if (!old || !*old) {
        setenv(var, value, 1);
        return;
    }
    size_t n = strlen(value) + strlen(old) + 2;
    char *buf = malloc(n);
    if (!buf) exit(1);
    snprintf(buf, n, "%s:%s", value, old);
    setenv(var, buf, 1);
    free(buf);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        ca_print_version("cudalloc");
        return 0;
    }
    if (strcmp(argv[1], "run")) {
        fprintf(stderr, "cudalloc: unknown command '%s': accepted: run, --version, --help\n", argv[1]);
        return 2;
    }
    const char *sim = NULL, *conf = NULL, *report = NULL;
    int i = 2;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        const char **slot = !strcmp(argv[i], "--sim")      ? &sim
                            : !strcmp(argv[i], "--conf")   ? &conf
                            : !strcmp(argv[i], "--report") ? &report
                                                           : NULL;
        if (!slot) {
            if (argv[i][0] != '-') break; /* the program, without "--" */
            fprintf(stderr, "cudalloc: unknown option '%s': accepted: --sim, --conf, --report, --help, --\n", argv[i]);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "cudalloc: %s needs a value\n", argv[i]);
            return 2;
        }
        *slot = argv[++i];
    }
    if (i < argc && !strcmp(argv[i], "--")) i++;
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    size_t sim_bytes = 0;
    if (sim && (ca_parse_size(sim, &sim_bytes) != 0 || !sim_bytes)) {
        fprintf(stderr, "cudalloc: bad --sim size '%s': accepted: a size such as 8GiB, 512MiB\n", sim);
        return 2;
    }

    /* The tree the launcher belongs to, PREFIX/bin/cudalloc or build/bin/cudalloc
     * (the link's target when started through a symbolic link): both hold
     * lib/libcudalloc.so.N and lib/cudalloc/sim, so a copied or moved tree works. */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "cudalloc: cannot find where the launcher is installed\n");
        return 1;
    }
    self[n] = 0;
    char *prefix = dirname(dirname(self)); /* PREFIX/bin/cudalloc -> PREFIX */
    char lib[PATH_MAX], simdir[PATH_MAX];
    snprintf(lib, sizeof lib, "%s/lib/%s", prefix, ca_library_file());
    snprintf(simdir, sizeof simdir, "%s/lib/cudalloc/sim", prefix);
    if (access(lib, R_OK) != 0) {
        fprintf(stderr, "cudalloc: %s is missing (run make, or make install again)\n", lib);
        return 1;
    }

    if (sim || !have_gpu()) {
        if (access(simdir, R_OK) != 0) {
            fprintf(stderr, "cudalloc: no GPU and no simulated device at %s\n", simdir);
            return 1;
        }
        if (sim) setenv("CUDALLOC_SIM_MEMORY", sim, 1);
        const char *size = getenv("CUDALLOC_SIM_MEMORY");
        fprintf(stderr, "cudalloc: %s; running on the simulated device (%s)\n",
                sim ? "simulated device requested" : "no GPU driver found", size ? size : "16GiB default");
        prepend("LD_LIBRARY_PATH", simdir);
    }
    prepend("LD_PRELOAD", lib);
    setenv("NVTX_INJECTION64_PATH", lib, 1);
    if (conf) setenv("CUDALLOC_CONF", conf, 1);
    if (report) setenv("CUDALLOC_REPORT", report, 1);
    /* PyTorch's own caching allocator would hand cudalloc a few big segments
     * and keep its tensors inside them, out of sight. */
    if (!getenv("PYTORCH_NO_CUDA_MEMORY_CACHING") && is_python(argv[i])) {
        setenv("PYTORCH_NO_CUDA_MEMORY_CACHING", "1", 1);
        fprintf(stderr, "cudalloc: a Python program: PYTORCH_NO_CUDA_MEMORY_CACHING=1, so cudalloc sees PyTorch's "
                        "tensors, not its cache (set the variable yourself to choose otherwise)\n");
    }
    execvp(argv[i], &argv[i]);
    fprintf(stderr, "cudalloc: cannot run '%s': %s\n", argv[i], strerror(errno));
    return 127;
}
