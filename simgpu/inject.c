/* Injected errors (CUDALLOC_SIM_FAIL), for tests of code that must take each
 * answer for what it says: a call named there answers the given error instead
 * of doing its work, after a number of calls that succeed as usual, for a
 * number of calls (or all later ones).
 *
 *     CUDALLOC_SIM_FAIL=cuEventQuery:CUDA_ERROR_INVALID_HANDLE,cuCtxSynchronize:999:2:1
 *
 * is NAME:ERROR[:AFTER[:TIMES]]: ERROR a CUresult name or number, AFTER the
 * calls let through first (0), TIMES how many fail (0, the default: every
 * one after). A sticky error (cuda.h: "any further CUDA work will return the
 * same error") is sticky here too: once injected, every driver call that
 * needs an initialized driver answers it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simgpu/sim.h"
#include "util/cuda_sticky.h"

struct rule {
    const char *call;
    CUresult error;
    unsigned long after, times, seen;
};

#define MAX_RULES 16
static struct rule rules[MAX_RULES];
static int nrules;
static CUresult sticky_error; /* read with __atomic */

static const char *const injectable[] = {
    "cuCtxPushCurrent", "cuCtxPopCurrent", "cuCtxSynchronize", "cuCtxRecordEvent", "cuEventCreate",
    "cuEventRecord", "cuEventQuery", "cuEventSynchronize", "cuEventDestroy", "cuStreamWaitEvent",
    "cuStreamSynchronize", "cuStreamQuery", "cuStreamIsCapturing", "cuMemAlloc", "cuMemFree",
    "cuMemAllocAsync", "cuMemFreeAsync", "cuMemGetInfo", "cuMemAddressReserve", "cuMemAddressFree",
    "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemSetAccess",
};

static const struct {
    int code;
    const char *name;
} names[] = {
#define SIM_ERROR(code, rt_name, drv_name, text) {code, drv_name},
#include "simgpu/error_table.h"
#undef SIM_ERROR
};

static int sticky(CUresult r) { return ca_cuda_sticky(r); }

static int parse_error(const char *s, CUresult *out)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].name && !strcmp(names[i].name, s)) {
            *out = (CUresult)names[i].code;
            return 0;
        }
    char *end;
    long v = strtol(s, &end, 10);
    if (*s && !*end && v > 0 && v < 100000) {
        *out = (CUresult)v;
        return 0;
    }
    return -1;
}

static int parse_count(const char *s, unsigned long *out)
{
    char *end;
    if (!*s || *s == '-')
        return -1;
    *out = strtoul(s, &end, 10);
    return *end ? -1 : 0;
}

static const char *known_call(const char *s)
{
    for (size_t i = 0; i < sizeof injectable / sizeof injectable[0]; i++)
        if (!strcmp(injectable[i], s))
            return injectable[i];
    return NULL;
}

static int bad(const char *spec, const char *what)
{
    fprintf(stderr, "simgpu: CUDALLOC_SIM_FAIL='%s': %s; use NAME:ERROR[:AFTER[:TIMES]],... with NAME one of "
                    "cuCtxPushCurrent, cuCtxPopCurrent, cuCtxSynchronize, cuCtxRecordEvent, cuEventCreate, "
                    "cuEventRecord, cuEventQuery, cuEventSynchronize, cuEventDestroy, cuStreamWaitEvent, "
                    "cuStreamSynchronize, cuStreamQuery, cuStreamIsCapturing, cuMemAlloc, cuMemFree, "
                    "cuMemAllocAsync, cuMemFreeAsync, cuMemGetInfo, cuMemAddressReserve, cuMemAddressFree, "
                    "cuMemCreate, cuMemRelease, cuMemMap, cuMemUnmap, cuMemSetAccess, and ERROR a CUresult name "
                    "(CUDA_ERROR_INVALID_HANDLE) or number\n", spec, what);
    return -1;
}

int ca_sim_read_fail(const char *spec)
{
    nrules = 0;
    __atomic_store_n(&sticky_error, CUDA_SUCCESS, __ATOMIC_RELAXED);
    if (!spec || !*spec)
        return 0;
    char buf[1024];
    if (strlen(spec) >= sizeof buf)
        return bad(spec, "too long");
    strcpy(buf, spec);
    for (char *item = strtok(buf, ","); item; item = strtok(NULL, ",")) {
        char *field[4] = {0};
        int n = 0;
        for (char *f = item; f && n < 4; n++) {
            field[n] = f;
            f = strchr(f, ':');
            if (f)
                *f++ = 0;
        }
        struct rule r = {0};
        if (nrules == MAX_RULES)
            return bad(spec, "more than 16 rules");
        if (n < 2 || !(r.call = known_call(field[0])))
            return bad(spec, n < 2 ? "a rule without an error" : "not a call that can fail here");
        if (parse_error(field[1], &r.error) != 0 || r.error == CUDA_SUCCESS)
            return bad(spec, "not an error");
        if ((field[2] && parse_count(field[2], &r.after) != 0) || (field[3] && parse_count(field[3], &r.times) != 0))
            return bad(spec, "AFTER and TIMES are counts");
        rules[nrules++] = r;
    }
    return 0;
}

CUresult ca_sim_sticky(void)
{
    return __atomic_load_n(&sticky_error, __ATOMIC_RELAXED);
}

/* The rules are read once, at cuInit, before any call can ask. */
CUresult ca_sim_inject(const char *call)
{
    CUresult s = ca_sim_sticky();
    if (s != CUDA_SUCCESS || !nrules)
        return s;
    for (int i = 0; i < nrules; i++) {
        struct rule *r = &rules[i];
        if (strcmp(r->call, call))
            continue;
        unsigned long k = __atomic_fetch_add(&r->seen, 1, __ATOMIC_RELAXED);
        if (k < r->after || (r->times && k >= r->after + r->times))
            continue;
        __atomic_fetch_add(&ca_sim.n.injected, 1, __ATOMIC_RELAXED);
        if (sticky(r->error))
            __atomic_store_n(&sticky_error, r->error, __ATOMIC_RELAXED);
        return r->error;
    }
    return CUDA_SUCCESS;
}
