/* Graph memory nodes: cuMemAllocAsync and cuMemFreeAsync in a capture.
 *
 * An allocation node's address is fixed when it is captured and stays the
 * same across launches for the graph's life (cuGraphAddMemAllocNode). Here it
 * is a PROT_NONE reservation from then on; a launch that runs the node backs
 * it with memory (counted against the device, PROT_READ|PROT_WRITE) and its
 * free, in the graph (a free node) or outside it (cuMemFree, cuMemFreeAsync),
 * takes the memory away again. Touching it while it is not allocated is an
 * error, as touching freed memory is. cuMemFreeAsync in a capture must be
 * given a graph allocation (cuMemFreeAsync's note); one freed in its own graph
 * cannot be freed outside it. The reservation goes when the graph does and
 * the memory is not allocated. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "simgpu/sim.h"

static size_t page_round(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (n + page - 1) / page * page;
}

static size_t charged(const struct ca_sim_gmem *m)
{
    return (m->size + CA_SIM_ROUND - 1) / CA_SIM_ROUND * CA_SIM_ROUND;
}

static void set_prot(struct ca_sim_gmem *m, int prot)
{
    struct ca_sim_region *reg = ca_sim_regions_find(&ca_sim.mem, m->base);
    if (reg)
        reg->prot = prot;
}

static void destroy(struct ca_sim_gmem *m)
{
    struct ca_sim_region *reg = ca_sim_regions_find(&ca_sim.mem, m->base);
    if (reg)
        ca_sim_regions_remove(&ca_sim.mem, reg);
    munmap((void *)m->base, page_round(m->size));
    free(m);
}

CUresult ca_sim_gmem_reserve(struct ca_sim_cstate *cs, size_t size, uintptr_t *out)
{
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > SIZE_MAX / 2 || charged(&(struct ca_sim_gmem){.size = size}) > ca_sim.capacity)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct ca_sim_gmem *m = calloc(1, sizeof *m);
    void *p = m ? mmap(NULL, page_round(size), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                : MAP_FAILED;
    if (p == MAP_FAILED) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *m = (struct ca_sim_gmem){.base = (uintptr_t)p, .size = size, .device = cs->ctx->device,
                              .owner = cs->cap->graph};
    struct ca_sim_region reg = {
        .base = m->base, .size = size, .kind = CA_SIM_GRAPH, .device = m->device,
        .id = ca_sim.next_id++, .prot = 0, .gmem = m, .ipc_fd = -1,
    };
    struct CUgraphNode_st *n = NULL;
    if (ca_sim_regions_insert(&ca_sim.mem, &reg) != 0 ||
        !(n = ca_sim_graph_capture_node(cs, CU_GRAPH_NODE_TYPE_MEM_ALLOC))) {
        destroy(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    n->u.mem = m;
    ca_sim.n.graph_allocs++;
    *out = m->base;
    return CUDA_SUCCESS;
}

static struct ca_sim_gmem *gmem_at(uintptr_t p)
{
    struct ca_sim_region *reg = ca_sim_regions_find(&ca_sim.mem, p);
    return reg && reg->base == p && reg->kind == CA_SIM_GRAPH ? reg->gmem : NULL;
}

CUresult ca_sim_gmem_capture_free(struct ca_sim_cstate *cs, uintptr_t p)
{
    struct ca_sim_gmem *m = gmem_at(p);
    if (!m || !m->owner || m->freed_in_graph) {
        ca_sim_capture_invalidate(cs->cap);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct CUgraphNode_st *n = ca_sim_graph_capture_node(cs, CU_GRAPH_NODE_TYPE_MEM_FREE);
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    n->u.mem = m;
    m->freed_in_graph = 1;
    return CUDA_SUCCESS;
}

CUresult ca_sim_gmem_alloc(struct ca_sim_gmem *m)
{
    if (m->live)
        return CUDA_ERROR_INVALID_VALUE;
    if (ca_sim_charge(m->device, charged(m)) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    mprotect((void *)m->base, page_round(m->size), PROT_READ | PROT_WRITE);
    set_prot(m, PROT_READ | PROT_WRITE);
    m->live = 1;
    return CUDA_SUCCESS;
}

void ca_sim_gmem_free(struct ca_sim_gmem *m)
{
    if (!m->live)
        return;
    madvise((void *)m->base, page_round(m->size), MADV_DONTNEED);
    mprotect((void *)m->base, page_round(m->size), PROT_NONE);
    set_prot(m, 0);
    ca_sim_uncharge(m->device, charged(m));
    m->live = 0;
    if (!m->owner)
        destroy(m);
}

void ca_sim_gmem_orphan(struct ca_sim_gmem *m)
{
    m->owner = NULL;
    if (!m->live)
        destroy(m);
}

int ca_sim_gmem_free_at(uintptr_t p, CUresult *r)
{
    struct ca_sim_gmem *m = gmem_at(p);
    if (!m)
        return 0;
    *r = m->live && !m->freed_in_graph ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (*r == CUDA_SUCCESS)
        ca_sim_gmem_free(m);
    return 1;
}

/* A context reset frees its device's graph memory, allocated or not. */
void ca_sim_gmem_drop_device(int device)
{
    for (size_t i = ca_sim.mem.n; i-- > 0;) {
        struct ca_sim_region *reg = &ca_sim.mem.v[i];
        if (reg->kind != CA_SIM_GRAPH || reg->device != device)
            continue;
        struct ca_sim_gmem *m = reg->gmem;
        if (m->live) {
            m->owner = NULL;
            ca_sim_gmem_free(m); /* and destroyed */
        } else if (!m->owner) {
            destroy(m);
        }
    }
}
