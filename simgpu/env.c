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

int ca_sim_read_env(void)
{
    const char *mem = getenv("CUDALLOC_SIM_MEMORY");
    const char *late = getenv("CUDALLOC_SIM_LATE_EVENTS");
    const char *devs = getenv("CUDALLOC_SIM_DEVICES");
    const char *vmm = getenv("CUDALLOC_SIM_VMM");
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
    if (vmm && !strcmp(vmm, "0"))
        ca_sim.vmm = 0;
    if (vmm && !strcmp(vmm, "nofd"))
        ca_sim.vmm = CA_SIM_VMM_NO_FD;
    return 0;
}
