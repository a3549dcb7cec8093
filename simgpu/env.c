/* The environment variables of simgpu, read once by the first cuInit. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "simgpu/sim.h"

#define DEFAULT_MEMORY ((uint64_t)16 << 30)

/* "8GiB", "512MiB", "1073741824": binary units KiB/MiB/GiB, decimal KB/MB/GB,
 * case-insensitive; at least one byte. */
static int parse_size(const char *s, uint64_t *out)
{
    static const struct { const char *unit; uint64_t mult; } units[] = {
        {"", 1},
        {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30},
        {"KB", 1000ull}, {"MB", 1000ull * 1000}, {"GB", 1000ull * 1000 * 1000},
    };
    if (!isdigit((unsigned char)s[0]))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || v == 0)
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcasecmp(end, units[i].unit) != 0)
            continue;
        if (v > UINT64_MAX / units[i].mult)
            return -1;
        *out = v * units[i].mult;
        return 0;
    }
    return -1;
}

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
    unsigned ndev = 1;

    ca_sim.capacity = DEFAULT_MEMORY;
    if (mem && *mem && parse_size(mem, &ca_sim.capacity) != 0) {
        fprintf(stderr, "simgpu: CUDALLOC_SIM_MEMORY='%s' is not a size; use bytes or a "
                        "number with KiB, MiB, GiB, KB, MB or GB (e.g. 8GiB)\n", mem);
        return -1;
    }
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
    return 0;
}
