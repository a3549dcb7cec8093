/* What each simulated device has in use, against CUDALLOC_SIM_MEMORY. Every
 * allocation path (cuMemAlloc, cuMemAllocAsync, cuMemCreate) charges here, so
 * a full device refuses all of them alike. */
#include "simgpu/sim.h"

int ca_sim_charge(int dev, size_t bytes)
{
    struct ca_sim_device *d = &ca_sim.dev[dev];
    if (bytes > ca_sim.capacity - d->used) {
        ca_sim.n.out_of_memory++;
        return -1;
    }
    d->used += bytes;
    if (d->used > d->peak)
        d->peak = d->used;
    return 0;
}

void ca_sim_uncharge(int dev, size_t bytes)
{
    ca_sim.dev[dev].used -= bytes;
}
