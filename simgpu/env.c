/* The environment variables of simgpu, read once by the first cuInit. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "simgpu/sim.h"
#include "util/size.h"

#define DEFAULT_MEMORY ((uint64_t)16 << 30)

static int parse_uint(const char *s, unsigned max, unsigned *out)
{
    if (!isdigit((unsigned char)s[0]))
        return -1;
    errno = 0;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v > max)
        return -1;
    *out = (unsigned)v;
    return 0;
}

/* CUDALLOC_SIM_DRIVER_VERSION: the driver's version (1000 x major + 10 x
 * minor, as cuDriverGetVersion gives it), 10000 to 13000; entry points
 * newer than it are not found. Read on first use (cuGetProcAddress works
 * before cuInit), checked again by cuInit. */
/* "MIN" or "MIN,RECOMMENDED": the minimum a power of two from 64 KiB, the
 * recommended one (a hint, CUDA promises nothing of it) at least that; unset,
 * both 2 MiB. */
static int read_granularity(const char *g)
{
    size_t min = CA_SIM_GRANULARITY, rec = 0;
    ca_sim.granularity = ca_sim.granularity_recommended = CA_SIM_GRANULARITY;
    if (!g || !*g)
        return 0;
    char buf[64];
    const char *comma = strchr(g, ',');
    size_t n = comma ? (size_t)(comma - g) : strlen(g);
    if (n >= sizeof buf)
        return -1;
    memcpy(buf, g, n);
    buf[n] = 0;
    if (ca_parse_size(buf, &min) != 0 || min < ((size_t)64 << 10) || (min & (min - 1)))
        return -1;
    rec = min;
    if (comma && (ca_parse_size(comma + 1, &rec) != 0 || rec < min))
        return -1;
    ca_sim.granularity = min;
    ca_sim.granularity_recommended = rec;
    return 0;
}

static int parse_version(const char *v, int *out)
{
    unsigned n;
    if (parse_uint(v, CUDA_VERSION, &n) != 0 || n < 10000)
        return -1;
    *out = (int)n;
    return 0;
}

int ca_sim_driver_version(void)
{
    static int version; /* 0: not read yet */
    int v = __atomic_load_n(&version, __ATOMIC_RELAXED);
    if (!v) {
        const char *env = getenv("CUDALLOC_SIM_DRIVER_VERSION");
        if (!env || !*env || parse_version(env, &v) != 0)
            v = CUDA_VERSION;
        __atomic_store_n(&version, v, __ATOMIC_RELAXED);
    }
    return v;
}

int ca_sim_read_env(void)
{
    const char *version = getenv("CUDALLOC_SIM_DRIVER_VERSION");
    int v;
    if (version && *version && parse_version(version, &v) != 0) {
        fprintf(stderr, "simgpu: CUDALLOC_SIM_DRIVER_VERSION='%s' is not a driver version; use 1000 x major + "
                        "10 x minor, 10000 to %d (12040 is CUDA 12.4)\n", version, CUDA_VERSION);
        return -1;
    }
    const char *mem = getenv("CUDALLOC_SIM_MEMORY");
    const char *late = getenv("CUDALLOC_SIM_LATE_EVENTS");
    const char *devs = getenv("CUDALLOC_SIM_DEVICES");
    const char *vmm = getenv("CUDALLOC_SIM_VMM");
    const char *gran = getenv("CUDALLOC_SIM_GRANULARITY");
    unsigned ndev = 1;

    /* one size syntax across cudalloc: util/size.h (KB, MB, GB are powers of 1024 too) */
    size_t capacity = DEFAULT_MEMORY;
    if (mem && *mem && (ca_parse_size(mem, &capacity) != 0 || capacity == 0)) {
        fprintf(stderr, "simgpu: CUDALLOC_SIM_MEMORY='%s' is not a size; use bytes or a "
                        "number with KiB, MiB, GiB (or KB, MB, GB, the same), e.g. 8GiB\n", mem);
        return -1;
    }
    ca_sim.capacity = capacity;
    ca_sim.late_events = 0;
    if (late && *late && parse_uint(late, 1000000000u, &ca_sim.late_events) != 0) {
        fprintf(stderr, "simgpu: CUDALLOC_SIM_LATE_EVENTS='%s' is not a count; use a whole "
                        "number of queries, 0 or more (e.g. 2)\n", late);
        return -1;
    }
    if (devs && *devs && (parse_uint(devs, SIMGPU_MAX_DEVICES, &ndev) != 0 || ndev == 0)) {
        fprintf(stderr, "simgpu: CUDALLOC_SIM_DEVICES='%s' is not a device count; use 1 to %d\n",
                devs, SIMGPU_MAX_DEVICES);
        return -1;
    }
    ca_sim.ndev = (int)ndev;
    ca_sim.vmm = 1;
    if (vmm && *vmm && strcmp(vmm, "1") != 0 && strcmp(vmm, "0") != 0 && strcmp(vmm, "nofd") != 0) {
        fprintf(stderr, "simgpu: CUDALLOC_SIM_VMM='%s' is not 0, 1 or nofd; use 0 for devices without "
                        "virtual memory management, nofd for VMM without shareable handles\n", vmm);
        return -1;
    }
    if (read_granularity(gran) != 0) {
        fprintf(stderr, "simgpu: CUDALLOC_SIM_GRANULARITY='%s' is not MINIMUM[,RECOMMENDED]; use sizes that are "
                        "powers of two from 64KiB (the recommended one any size from the minimum), e.g. 2MiB,6MiB\n",
                gran);
        return -1;
    }
    if (vmm && !strcmp(vmm, "0"))
        ca_sim.vmm = 0;
    if (vmm && !strcmp(vmm, "nofd"))
        ca_sim.vmm = CA_SIM_VMM_NO_FD;
    return ca_sim_read_fail(getenv("CUDALLOC_SIM_FAIL"));
}
