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

#include "tools/elf_needed.h"
#include "tools/status.h"
#include "util/prefix.h"
#include "util/size.h"
#include "util/version.h"

/* The help is the man page's SYNOPSIS and OPTIONS too (man/, built from it). */
static void usage(FILE *f) {
    fprintf(f,
            "usage: cudalloc run [--sim SIZE] [--conf CONF] [--report PREFIX] [--] PROGRAM [ARGS...]\n"
            "       cudalloc status PID [--json]    a running program's live figures, once\n"
            "       cudalloc top [-n COUNT] PID     the same, refreshed each second\n"
            "       cudalloc --version | --help\n"
            "Runs PROGRAM with libcudalloc.so preloaded (LD_PRELOAD, and NVTX_INJECTION64_PATH for\n"
            "iteration marks) and returns its exit status. Without a GPU driver, PROGRAM runs on the\n"
            "simulated device. For a Python program, PYTORCH_NO_CUDA_MEMORY_CACHING=1 unless set.\n"
            "  --sim SIZE       run on the simulated device with SIZE of memory (e.g. 8GiB);\n"
            "                   without a GPU driver the simulated device is used anyway\n"
            "  --conf CONF      CUDALLOC_CONF, e.g. expandable_segments:false,max_reserved:20GiB\n"
            "  --report PREFIX  write PREFIX.txt/.json/.html/.pickle/.csv/.folded (%%p pid, %%r rank)\n"
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

/* The file execvp will run for prog (searched in PATH when it has no '/'). */
static int find_program(const char *prog, char *path, size_t n) {
    if (strchr(prog, '/')) {
        snprintf(path, n, "%s", prog);
        return 0;
    }
    const char *dirs = getenv("PATH");
    for (const char *d = dirs ? dirs : "/usr/bin:/bin"; *d;) {
        size_t len = strcspn(d, ":");
        snprintf(path, n, "%.*s/%s", (int)len, len ? d : ".", prog);
        if (access(path, X_OK) == 0) return 0;
        d += len + (d[len] == ':');
    }
    return -1;
}

/* Is the program Python: named python* (python3, python3.11), a .py
 * script, or a file whose #! line names python (torchrun, accelerate)? */
static int is_python(const char *prog) {
    const char *base = strrchr(prog, '/');
    base = base ? base + 1 : prog;
    size_t n = strlen(base);
    if (!strncmp(base, "python", 6) || (n > 3 && !strcmp(base + n - 3, ".py"))) return 1;
    char path[PATH_MAX];
    if (find_program(prog, path, sizeof path) != 0) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256] = "";
    int py = fgets(line, sizeof line, f) && !strncmp(line, "#!", 2) && strstr(line, "python");
    fclose(f);
    return py;
}

/* A sanitizer runtime the program links (libasan.so.8, libtsan.so.2, ...):
 * it refuses to start unless it comes first in LD_PRELOAD. */
static void note_sanitizer(const char *name, void *ctx) {
    static const char *const runtimes[] = {"libasan.so", "libtsan.so", "libhwasan.so", "liblsan.so", "libmemprof.so"};
    for (size_t i = 0; i < sizeof runtimes / sizeof runtimes[0]; i++)
        if (!strncmp(name, runtimes[i], strlen(runtimes[i])) && !*(char *)ctx)
            snprintf(ctx, 256, "%s", name);
}

/* LD_PRELOAD is split on blanks and ':', LD_LIBRARY_PATH on ':' and ';'. */
static int splits_preload(const char *path) { return strpbrk(path, " \t\n:") != NULL; }
static int splits_library_path(const char *path) { return strpbrk(path, ":;") != NULL; }

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
    if (argc < 2) {
        fprintf(stderr, "cudalloc: no command: accepted: run, --version, --help (see --help)\n");
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        ca_print_version("cudalloc");
        return 0;
    }
    if (!strcmp(argv[1], "status") || !strcmp(argv[1], "top")) return ca_status_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "run")) {
        fprintf(stderr, "cudalloc: unknown command '%s': accepted: run, status, top, --version, --help\n", argv[1]);
        return 2;
    }
    const char *sim = NULL, *conf = NULL, *report = NULL;
    static const char *const names[] = {"--sim", "--conf", "--report"};
    int i = 2;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (argv[i][0] != '-') break; /* the program, without "--" */
        const char **slots[] = {&sim, &conf, &report}, **slot = NULL, *value = NULL;
        for (int k = 0; k < 3 && !slot; k++) {
            size_t len = strlen(names[k]);
            if (strncmp(argv[i], names[k], len)) continue;
            if (argv[i][len] == '=') slot = slots[k], value = argv[i] + len + 1; /* --sim=8GiB */
            else if (!argv[i][len]) slot = slots[k];                            /* --sim 8GiB */
        }
        if (!slot) {
            fprintf(stderr, "cudalloc: unknown option '%s': accepted: --sim, --conf, --report, --help, -- (see --help)\n",
                    argv[i]);
            return 2;
        }
        if (!value && i + 1 >= argc) {
            fprintf(stderr, "cudalloc: %s needs a value\n", argv[i]);
            return 2;
        }
        if (*slot) {
            fprintf(stderr, "cudalloc: %.*s is given twice: accepted: each option once\n",
                    (int)strcspn(argv[i], "="), argv[i]);
            return 2;
        }
        *slot = value ? value : argv[++i];
    }
    if (i < argc && !strcmp(argv[i], "--")) i++;
    if (i >= argc) {
        fprintf(stderr, "cudalloc: run: no program given: cudalloc run [OPTIONS] [--] PROGRAM [ARGS...] (see --help)\n");
        return 2;
    }
    size_t sim_bytes = 0;
    if (sim && (ca_parse_size(sim, &sim_bytes) != 0 || sim_bytes < (2u << 20))) {
        fprintf(stderr, "cudalloc: bad --sim size '%s': accepted: a size of at least 2MiB, such as 8GiB, 512MiB\n", sim);
        return 2;
    }
    char why[400];
    if (report && ca_prefix_check(report, why, sizeof why) != 0) {
        fprintf(stderr, "cudalloc: --report: %s\n", why);
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
    if (splits_library_path(lib)) {
        fprintf(stderr, "cudalloc: %s: a path with ':' or ';' cannot be carried by LD_PRELOAD or LD_LIBRARY_PATH: "
                        "install cudalloc under a path without them\n", lib);
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
    /* A path with a blank would be split by the dynamic linker, which then
     * warns and runs the program without cudalloc: name the library by its
     * file alone and let LD_LIBRARY_PATH (split on ':' only) find it. */
    if (splits_preload(lib)) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s/lib", prefix);
        prepend("LD_LIBRARY_PATH", dir);
        prepend("LD_PRELOAD", ca_library_file());
    } else {
        prepend("LD_PRELOAD", lib);
    }
    char program[PATH_MAX], runtime[256] = "";
    if (find_program(argv[i], program, sizeof program) == 0 && ca_elf_needed(program, note_sanitizer, runtime) == 0 &&
        runtime[0]) {
        prepend("LD_PRELOAD", runtime);
        fprintf(stderr, "cudalloc: %s links %s: it goes first in LD_PRELOAD, as it must\n", argv[i], runtime);
    }
    /* Another tool's NVTX injection (Nsight Systems') is kept: it gets the
     * ranges; cudalloc's iterations then come from cudalloc_step() or detection. */
    const char *nvtx = getenv("NVTX_INJECTION64_PATH");
    if (nvtx && *nvtx && strcmp(nvtx, lib))
        fprintf(stderr, "cudalloc: NVTX_INJECTION64_PATH=%s is kept: NVTX ranges go to that tool, so cudalloc marks "
                        "iterations by cudalloc_step() or detects them\n", nvtx);
    else
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
