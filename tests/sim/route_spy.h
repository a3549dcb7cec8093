/* What the route spy (route_spy.c) saw. */
#ifndef ROUTE_SPY_H
#define ROUTE_SPY_H

#include <cuda.h>

#define SPY_MAX 256

struct spy_lookup {
    char symbol[64];
    int version;
    cuuint64_t flags;
};

struct spy_log {
    int n;
    struct spy_lookup lookups[SPY_MAX];
    int mem_alloc, mem_free, mem_alloc_async, mem_get_info;
};

const struct spy_log *spy_log(void);

#endif
